package prwexporter

import (
	"fmt"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/prw"
)

// benchRecordV1 is a 1.0 request of n series of 8 labels, one sample
// each (the relay benchmark's 1500:8 shape).
func benchRecordV1(b *testing.B, n, off int) []byte {
	var wr prompb.WriteRequest
	for s := range n {
		ls := []prompb.Label{{Name: "__name__", Value: fmt.Sprintf("bench_metric_%d", s%20)}}
		for l := range 7 {
			ls = append(ls, prompb.Label{Name: fmt.Sprintf("label_%d", l), Value: fmt.Sprintf("value_%d_%d", l, (s+off)*(l+1)%997)})
		}
		wr.Timeseries = append(wr.Timeseries, prompb.TimeSeries{Labels: ls, Samples: []prompb.Sample{{Value: float64(s), Timestamp: 1_800_000_000_000}}})
	}
	raw, err := wr.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	return snappy.Encode(nil, raw)
}

// BenchmarkSplitV1 is the lanes' cost per sample on 1.0 records: snappy
// decode, split by series hash, snappy encode of each lane.
func BenchmarkSplitV1(b *testing.B) {
	var bodies [][]byte
	for r := range 4 {
		bodies = append(bodies, benchRecordV1(b, 1500, r*1500))
	}
	for _, nl := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("lanes=%d", nl), func(b *testing.B) {
			s := newSplitter(nl, false, nil, 1)
			var unsnap []byte
			b.ReportAllocs()
			for b.Loop() {
				s.reset(false)
				for _, body := range bodies {
					var err error
					if unsnap, err = prw.Unsnappy(unsnap, body); err != nil {
						b.Fatal(err)
					}
					if err := s.add(unsnap); err != nil {
						b.Fatal(err)
					}
				}
				s.finish()
				for i := range s.parts {
					s.parts[i].payload = s2.EncodeSnappy(s.parts[i].payload[:0], s.parts[i].body)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*4*1500), "ns/sample")
		})
	}
}
