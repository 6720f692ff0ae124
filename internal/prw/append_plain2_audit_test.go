package prw

import (
	"errors"
	"math"
	"testing"

	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/signal"
)

// audit2Req marshals a hand-made 2.0 request (created timestamps on the
// series created maps, as marshalV2Created).
func audit2Req(t *testing.T, req *writev2.Request, created map[int]int64) []byte {
	t.Helper()
	if created != nil {
		return marshalV2Created(req, created)
	}
	b, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPlainAppender2AuditEdgeCases (audit20): hostile and unusual 2.0
// requests appended one after another into ONE partition batch by
// PlainAppender2 (as the lake loop does: a request it declines is decoded
// and copied instead) give the batch the copy of DecodeV2's batches gives,
// point for point (descriptors and their metadata, attributes, series ids,
// start times, values bit for bit) with the same attribute sets shared; and
// PlainAppender2 takes exactly the requests ScanV2 takes. The cases: the
// same series twice in one request, a symbols table with duplicate strings
// (the same series by other references), the same series with its symbols
// in another order in a later request (a known series found by its
// resolved strings), metadata conflicting between the series of one
// family and between requests, series whose labels are unsorted, have an
// empty value or no __name__ next to good ones (the request declined
// whole, after good requests made its good series known), created and
// start timestamps, stale markers.
func TestPlainAppender2AuditEdgeCases(t *testing.T) {
	stale := math.Float64frombits(0x7ff0000000000002)
	counter, gauge := writev2.Metadata_METRIC_TYPE_COUNTER, writev2.Metadata_METRIC_TYPE_GAUGE
	type tc struct {
		name    string
		body    []byte
		plain   bool // ScanV2 takes it
		partial bool // DecodeV2 answers a partial error (unsorted labels it sorts)
	}
	cases := []tc{{name: "first", plain: true, body: audit2Req(t, &writev2.Request{
		// up{instance="x:1",job="a"} described, a stale marker.
		Symbols: []string{"", "__name__", "up", "instance", "x:1", "job", "a", "h-up", "s"},
		Timeseries: []writev2.TimeSeries{
			{LabelsRefs: []uint32{1, 2, 3, 4, 5, 6}, Samples: []writev2.Sample{{Value: 1, Timestamp: t0ms}, {Value: stale, Timestamp: t0ms + 1000}},
				Metadata: writev2.Metadata{Type: gauge, HelpRef: 7, UnitRef: 8}},
		}}, map[int]int64{0: t0ms - 5000})}}
	cases = append(cases,
		tc{name: "same series twice in one request", plain: true, body: audit2Req(t, &writev2.Request{
			Symbols: []string{"", "__name__", "up", "instance", "x:1", "job", "a"},
			Timeseries: []writev2.TimeSeries{
				{LabelsRefs: []uint32{1, 2, 3, 4, 5, 6}, Samples: []writev2.Sample{{Value: 2, Timestamp: t0ms + 2000}}},
				{LabelsRefs: []uint32{1, 2, 3, 4, 5, 6}, Samples: []writev2.Sample{{Value: 3, Timestamp: t0ms + 3000}}},
			}}, nil)},
		tc{name: "duplicate symbols, other order", plain: true, body: audit2Req(t, &writev2.Request{
			// The same series up{instance,job} by references to
			// duplicated strings, and a new one.
			Symbols: []string{"", "job", "a", "instance", "x:1", "__name__", "up", "up", "job", "a", "x:2"},
			Timeseries: []writev2.TimeSeries{
				{LabelsRefs: []uint32{5, 7, 3, 4, 8, 9}, Samples: []writev2.Sample{{Value: 4, Timestamp: t0ms + 4000}}},
				{LabelsRefs: []uint32{5, 6, 3, 4, 1, 2}, Samples: []writev2.Sample{{Value: 5, Timestamp: t0ms + 5000, StartTimestamp: t0ms - 1}}},
				{LabelsRefs: []uint32{5, 6, 3, 10, 1, 2}, Samples: []writev2.Sample{{Value: stale, Timestamp: t0ms + 5000}}},
			}}, nil)},
		tc{name: "conflicting metadata in one family", plain: true, body: audit2Req(t, &writev2.Request{
			Symbols: []string{"", "__name__", "req_total", "req", "req_count", "code", "200", "h1", "h2", "bytes", "req_bucket", "le", "+Inf"},
			Timeseries: []writev2.TimeSeries{
				{LabelsRefs: []uint32{1, 2, 5, 6}, Samples: []writev2.Sample{{Value: 1, Timestamp: t0ms}}},
				{LabelsRefs: []uint32{1, 4, 5, 6}, Samples: []writev2.Sample{{Value: 1, Timestamp: t0ms}}, Metadata: writev2.Metadata{Type: gauge, HelpRef: 8}},
				{LabelsRefs: []uint32{1, 3, 5, 6}, Samples: []writev2.Sample{{Value: 9, Timestamp: t0ms}}, Metadata: writev2.Metadata{Type: counter, HelpRef: 7, UnitRef: 9}},
				{LabelsRefs: []uint32{1, 10, 5, 6, 11, 12}, Samples: []writev2.Sample{{Value: 2, Timestamp: t0ms}}},
				{LabelsRefs: []uint32{1, 2, 5, 6}, Samples: []writev2.Sample{{Value: 3, Timestamp: t0ms + 1}}, Metadata: writev2.Metadata{Type: gauge, HelpRef: 8}},
			}}, map[int]int64{2: t0ms - 7})},
		tc{name: "family described otherwise in a later request", plain: true, body: audit2Req(t, &writev2.Request{
			Symbols: []string{"", "__name__", "req", "req_total", "code", "200", "other help"},
			Timeseries: []writev2.TimeSeries{
				{LabelsRefs: []uint32{1, 3, 4, 5}, Samples: []writev2.Sample{{Value: 4, Timestamp: t0ms + 10}}},
				{LabelsRefs: []uint32{1, 2, 4, 5}, Samples: []writev2.Sample{{Value: 5, Timestamp: t0ms + 10}}, Metadata: writev2.Metadata{Type: gauge, HelpRef: 6}},
			}}, nil)},
		tc{name: "unsorted labels next to known series", body: audit2Req(t, &writev2.Request{
			Symbols: []string{"", "__name__", "up", "instance", "x:1", "job", "a"},
			Timeseries: []writev2.TimeSeries{
				{LabelsRefs: []uint32{1, 2, 3, 4, 5, 6}, Samples: []writev2.Sample{{Value: 6, Timestamp: t0ms + 6000}}},
				{LabelsRefs: []uint32{1, 2, 5, 6, 3, 4}, Samples: []writev2.Sample{{Value: 7, Timestamp: t0ms + 6000}}},
			}}, nil)},
		tc{name: "empty value next to known series", body: audit2Req(t, &writev2.Request{
			Symbols: []string{"", "__name__", "up", "instance", "x:1", "job", "a"},
			Timeseries: []writev2.TimeSeries{
				{LabelsRefs: []uint32{1, 2, 3, 4, 5, 6}, Samples: []writev2.Sample{{Value: 8, Timestamp: t0ms + 7000}}},
				{LabelsRefs: []uint32{1, 2, 3, 0, 5, 6}, Samples: []writev2.Sample{{Value: 9, Timestamp: t0ms + 7000}}},
			}}, nil)},
		tc{name: "no __name__ next to known series", partial: true, body: audit2Req(t, &writev2.Request{
			Symbols: []string{"", "__name__", "up", "instance", "x:1", "job", "a"},
			Timeseries: []writev2.TimeSeries{
				{LabelsRefs: []uint32{1, 2, 3, 4, 5, 6}, Samples: []writev2.Sample{{Value: 10, Timestamp: t0ms + 8000}}},
				{LabelsRefs: []uint32{3, 4, 5, 6}, Samples: []writev2.Sample{{Value: 11, Timestamp: t0ms + 8000}}},
			}}, nil)},
		tc{name: "known series again after the refusals", plain: true, body: audit2Req(t, &writev2.Request{
			Symbols: []string{"", "a", "job", "x:1", "instance", "up", "__name__"},
			Timeseries: []writev2.TimeSeries{
				{LabelsRefs: []uint32{6, 5, 4, 3, 2, 1}, Samples: []writev2.Sample{{Value: 12, Timestamp: t0ms + 9000}}},
			}}, map[int]int64{0: t0ms + 1})},
	)

	var sc Scanner
	var d Decoder
	var pa PlainAppender2
	var dec, want, got signal.Metrics
	want.ShareAttrSets, got.ShareAttrSets = true, true
	hits := 0
	for _, c := range cases {
		if s := sc.ScanV2(c.body); s != c.plain {
			t.Fatalf("%s: ScanV2 took it %v, want %v", c.name, s, c.plain)
		}
		dec.Reset()
		_, err := d.DecodeV2(&dec, c.body)
		var pe *PartialError
		switch {
		case c.partial && !errors.As(err, &pe):
			t.Fatalf("%s: DecodeV2 answered %v, want a partial error", c.name, err)
		case !c.partial && err != nil:
			t.Fatalf("%s: DecodeV2: %v", c.name, err)
		}
		if c.plain && dec.Len() == 0 {
			t.Fatalf("%s: nothing decoded", c.name)
		}
		want.CopyRows(&dec, signal.Rows{From: 0, To: dec.Len()})

		took := pa.ScanTimesV2(c.body)
		if took {
			for _, key := range pa.skeys {
				if _, ok := got.KnownSeries(key); ok {
					hits++
				}
			}
			n0 := got.Len()
			if took = pa.AppendV2(&got); !took {
				got.Truncate(n0)
			}
		}
		if took != c.plain {
			t.Fatalf("%s: PlainAppender2 took it %v, ScanV2 %v", c.name, took, c.plain)
		}
		if !took {
			// The lake loop's fallback: decoded and copied.
			got.CopyRows(&dec, signal.Rows{From: 0, To: dec.Len()})
		}
		a, b := dumpRows(&want), dumpRows(&got)
		if len(a) != len(b) {
			t.Fatalf("%s: %d points decoded and copied, %d appended", c.name, len(a), len(b))
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%s point %d:\ncopied   %s\nappended %s", c.name, i, a[i], b[i])
			}
		}
		if sa, sb := sharing(&want), sharing(&got); sa != sb {
			t.Fatalf("%s: attribute sets shared differently:\ncopied   %s\nappended %s", c.name, sa, sb)
		}
	}
	if hits < 4 {
		t.Fatalf("%d known series hits: the test does not cover series known from earlier requests", hits)
	}
}
