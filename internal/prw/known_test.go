package prw

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/signal"
)

// TestLabelPastSeriesEndIsMalformed: a label field of a series named as
// the previous series' (the path that matches names by words) whose value
// runs past the end of its TimeSeries is malformed, however well the
// bytes after it parse: the value would alias the next series.
func TestLabelPastSeriesEndIsMalformed(t *testing.T) {
	req := &prompb.WriteRequest{}
	for i := range 3 {
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
			// no samples: the labels are the whole series
			Labels: []prompb.Label{{Name: "__name__", Value: "m"}, {Name: "job", Value: "j" + string(rune('a'+i))}},
		})
	}
	body, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	// The second series' job label: 0a 09 0a 03 'job' 12 02 'jb'. Make its
	// value (and the label field) 2 bytes longer, past the series' end,
	// into the third series' tag and length.
	at := bytes.Index(body, []byte("\x0a\x09\x0a\x03job\x12\x02jb"))
	if at < 0 {
		t.Fatalf("label not found in % x", body)
	}
	bad := bytes.Clone(body)
	bad[at+1] += 2
	bad[at+8] += 2
	var m signal.Metrics
	var d Decoder
	if _, err := d.DecodeV1(&m, bad); !errors.Is(err, ErrMalformed) {
		t.Fatalf("DecodeV1 = %v, want ErrMalformed", err)
	}
	if m.Len() != 0 {
		t.Fatalf("%d points appended", m.Len())
	}
	// The same request intact decodes (no samples: no points, no error).
	if _, err := d.DecodeV1(&m, body); err != nil {
		t.Fatal(err)
	}
}

// TestFamilyMemo: 1.0 metric names are found by their length and first
// and last words (famMemo) before the map: names that share those but
// differ in the middle, names of 8 and 16 bytes, short names (the map
// only) and a second request on the same Decoder (its families numbered
// anew) all get a descriptor of their own name, one per name, and the
// series ids ComputeSeriesIDs gives.
func TestFamilyMemo(t *testing.T) {
	names := []string{
		"abcdefgh0_12345678", "abcdefgh1_12345678", "abcdefgh22345678x", // 17-18 bytes: same first and last words
		"abcdefgh0_12345678", "metric_8", "metric_16_bytes_", "m7chars", "abcdefgh1_12345678",
		"metric_16_bytes_", "metric_8", "abcdefgh0_12345678",
	}
	// More names than the table's slots, each twice, in two orders: sets
	// that hold two names, names displaced and looked up again.
	var many []string
	for i := range 3 << famMemoBits {
		many = append(many, fmt.Sprintf("metric_%d_total", i))
	}
	for i := range many {
		names = append(names, many[i], many[(i*7)%len(many)])
	}
	for round, rot := range []int{0, 3} {
		req := &prompb.WriteRequest{}
		for i := range names {
			n := names[(i+rot)%len(names)]
			req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
				Labels:  []prompb.Label{{Name: "__name__", Value: n}, {Name: "i", Value: string(rune('a' + i))}},
				Samples: []prompb.Sample{{Value: float64(i), Timestamp: int64(i)}},
			})
		}
		body, err := req.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var d Decoder
		for call := range 2 { // the same Decoder again: call numbers
			var m signal.Metrics
			if _, err := d.DecodeV1(&m, body); err != nil {
				t.Fatal(err)
			}
			if m.Len() != len(names) {
				t.Fatalf("%d points", m.Len())
			}
			distinct := map[string]bool{}
			for p := range m.Len() {
				got := string(m.Bytes(m.Descs[m.Desc[p]].Name))
				if want := names[(p+rot)%len(names)]; got != want {
					t.Fatalf("round %d call %d: point %d named %q, want %q", round, call, p, got, want)
				}
				distinct[got] = true
			}
			if len(m.Descs) != len(distinct) {
				t.Fatalf("%d descriptors for %d names", len(m.Descs), len(distinct))
			}
			ids := slices.Clone(m.SeriesID)
			m.ComputeSeriesIDs()
			if !slices.Equal(ids, m.SeriesID) {
				t.Fatal("series ids differ from ComputeSeriesIDs's")
			}
		}
	}
}

// TestRefsMatchOneAtATime: 2.0's label references read in pairs
// (refPairs) and the rest one at a time give what reading every reference
// one at a time gives: the pairs, an odd count, a reference out of the
// symbols table, on references of one, two and three bytes, split over
// several packed fields, and truncated varints (malformed).
func TestRefsMatchOneAtATime(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 8))
	var d Decoder
	for n := range 300 {
		nsym := 1 + r.IntN(40000)
		d.symbols = d.symbols[:0]
		for s := range nsym {
			d.symbols = append(d.symbols, signal.MakeStr(s, s%7))
		}
		// fields of packed references
		var fields [][]uint64
		for range 1 + r.IntN(3) {
			var f []uint64
			for range r.IntN(12) {
				x := uint64(r.IntN(nsym))
				switch r.IntN(20) {
				case 0:
					x = uint64(nsym + r.IntN(3)) // out of range
				case 1:
					x = uint64(r.IntN(128))
				}
				f = append(f, x)
			}
			fields = append(fields, f)
		}
		truncate := n%17 == 0
		var b []byte
		var starts []int
		for _, f := range fields {
			var p []byte
			for _, x := range f {
				p = appendVarint(p, x)
			}
			if truncate && len(p) > 0 && p[len(p)-1] < 0x80 && len(p) > 1 && p[len(p)-2] >= 0x80 {
				p = p[:len(p)-1]
			}
			starts = append(starts, len(b))
			b = appendVarint(b, uint64(len(p)))
			b = append(b, p...)
		}
		// the reference: one reference at a time
		var want []label
		wantOdd, wantBad, wantErr := false, false, false
		var pending uint64
		for fi, f := range fields {
			s, e := lenField(b, starts[fi])
			have := wantOdd
			_ = f
			for s < e && !wantErr {
				var x uint64
				if x, s = uvarint(b[:e], s); s < 0 {
					wantErr = true
					break
				}
				if x >= uint64(nsym) {
					wantBad = true
				}
				if !have {
					pending, have = x, true
					continue
				}
				if !wantBad {
					want = append(want, label{d.symbols[pending], d.symbols[x], uint32(x) + 1, uint32(pending) + 1})
				}
				have = false
			}
			wantOdd = have
			if wantErr {
				break
			}
		}
		var got []label
		odd, bad, gotErr := false, false, false
		var pend uint64
		for fi := range fields {
			if d.refs(&got, b, starts[fi], wtLen, &odd, &pend, &bad) < 0 {
				gotErr = true
				break
			}
		}
		if gotErr != wantErr {
			t.Fatalf("case %d: error %v, want %v", n, gotErr, wantErr)
		}
		if wantErr {
			continue
		}
		if odd != wantOdd || bad != wantBad || !slices.Equal(got, want) {
			t.Fatalf("case %d: odd %v bad %v %v, want odd %v bad %v %v", n, odd, bad, got, wantOdd, wantBad, want)
		}
	}
}

// TestPlainSampleAgreesWithSampleV1: the plain-sample shortcut takes a
// Sample field only when it is {0x09 value, 0x10 timestamp} and nothing
// else, and then reads what sampleV1 reads; it leaves every other field
// (reordered, repeated, extra or missing fields, a length past the end,
// a varint longer than the field) to the field loops.
func TestPlainSampleAgreesWithSampleV1(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 13))
	taken := 0
	for n := range 5000 {
		var msg []byte
		plain := r.IntN(2) == 0
		ts := uint64(r.Int64N(1<<62)) >> uint(r.IntN(62))
		if n%7 == 0 {
			ts = uint64(-int64(ts)) // negative: ten bytes
		}
		v := r.Uint64()
		if plain {
			msg = appendFixed64(msg, 1, v)
			msg = appendVarint(appendVarint(msg, 2<<3|wtVarint), ts)
		} else {
			for range 1 + r.IntN(3) {
				switch r.IntN(4) {
				case 0:
					msg = appendFixed64(msg, 1, r.Uint64())
				case 1:
					msg = appendVarint(appendVarint(msg, 2<<3|wtVarint), uint64(r.Int64N(1<<40)))
				case 2:
					msg = appendVarint(appendVarint(msg, 5<<3|wtVarint), 7) // unknown field
				case 3:
					msg = appendFixed64(msg, 1, r.Uint64())
					msg = appendVarint(appendVarint(msg, 2<<3|wtVarint), 1)
				}
			}
		}
		field := appendVarint([]byte{2<<3 | wtLen}, uint64(len(msg)))
		field = append(field, msg...)
		body := append(append([]byte{}, field...), make([]byte, r.IntN(3))...) // bytes after it
		switch r.IntN(8) {
		case 0:
			body = body[:len(field)-1] // truncated
		case 1:
			body[1]++ // a length past the message
		}
		// The arena goes on past the series' end (bytes of anything,
		// continuation bits set or not), which the word read of the
		// timestamp may load but must not take.
		arena := append(body[:len(body):len(body)], make([]byte, r.IntN(12))...)
		for k := len(body); k < len(arena); k++ {
			arena[k] = byte(r.Uint32())
		}
		gv, gts, ge := plainSample(arena, 0, len(body))
		if ge == 0 {
			continue
		}
		taken++
		ss, se := lenField(body, 1)
		var wv uint64
		var wts int64
		if ss < 0 || !sampleV1(body, ss, se, &wv, &wts) {
			t.Fatalf("case %d: plainSample took % x, sampleV1 refuses it", n, body)
		}
		if ge != se || gv != wv || gts != wts {
			t.Fatalf("case %d: plainSample %x %d end %d, sampleV1 %x %d end %d (% x)", n, gv, gts, ge, wv, wts, se, body)
		}
		// what it takes is written as a plain one (the random fields may
		// happen to be a value and a timestamp)
		if _, j := uvarint(msg, 10); len(msg) < 11 || msg[0] != 1<<3|wtI64 || msg[9] != 2<<3|wtVarint || j != len(msg) {
			t.Fatalf("case %d: plainSample took a message that is not plain: % x", n, msg)
		}
	}
	if taken < 1000 {
		t.Fatalf("plainSample took only %d of 5000 fields", taken)
	}
}
