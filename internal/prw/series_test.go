package prw

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/signal"
)

// reuseLoad is series whose label values repeat in the patterns attrs
// reuses a value's term for: a constant label, one that changes every
// series (attrs stops comparing it, then retries every 16th series), one
// that holds for 7 series, one that alternates, names that shift position
// or change (to one with the same value), values of equal length that differ, and series with several
// samples, exemplars between them and a stale marker; names of 1 to 19
// bytes and values of 1 to 160.
func reuseLoad(r *rand.Rand, n int) []prompb.TimeSeries {
	var out []prompb.TimeSeries
	for i := range n {
		ls := []prompb.Label{{Name: "__name__", Value: fmt.Sprintf("m_%d", i/40)}}
		if i%11 == 4 { // another name, same value, same position
			ls = append(ls, prompb.Label{Name: "a_kons", Value: "same"})
		} else {
			ls = append(ls, prompb.Label{Name: "a_const", Value: "same"})
		}
		if i%9 != 3 { // a label missing now and then: positions shift
			ls = append(ls, prompb.Label{Name: "b_each", Value: fmt.Sprintf("v%05d", i)})
		}
		ls = append(ls, prompb.Label{Name: "c_run", Value: fmt.Sprintf("r%d", i/7)})
		ls = append(ls, prompb.Label{Name: "d_alt", Value: []string{"xy", "yx"}[i%2]})
		if i%13 == 5 {
			ls = append(ls, prompb.Label{Name: "d_extra", Value: "same"}) // another name at a reused position
		}
		ls = append(ls, prompb.Label{Name: "e_rand", Value: fmt.Sprintf("%c", 'a'+r.IntN(3))})
		// A name too long for 1.0's word match, a one-byte one, and now and
		// then a value too long for a one-byte length.
		ls = append(ls, prompb.Label{Name: "f_a_long_label_name", Value: "x"})
		g := "short"
		if i%17 == 8 {
			g = strings.Repeat("long", 40)
		}
		ls = append(ls, prompb.Label{Name: "g", Value: g})
		ts := prompb.TimeSeries{Labels: ls}
		for k := range 1 + i%3 {
			v := float64(i*10 + k)
			if k == 2 {
				v = staleNaN
			}
			ts.Samples = append(ts.Samples, prompb.Sample{Value: v, Timestamp: int64(1000*i + k)})
		}
		if i%5 == 0 {
			ts.Exemplars = []prompb.Exemplar{{Labels: []prompb.Label{{Name: "trace_id", Value: "t"}}, Value: 1, Timestamp: 7}}
		}
		out = append(out, ts)
	}
	return out
}

// TestDecodeReusesValueTermsExactly: on loads where label values repeat in
// every pattern attrs reuses a value's hash term for, with both versions,
// every series keeps exactly its labels and samples (stale markers bit for
// bit) and every series id equals ComputeSeriesIDs's.
func TestDecodeReusesValueTermsExactly(t *testing.T) {
	for seed := range uint64(5) {
		ts := reuseLoad(rand.New(rand.NewPCG(seed, 1)), 300)
		req := &prompb.WriteRequest{Timeseries: ts}
		b1, err := req.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		st := writev2.NewSymbolTable()
		r2 := &writev2.Request{}
		for _, s := range ts {
			var refs []uint32
			for _, l := range s.Labels {
				refs = append(refs, st.Symbolize(l.Name), st.Symbolize(l.Value))
			}
			w := writev2.TimeSeries{LabelsRefs: refs}
			for _, x := range s.Samples {
				w.Samples = append(w.Samples, writev2.Sample{Value: x.Value, Timestamp: x.Timestamp})
			}
			r2.Timeseries = append(r2.Timeseries, w)
		}
		r2.Symbols = st.Symbols()
		b2, err := r2.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		for v, body := range map[int][]byte{1: b1, 2: b2} {
			var m signal.Metrics
			var d Decoder
			// Twice into one batch: the second call starts from the
			// decoder's state after the first.
			for round := range 2 {
				if _, err := decode(&d, v, &m, body); err != nil {
					t.Fatalf("v%d: %v", v, err)
				}
				ids := slices.Clone(m.SeriesID)
				m.ComputeSeriesIDs()
				if !slices.Equal(ids, m.SeriesID) {
					t.Fatalf("seed %d v%d round %d: decoded series ids differ from ComputeSeriesIDs", seed, v, round)
				}
			}
			got := readBack(t, &m)
			if len(got) != len(ts) {
				t.Fatalf("v%d: %d series, want %d", v, len(got), len(ts))
			}
			for _, s := range ts {
				ps := got[sortedLabels(s.Labels)]
				if len(ps) != 2*len(s.Samples) {
					t.Fatalf("v%d: series %s: %d points, want %d", v, sortedLabels(s.Labels), len(ps), 2*len(s.Samples))
				}
				for k, p := range ps {
					w := s.Samples[k%len(s.Samples)]
					if p.t != w.Timestamp || p.v != math.Float64bits(w.Value) {
						t.Fatalf("v%d: series %s point %d: (%d, %#x), want (%d, %#x)", v, sortedLabels(s.Labels), k, p.t, p.v, w.Timestamp, math.Float64bits(w.Value))
					}
				}
			}
		}
	}
}
