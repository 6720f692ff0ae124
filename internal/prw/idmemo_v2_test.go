package prw

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluice-dev/sluice/internal/signal"
)

// v2Refs is a TimeSeries' label references field (1), packed.
func v2Refs(refs ...uint64) []byte {
	var p []byte
	for _, r := range refs {
		p = protowire.AppendVarint(p, r)
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), p)
}

// v2RefsUnpacked is the same references written one field each.
func v2RefsUnpacked(refs ...uint64) []byte {
	var b []byte
	for _, r := range refs {
		b = protowire.AppendVarint(protowire.AppendTag(b, 1, protowire.VarintType), r)
	}
	return b
}

// v2Sample is a Sample field (2) of a TimeSeries.
func v2Sample(v float64, ts int64) []byte {
	s, _ := (&writev2.Sample{Value: v, Timestamp: ts}).Marshal()
	return protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), s)
}

// v2Series is a TimeSeries field (5) of a Request holding fields.
func v2Series(fields ...[]byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), bytes.Join(fields, nil))
}

// v2Symbols are symbols fields (4).
func v2Symbols(syms ...string) []byte {
	var b []byte
	for _, s := range syms {
		b = protowire.AppendString(protowire.AppendTag(b, 4, protowire.BytesType), s)
	}
	return b
}

// memoLoadsV2 are 2.0 requests for the memo tests: plain ones, whose
// series the memo takes, and every shape it must not take or must take
// as the decoder alone does.
func memoLoadsV2() map[string][]byte {
	loads := map[string][]byte{}
	_, loads["bench"] = benchBodies(100, 10)
	_, loads["shared"] = benchBodiesShared(200, 10)
	// Over 16,384 symbols: references of three bytes.
	_, loads["big"] = benchBodies(2000, 10)
	loads["oracle"], _ = v2Request(oracleLoad(), 7, true).Marshal()
	const ts = 1700000000000
	long := strings.Repeat("v", 200)
	syms := []string{
		"", "__name__", "up", "job", "x", "zone", "a", // 0-6
		"empty", "x", "\xff", long, "abc", "abc\x00", // 7-12: 8 is 4 again
		"abcdefgh", "abcdefgh\x00", "abcdefghi", "bcdefghi", // 13-16
	}
	loads["odd"] = bytes.Join([][]byte{
		v2Symbols(syms...),
		// the plain series
		v2Series(v2Refs(1, 2, 3, 4, 5, 6), v2Sample(1, ts)),
		// unsorted: sorted in the batch, the id of the sorted labels
		v2Series(v2Refs(1, 2, 5, 6, 3, 4), v2Sample(2, ts)),
		// an empty value: the label is dropped
		v2Series(v2Refs(1, 2, 7, 0, 3, 4, 5, 6), v2Sample(3, ts)),
		// a duplicate symbol: the same string at another reference
		v2Series(v2Refs(1, 2, 3, 8, 5, 6), v2Sample(4, ts)),
		// the references in two fields, the first odd
		v2Series(v2Refs(1, 2, 3), v2Refs(4, 5, 6), v2Sample(5, ts)),
		// in two fields of whole pairs: the first alone is not the key
		v2Series(v2Refs(1, 2, 3, 4), v2Refs(5, 6), v2Sample(6, ts)),
		v2Series(v2Refs(1, 2, 3, 4), v2Sample(6.5, ts)),
		// unpacked
		v2Series(v2RefsUnpacked(1, 2, 3, 4, 5, 6), v2Sample(7, ts)),
		// after the sample
		v2Series(v2Sample(8, ts), v2Refs(1, 2, 3, 4, 5, 6)),
		// out of the table, odd, invalid UTF-8, a duplicate name, no name:
		// dropped
		v2Series(v2Refs(1, 2, 3, 999), v2Sample(9, ts)),
		v2Series(v2Refs(1, 2, 3), v2Sample(10, ts)),
		v2Series(v2Refs(1, 2, 3, 9), v2Sample(11, ts)),
		v2Series(v2Refs(1, 2, 3, 4, 3, 6), v2Sample(12, ts)),
		v2Series(v2Refs(3, 4), v2Sample(13, ts)),
		// a long value; values alike in their words but not their length
		v2Series(v2Refs(1, 2, 3, 10), v2Sample(14, ts)),
		v2Series(v2Refs(1, 2, 3, 11), v2Sample(15, ts)),
		v2Series(v2Refs(1, 2, 3, 12), v2Sample(16, ts)),
		v2Series(v2Refs(1, 2, 3, 13), v2Sample(17, ts)),
		v2Series(v2Refs(1, 2, 3, 14), v2Sample(18, ts)),
		v2Series(v2Refs(1, 2, 3, 15), v2Sample(19, ts)),
		v2Series(v2Refs(1, 2, 3, 16), v2Sample(20, ts)),
		// a value whose symbol is the request's last bytes (symbols may
		// follow the series)
		v2Series(v2Refs(1, 2, 3, uint64(len(syms))), v2Sample(21, ts)),
		v2Symbols("zz"),
	}, nil)
	return loads
}

// decodeMemoV is decodeMemo for version v.
func decodeMemoV(t *testing.T, d *Decoder, v int, body []byte) (*signal.Metrics, string) {
	t.Helper()
	m := &signal.Metrics{}
	st, err := decode(d, v, m, body)
	return m, fmt.Sprintf("%+v %v", st, err)
}

// TestIDMemoV2MatchesNoMemo: a 2.0 request decoded with the memo, its
// series first missing then hitting, gives what the decoder gives without
// it, in every shape of memoLoadsV2.
func TestIDMemoV2MatchesNoMemo(t *testing.T) {
	for name, body := range memoLoadsV2() {
		var plain Decoder
		plain.useIDMemo(nil)
		want, wantSt := decodeMemoV(t, &plain, 2, body)
		var d Decoder
		d.useIDMemo(NewIDMemo(1 << 16))
		for round := range 3 {
			h0 := d.ids.hits
			got, st := decodeMemoV(t, &d, 2, body)
			if st != wantSt {
				t.Fatalf("%s round %d: %s, want %s", name, round, st, wantSt)
			}
			sameBatch(t, fmt.Sprintf("%s round %d", name, round), want, got)
			if round > 0 && d.ids.hits == h0 {
				t.Fatalf("%s round %d: no series hit the memo", name, round)
			}
		}
	}
}

// TestIDMemoV2OddShapes: in memoLoadsV2's odd request, the series that
// are one series in several forms (unsorted, an empty value, a duplicate
// symbol, references in one field or two, packed or not, after the
// sample) share the plain form's id, and the
// values alike in their words but not their length get ids of their own.
func TestIDMemoV2OddShapes(t *testing.T) {
	body := memoLoadsV2()["odd"]
	var d Decoder
	d.useIDMemo(NewIDMemo(1 << 16))
	for round := range 2 {
		m, st := decodeMemoV(t, &d, 2, body)
		if !strings.Contains(st, "5 invalid series dropped") {
			t.Fatalf("round %d: %s", round, st)
		}
		id := func(v float64) uint64 {
			for p := range m.Len() {
				if m.Number[p] == math.Float64bits(v) {
					return m.SeriesID[p]
				}
			}
			t.Fatalf("no point of value %v", v)
			return 0
		}
		for _, v := range []float64{2, 3, 4, 5, 6, 7, 8} {
			if id(v) != id(1) {
				t.Fatalf("round %d: the form of sample %v has id %x, the plain form %x", round, v, id(v), id(1))
			}
		}
		if id(6.5) == id(1) {
			t.Fatalf("round %d: {job=x} has the id of {job=x, zone=a}", round)
		}
		seen := map[uint64]float64{}
		for _, v := range []float64{14, 15, 16, 17, 18, 19, 20, 21} {
			if o, ok := seen[id(v)]; ok {
				t.Fatalf("round %d: samples %v and %v, of different values, share id %x", round, o, v, id(v))
			}
			seen[id(v)] = v
		}
	}
}

// TestIDMemoV1V2SameSeries: the 1.0 and the 2.0 forms of the same series
// decoded by one decoder in turn (each form's key has its own slot) get
// the ids the decoder computes without the memo, and 2.0 requests whose
// symbols tables list the same strings at other references hit the
// entries of the first.
func TestIDMemoV1V2SameSeries(t *testing.T) {
	const n = 300
	b1, b2 := benchBodiesShared(n, 6)
	var plain Decoder
	plain.useIDMemo(nil)
	want, _ := decodeMemoV(t, &plain, 1, b1)
	// The same series with another symbols table: decoys first, and the
	// series in reverse order, so that every reference differs.
	var req writev2.Request
	if err := req.Unmarshal(b2); err != nil {
		t.Fatal(err)
	}
	st := writev2.NewSymbolTable()
	st.Symbolize("decoy")
	st.Symbolize("another decoy")
	other := writev2.Request{}
	for i := len(req.Timeseries) - 1; i >= 0; i-- {
		ts := req.Timeseries[i]
		var refs []uint32
		for _, r := range ts.LabelsRefs {
			refs = append(refs, st.Symbolize(req.Symbols[r]))
		}
		other.Timeseries = append(other.Timeseries, writev2.TimeSeries{LabelsRefs: refs, Samples: ts.Samples})
	}
	other.Symbols = st.Symbols()
	b3, err := other.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	reversed := slices.Clone(want.SeriesID)
	slices.Reverse(reversed)

	var d Decoder
	d.useIDMemo(NewIDMemo(1 << 16))
	for round, c := range []struct {
		v    int
		body []byte
		ids  []uint64
		hit  bool
	}{{1, b1, want.SeriesID, false}, {2, b2, want.SeriesID, false}, {2, b3, reversed, true}, {1, b1, want.SeriesID, true}, {2, b2, want.SeriesID, true}} {
		h0, l0 := d.ids.hits, d.ids.look
		m, st := decodeMemoV(t, &d, c.v, c.body)
		if !slices.Equal(m.SeriesID, c.ids) {
			t.Fatalf("round %d (%d.0): ids differ from the decoder's without the memo (%s)", round, c.v, st)
		}
		hits, looks := d.ids.hits-h0, d.ids.look-l0
		if looks != n || (hits == n) != c.hit || (!c.hit && hits != 0) {
			t.Fatalf("round %d (%d.0): %d of %d lookups hit, want all: %v", round, c.v, hits, looks, c.hit)
		}
	}
}

// TestIDMemoV2OneByteChanged: a 2.0 series whose value, label name or
// metric name differs by one byte from one the memo holds misses and gets
// its own id.
func TestIDMemoV2OneByteChanged(t *testing.T) {
	_, body := benchBodies(100, 10)
	var d Decoder
	d.useIDMemo(NewIDMemo(1 << 16))
	decodeMemoV(t, &d, 2, body)
	for _, change := range []struct{ from, to string }{
		{"value_3_42", "value_3_4X"},           // a value
		{"label_7", "label_X"},                 // a label name (every series has it)
		{"metric_42_total", "metric_42_totaX"}, // a metric name
	} {
		changed := bytes.Replace(body, []byte(change.from), []byte(change.to), 1)
		if bytes.Equal(changed, body) {
			t.Fatalf("%q not in the request", change.from)
		}
		var plain Decoder
		plain.useIDMemo(nil)
		want, _ := decodeMemoV(t, &plain, 2, changed)
		h0, l0 := d.ids.hits, d.ids.look
		got, _ := decodeMemoV(t, &d, 2, changed)
		sameBatch(t, change.to, want, got)
		misses := (d.ids.look - l0) - (d.ids.hits - h0)
		wantMisses := uint32(1)
		if change.from == "label_7" || change.from == "metric_42_total" {
			// a symbol every series (or those of the name) references
			wantMisses = 100
			if change.from == "metric_42_total" {
				wantMisses = 2
			}
		}
		if misses != wantMisses {
			t.Fatalf("%s: %d misses, want %d", change.to, misses, wantMisses)
		}
	}
}

// TestIDMemoV2TrustsItsKey: as for 1.0 (TestIDMemoTrustsItsKey), an entry
// forced under a 2.0 series' key gives that series the entry's id: the
// key is the strings' (the same from another request's table).
func TestIDMemoV2TrustsItsKey(t *testing.T) {
	const ts = 1700000000000
	body := append(v2Symbols("", "__name__", "up", "job", "x"), v2Series(v2Refs(1, 2, 3, 4), v2Sample(1, ts))...)
	var d Decoder
	memo := NewIDMemo(64)
	d.useIDMemo(memo)
	// The key from another table holding the same strings.
	b := []byte("__name__upjobx")
	strs := []signal.Str{signal.MakeStr(0, 8), signal.MakeStr(8, 2), signal.MakeStr(10, 3), signal.MakeStr(13, 1)}
	sk := symbolKeys(nil, b, strs)
	key := v2Key([]label{{strs[0], strs[1], 2, 1}, {strs[2], strs[3], 4, 3}}, sk)
	const forced = 0x1234567890abcdef
	memo.insert(key, forced)
	got, _ := decodeMemoV(t, &d, 2, body)
	if got.SeriesID[0] != forced {
		t.Fatalf("series id %x, want the forced entry's %x", got.SeriesID[0], uint64(forced))
	}
}

// TestSymbolKey: equal strings hash alike wherever they lie in the arena
// (at its end too, where no word is loaded past it); strings alike in
// their words but not their length, or differing in one byte, do not.
func TestSymbolKey(t *testing.T) {
	strs := []string{"", "\x00", "a", "a\x00", "abc", "abc\x00", "abcdefg", "abcdefg\x00", "abcdefgh",
		"abcdefgh\x00", "abcdefghi", "bcdefghi", "abcdefghijklmnop", "abcdefghijklmnop\x00",
		"abcdefghijklmnoq", strings.Repeat("x", 100), strings.Repeat("x", 101)}
	seen := map[uint64]string{}
	for _, s := range strs {
		// s inside a buffer, and s as the buffer's last bytes
		inside := append(append([]byte("pre"), s...), "post-post-post"...)
		end := append([]byte("pre"), s...)
		k := symbolKey(inside, 3, len(s))
		if k2 := symbolKey(end, 3, len(s)); k2 != k {
			t.Fatalf("%q: %x inside, %x at the end", s, k, k2)
		}
		if ks := symbolKeys(nil, end, []signal.Str{signal.MakeStr(3, len(s))}); ks[0] != k {
			t.Fatalf("%q: symbolKeys %x, symbolKey %x", s, ks[0], k)
		}
		if o, ok := seen[k]; ok {
			t.Fatalf("%q and %q share key %x", o, s, k)
		}
		seen[k] = s
	}
}
