package prw

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/signal"
)

// fuzzDecode checks the package invariants on any input: no panic; a
// malformed message leaves the batch as it was; otherwise every appended
// point has sorted, unique, non-empty label names and the columns agree.
func fuzzDecode(t *testing.T, v int, body []byte) {
	var m signal.Metrics
	var d Decoder
	// A batch that already holds a request, to check nothing of it changes.
	b1, b2 := benchBodies(3, 2)
	seed := b1
	if v == 2 {
		seed = b2
	}
	if _, err := decode(&d, v, &m, seed); err != nil {
		t.Fatal(err)
	}
	n, nbuf, nattrs, ndescs := m.Len(), len(m.Buf), m.Attrs.Len(), len(m.Descs)
	bodyCopy := slices.Clone(body)
	st, err := decode(&d, v, &m, body)
	if !slices.Equal(body, bodyCopy) {
		t.Fatal("decoder modified its input")
	}
	var pe *PartialError
	switch {
	case errors.Is(err, ErrMalformed):
		if m.Len() != n || len(m.Buf) != nbuf || m.Attrs.Len() != nattrs || len(m.Descs) != ndescs {
			t.Fatalf("malformed input changed the batch: %v", err)
		}
		return
	case errors.As(err, &pe):
		if pe.Dropped == 0 || len(pe.Problems) == 0 || pe.Dropped != st.Dropped {
			t.Fatalf("partial error without problems: %+v", pe)
		}
	case err != nil:
		t.Fatalf("error neither malformed nor partial: %v", err)
	}
	// A series of exemplars only has a point without a value to carry
	// them (exemplarPoint): counted apart, and never without exemplars.
	carriers := 0
	for i := n; i < m.Len(); i++ {
		if m.NumberType[i] == signal.ValueEmpty && m.Descs[m.Desc[i]].Type == signal.MetricGauge {
			if r := m.Exemplars[i]; r.End <= r.Start {
				t.Fatalf("point %d has no value and no exemplars", i)
			}
			carriers++
		}
	}
	if got := m.Len() - n; got != st.Samples+st.Histograms+carriers {
		t.Fatalf("%d points appended, stats say %d samples + %d histograms, and %d carry exemplars only", got, st.Samples, st.Histograms, carriers)
	}
	// The decoder sets each point's series id as it appends it: the ids
	// must be ComputeSeriesIDs's.
	ids := slices.Clone(m.SeriesID)
	m.ComputeSeriesIDs()
	if !slices.Equal(ids, m.SeriesID) {
		t.Fatalf("decoded series ids %x, ComputeSeriesIDs %x", ids, m.SeriesID)
	}
	for i := n; i < m.Len(); i++ {
		if m.Descs[m.Desc[i]].Name.Len() == 0 {
			t.Fatalf("point %d has no name", i)
		}
		r := m.Attr[i]
		for a := r.Start; a < r.End; a++ {
			k := m.Keys.Name(m.Attrs.Key[a])
			if k == "" || k == "__name__" {
				t.Fatalf("point %d: label name %q", i, k)
			}
			if a > r.Start && m.Keys.Name(m.Attrs.Key[a-1]) >= k {
				t.Fatalf("point %d: labels not sorted and unique", i)
			}
		}
	}
}

// fuzzMemo checks that a body of version v decoded with a series id
// memo, its series missing it and then hitting it, decodes as without one.
func fuzzMemo(t *testing.T, v int, body []byte) {
	var plain Decoder
	plain.useIDMemo(nil)
	want, wantSt := decodeMemoV(t, &plain, v, body)
	var d Decoder
	d.useIDMemo(NewIDMemo(256))
	for round := range 2 {
		got, st := decodeMemoV(t, &d, v, body)
		if st != wantSt {
			t.Fatalf("round %d with the memo: %s, without: %s", round, st, wantSt)
		}
		if !strings.Contains(st, "malformed") {
			sameBatch(t, fmt.Sprintf("round %d with the memo", round), want, got)
		}
	}
}

func FuzzDecodeV1(f *testing.F) {
	load := oracleLoad()
	b, _ := v1Request(load).Marshal()
	f.Add(b)
	b1, _ := benchBodies(5, 3)
	f.Add(b1)
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00})
	// Series named as the previous one's (knownLabelsV1), 200 of them, and
	// 50 metric names (famMemo).
	b1, _ = benchBodies(200, 4)
	f.Add(b1)
	// Shapes the series id memo must not take, or take as the decoder
	// alone does (memoLoads).
	for _, b := range memoLoads() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzDecode(t, 1, body)
		fuzzMemo(t, 1, body)
	})
}

func FuzzDecodeV2(f *testing.F) {
	load := oracleLoad()
	b, _ := v2Request(load, 7, true).Marshal()
	f.Add(b)
	_, b2 := benchBodies(5, 3)
	f.Add(b2)
	f.Add([]byte{0x22, 0x00, 0x2a, 0x02, 0x0a, 0x00})
	// Over 128 symbols: references of two bytes (refPairs).
	_, b2 = benchBodies(200, 4)
	f.Add(b2)
	// Label references split over two packed fields, the first odd.
	f.Add([]byte{0x22, 0x00, 0x22, 0x08, '_', '_', 'n', 'a', 'm', 'e', '_', '_', 0x22, 0x01, 'm', 0x22, 0x01, 'a',
		0x2a, 0x0d, 0x0a, 0x03, 0x01, 0x02, 0x03, 0x0a, 0x01, 0x03, 0x12, 0x02, 0x10, 0x01})
	// Shapes the series id memo must not take, or take as the decoder
	// alone does (memoLoadsV2; "big" is left out: 2,000 series).
	for name, b := range memoLoadsV2() {
		if name != "big" {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzDecode(t, 2, body)
		fuzzMemo(t, 2, body)
	})
}
