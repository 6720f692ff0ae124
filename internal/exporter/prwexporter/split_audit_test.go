package prwexporter

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluice-dev/sluice/internal/exporter/sending"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
)

// partsOfSeries splits body (1.0 or 2.0) and returns the part of each of
// its series, in request order (the parts keep the record's order).
func partsOfSeries(t *testing.T, s *splitter, v2 bool, body []byte) []int {
	t.Helper()
	s.reset(v2)
	if err := s.add(body); err != nil {
		t.Fatal(err)
	}
	var out []int
	for i := range s.parts {
		for range s.parts[i].series {
			out = append(out, i)
		}
	}
	return out
}

// TestSplitEmptyLabelValue (audit20): a label with an empty value is no
// label (every decoder, this one's and Prometheus's, drops it: the series
// up{job="",zone="a"} is up{zone="a"}), so lanes and shard mode put a
// series sent with one in the part of the series without it, the part the
// convert path (which hashes the decoded labels) gives it: otherwise one
// series, as received and as converted (or from two senders), is sent on
// two lanes (samples overtaking each other: out-of-order refusals) or, in
// shard mode, to two endpoints. 1.0 and 2.0, the empty label first, in the
// middle and last, sorted and not.
func TestSplitEmptyLabelValue(t *testing.T) {
	ring := sending.NewRing([]string{"http://a.invalid/w", "http://b.invalid/w", "http://c.invalid/w"})
	for _, mode := range []struct {
		name  string
		shard bool
	}{{"lanes", false}, {"shard", true}} {
		s := newSplitter(4, mode.shard, ring, 3)
		for _, v2 := range []bool{false, true} {
			for _, form := range []string{"first", "middle", "last", "unsorted"} {
				var d prw.Decoder
				var m signal.Metrics
				for i := range 64 {
					zone := fmt.Sprint("z", i)
					plain := []prompb.Label{{Name: "__name__", Value: "up"}, {Name: "zone", Value: zone}}
					var withEmpty []prompb.Label
					switch form {
					case "first":
						withEmpty = []prompb.Label{{Name: "__name__", Value: "up"}, {Name: "a", Value: ""}, {Name: "zone", Value: zone}}
					case "middle":
						withEmpty = []prompb.Label{{Name: "__name__", Value: "up"}, {Name: "job", Value: ""}, {Name: "zone", Value: zone}}
					case "last":
						withEmpty = []prompb.Label{{Name: "__name__", Value: "up"}, {Name: "zone", Value: zone}, {Name: "zz", Value: ""}}
					case "unsorted":
						withEmpty = []prompb.Label{{Name: "zone", Value: zone}, {Name: "job", Value: ""}, {Name: "__name__", Value: "up"}}
					}
					var parts [2]int
					var ids [2]uint64
					for k, ls := range [][]prompb.Label{plain, withEmpty} {
						body := auditBody(t, v2, ls)
						m.Reset()
						var err error
						if v2 {
							_, err = d.DecodeV2(&m, body)
						} else {
							_, err = d.DecodeV1(&m, body)
						}
						if err != nil || m.Len() != 1 {
							t.Fatalf("decode %v: %d points, %v", ls, m.Len(), err)
						}
						ids[k] = m.SeriesID[0]
						got := partsOfSeries(t, s, v2, body)
						if len(got) != 1 {
							t.Fatalf("%v: in %d parts", ls, len(got))
						}
						parts[k] = got[0]
					}
					if ids[0] != ids[1] {
						t.Fatalf("the decoder gives %v and %v different series ids: the test's premise is wrong", plain, withEmpty)
					}
					if parts[0] != parts[1] {
						t.Fatalf("%s v2=%v %s: %v in part %d, the same series %v in part %d", mode.name, v2, form, plain, parts[0], withEmpty, parts[1])
					}
					if want := s.partOf(seriesHash(plain)); parts[0] != want {
						t.Fatalf("%s v2=%v: %v in part %d, the convert path's is %d", mode.name, v2, plain, parts[0], want)
					}
				}
			}
		}
	}
}

// auditBody is a request of one series of labels ls (1.0 or 2.0), one
// sample.
func auditBody(t *testing.T, v2 bool, ls []prompb.Label) []byte {
	t.Helper()
	const ts = 1700000000000
	if !v2 {
		b, err := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: ls, Samples: []prompb.Sample{{Value: 1, Timestamp: ts}}}}}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	syms := []string{""}
	ref := func(s string) uint32 {
		for i, x := range syms {
			if x == s {
				return uint32(i)
			}
		}
		syms = append(syms, s)
		return uint32(len(syms) - 1)
	}
	var refs []uint32
	for _, l := range ls {
		refs = append(refs, ref(l.Name), ref(l.Value))
	}
	b, err := (&writev2.Request{Symbols: syms, Timeseries: []writev2.TimeSeries{{LabelsRefs: refs, Samples: []writev2.Sample{{Value: 1, Timestamp: ts}}}}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSplitV1OddEncodings (audit20): 1.0 series as other encoders may
// write them (labels after the samples, a label's value before its name,
// unknown fields in the series and in a label, the labels unsorted) are
// each copied whole, byte for byte, into the part of the series' decoded
// labels (the convert path's part), and stay there in every later group.
func TestSplitV1OddEncodings(t *testing.T) {
	lab := func(name, value string) []byte {
		b := protowire.AppendTag(nil, 1, protowire.BytesType)
		b = protowire.AppendString(b, name)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		return protowire.AppendString(b, value)
	}
	labValueFirst := func(name, value string) []byte {
		b := protowire.AppendTag(nil, 2, protowire.BytesType)
		b = protowire.AppendString(b, value)
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, name)
		b = protowire.AppendTag(b, 9, protowire.VarintType) // unknown
		return protowire.AppendVarint(b, 7)
	}
	field := func(num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), v)
	}
	sample := func(v float64, ts int64) []byte {
		b := protowire.AppendTag(nil, 1, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(v))
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(ts))
	}
	ring := sending.NewRing([]string{"http://a.invalid/w", "http://b.invalid/w", "http://c.invalid/w"})
	for _, shard := range []bool{false, true} {
		s := newSplitter(4, shard, ring, 3)
		for i := range 48 {
			zone := fmt.Sprint("z", i)
			var msgs [][]byte
			switch i % 4 {
			case 0: // labels after the sample
				msgs = append(msgs, slices.Concat(field(2, sample(1, 5)), field(1, lab("__name__", "up")), field(1, lab("zone", zone))))
			case 1: // a label's value first, an unknown field in it
				msgs = append(msgs, slices.Concat(field(1, labValueFirst("__name__", "up")), field(1, labValueFirst("zone", zone)), field(2, sample(1, 5))))
			case 2: // an unknown field of the series between its labels
				unk := protowire.AppendVarint(protowire.AppendTag(nil, 77, protowire.VarintType), 1)
				msgs = append(msgs, slices.Concat(field(1, lab("__name__", "up")), unk, field(1, lab("zone", zone)), field(2, sample(1, 5))))
			case 3: // unsorted
				msgs = append(msgs, slices.Concat(field(1, lab("zone", zone)), field(1, lab("__name__", "up")), field(2, sample(1, 5))))
			}
			for _, msg := range msgs {
				ser := field(1, msg)
				var ts prompb.TimeSeries
				if err := ts.Unmarshal(msg); err != nil {
					t.Fatal(err)
				}
				ls := slices.Clone(ts.Labels)
				slices.SortFunc(ls, cmpLabel)
				want := s.partOf(seriesHash(ls))
				for group := range 3 {
					s.reset(false)
					if err := s.add(ser); err != nil {
						t.Fatalf("series %d: %v", i, err)
					}
					for p := range s.parts {
						if p == want && !bytes.Equal(s.parts[p].body, ser) {
							t.Fatalf("shard %v series %d (%v) group %d: part %d holds %x, want the series' bytes %x", shard, i, ls, group, p, s.parts[p].body, ser)
						}
						if p != want && len(s.parts[p].body) != 0 {
							t.Fatalf("shard %v series %d (%v) group %d: in part %d, the convert path's is %d", shard, i, ls, group, p, want)
						}
					}
				}
			}
		}
	}
}
