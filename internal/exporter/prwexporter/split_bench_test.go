package prwexporter

import (
	"fmt"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/exporter/sending"
	"github.com/sluice-dev/sluice/internal/prw"
)

// benchRecordV1 is a 1.0 request of n series of 8 labels, one sample
// each (the relay benchmark's 1500:8 shape).
func benchRecordV1(b testing.TB, n, off int) []byte {
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

// benchRecordV2 is benchRecordV1 as a 2.0 request, metadata on every
// series.
func benchRecordV2(b testing.TB, n, off int) []byte {
	raw, err := snappy.Decode(nil, benchRecordV1(b, n, off))
	if err != nil {
		b.Fatal(err)
	}
	var wr prompb.WriteRequest
	if err := wr.Unmarshal(raw); err != nil {
		b.Fatal(err)
	}
	st := writev2.NewSymbolTable()
	var req writev2.Request
	for _, ts := range wr.Timeseries {
		var refs []uint32
		for _, l := range ts.Labels {
			refs = append(refs, st.Symbolize(l.Name), st.Symbolize(l.Value))
		}
		req.Timeseries = append(req.Timeseries, writev2.TimeSeries{LabelsRefs: refs,
			Samples:  []writev2.Sample{{Value: ts.Samples[0].Value, Timestamp: ts.Samples[0].Timestamp}},
			Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE, HelpRef: st.Symbolize("Help of " + ts.Labels[0].Value)}})
	}
	req.Symbols = st.Symbols()
	out, err := req.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	return snappy.Encode(nil, out)
}

// BenchmarkSplitV1 is the lanes' cost per sample on 1.0 records: snappy
// decode, split by series hash, snappy encode of each lane.
func BenchmarkSplitV1(b *testing.B) {
	var bodies [][]byte
	for r := range 4 {
		bodies = append(bodies, benchRecordV1(b, 1500, r*1500))
	}
	benchSplit(b, bodies, false)
}

// BenchmarkSplitV2 is BenchmarkSplitV1 on 2.0 records (symbols rewritten
// per lane).
func BenchmarkSplitV2(b *testing.B) {
	var bodies [][]byte
	for r := range 4 {
		bodies = append(bodies, benchRecordV2(b, 1500, r*1500))
	}
	benchSplit(b, bodies, true)
}

// splitAll splits the snappy-encoded bodies as one group (reset, add,
// finish), decoding them into unsnap, which it returns.
func splitAll(b *testing.B, s *splitter, bodies [][]byte, v2 bool, unsnap []byte) []byte {
	s.reset(v2)
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
	return unsnap
}

func benchSplit(b *testing.B, bodies [][]byte, v2 bool) {
	for _, nl := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("lanes=%d", nl), func(b *testing.B) {
			s := newSplitter(nl, false, nil, 1)
			var unsnap []byte
			b.ReportAllocs()
			cpu0 := cpuTime()
			wire := 0 // the parts' snappy bytes, last round
			for b.Loop() {
				unsnap = splitAll(b, s, bodies, v2, unsnap)
				wire = 0
				for i := range s.parts {
					s.parts[i].payload = s2.EncodeSnappy(s.parts[i].payload[:0], s.parts[i].body)
					wire += len(s.parts[i].payload)
				}
			}
			b.ReportMetric(float64(wire)/float64(4*1500), "wire-B/sample")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*4*1500), "ns/sample")
			// On a shared machine wall time overstates the cost.
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*4*1500), "cpu-ns/sample")
		})
	}
}

// BenchmarkSplitShardOnly is one endpoint's exporter of a shard over 3
// endpoints (Config.Only, as the pipeline runs one per endpoint, each
// reading every record): only=0 fills its own parts and skips the
// others' series after hashing them; only=-1 fills every endpoint's parts,
// as it did before. Per sample of the records, one endpoint's share sent.
func BenchmarkSplitShardOnly(b *testing.B) {
	for _, v2 := range []bool{false, true} {
		var bodies [][]byte
		for r := range 4 {
			if v2 {
				bodies = append(bodies, benchRecordV2(b, 1500, r*1500))
			} else {
				bodies = append(bodies, benchRecordV1(b, 1500, r*1500))
			}
		}
		ring := sending.NewRing([]string{"http://a:9090/api/v1/write", "http://b:9090/api/v1/write", "http://c:9090/api/v1/write"})
		for _, only := range []int{-1, 0} {
			b.Run(fmt.Sprintf("v2=%v/only=%d", v2, only), func(b *testing.B) {
				s := newSplitter(1, true, ring, 3)
				s.only = only
				var unsnap []byte
				b.ReportAllocs()
				cpu0 := cpuTime()
				for b.Loop() {
					unsnap = splitAll(b, s, bodies, v2, unsnap)
					// The exporter encodes and sends endpoint 0's part only.
					s.parts[0].payload = s2.EncodeSnappy(s.parts[0].payload[:0], s.parts[0].body)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*4*1500), "ns/sample")
				b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*4*1500), "cpu-ns/sample")
			})
		}
	}
}
