package prwexporter

import (
	"fmt"
	"testing"

	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/exporter/sending"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
)

// partsOfSeries splits body (1.0 or 2.0) and returns the part of each of
// its series, in request order (the parts keep the record's order).
func partsOfSeries(t *testing.T, s *splitter, v2 bool, body []byte, n int) []int {
	t.Helper()
	s.reset(v2)
	if err := s.add(body); err != nil {
		t.Fatal(err)
	}
	// Each series is alone in its request below: its part is the one
	// part holding a series.
	_ = n
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
						got := partsOfSeries(t, s, v2, body, 1)
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
