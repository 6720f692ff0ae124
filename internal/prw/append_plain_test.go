package prw

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/signal"
)

// TestPlainAppenderMatchesDecodeCopy: appending requests with
// PlainAppender (the lake loop's remote-write path: series the batch knows
// found by their label bytes, the rest scanned) gives the batch the lake
// writer's copy of the decoded requests gives, as TestAppendV1MatchesDecodeCopy
// asks of Appender: the same points, descriptors, attributes, series ids,
// times and values bit for bit, the same sets shared and values interned,
// whichever way each request came in; with requests whose series recur
// (hits), a batch cut back by Truncate in between (its known series must be
// forgotten: a stale entry would name a set cut away) and Reset between
// rounds.
func TestPlainAppenderMatchesDecodeCopy(t *testing.T) {
	long := string(make([]byte, 300))
	handmade := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: []prompb.Label{{Name: "__name__", Value: "a"}, {Name: "x", Value: "1"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 5}, {Value: math.Float64frombits(0x7ff0000000000002), Timestamp: 6}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "b"}, {Name: "x", Value: "1"}, {Name: "y", Value: "ü"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 0}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "a"}, {Name: "x", Value: long}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 5}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "a"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 5}}},
		{Labels: []prompb.Label{{Name: "A", Value: "1"}, {Name: "__name__", Value: "a"}, {Name: "x", Value: "0"}}, Samples: []prompb.Sample{{Value: -0.0, Timestamp: 5}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "a"}, {Name: "x", Value: "1"}}, Samples: []prompb.Sample{{Value: 7, Timestamp: 8}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "a"}}, Samples: []prompb.Sample{{Value: 2, Timestamp: 9}}},
	}}
	hb, err := handmade.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	bodies := [][]byte{hb, hb}
	for _, shape := range [][2]int{{1, 0}, {100, 5}, {1500, 8}, {300, 10}} {
		b1, _ := benchBodies(shape[0], shape[1])
		b2, _ := benchBodiesNamed(shape[0], shape[1], func(i int) int { return i % 7 })
		bodies = append(bodies, b1, b2, b1) // b1 twice: its series recur
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var copied, direct signal.Metrics
	copied.ShareAttrSets, direct.ShareAttrSets = true, true
	var d Decoder
	var pa PlainAppender
	var dec signal.Metrics
	hits := 0
	for round := range 8 {
		copied.Reset()
		direct.Reset()
		for i, body := range bodies {
			dec.Reset()
			if _, err := d.DecodeV1(&dec, body); err != nil {
				t.Fatalf("body %d: %v", i, err)
			}
			copied.CopyRows(&dec, signal.Rows{From: 0, To: dec.Len()})
			if !pa.ScanTimesV1(body) {
				t.Fatalf("body %d: not plain", i)
			}
			switch {
			case round > 0 && rng.IntN(3) == 0:
				direct.CopyRows(&dec, signal.Rows{From: 0, To: dec.Len()})
				continue
			case round > 1 && rng.IntN(4) == 0:
				// Appended, then cut back (a declined append), then again.
				n0 := direct.Len()
				if !pa.AppendV1(&direct) {
					t.Fatalf("body %d: declined", i)
				}
				direct.Truncate(n0)
			}
			n0 := direct.Len()
			for _, key := range pa.skeys {
				if _, ok := direct.KnownSeries(key); ok {
					hits++
				}
			}
			if !pa.AppendV1(&direct) {
				t.Fatalf("body %d: declined", i)
			}
			if got := direct.Len() - n0; got != len(pa.Times) || got != dec.Len() {
				t.Fatalf("body %d: appended %d points for %d samples (%d decoded)", i, got, len(pa.Times), dec.Len())
			}
		}
		a, b := dumpRows(&copied), dumpRows(&direct)
		if len(a) != len(b) {
			t.Fatalf("round %d: %d points copied, %d appended", round, len(a), len(b))
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("round %d point %d:\ncopied   %s\nappended %s", round, i, a[i], b[i])
			}
		}
		if sa, sb := sharing(&copied), sharing(&direct); sa != sb {
			t.Fatalf("round %d: attribute sets shared differently", round)
		}
	}
	if hits == 0 {
		t.Fatal("no series was found known: the test does not cover the hit path")
	}
}

// TestPlainAppenderDeclines: ScanTimesV1 refuses what is not the plain
// shape, and AppendV1 refuses a request whose labels fail the scan's checks
// (ScanTimesV1 does not read labels): the caller cuts the batch back and
// decodes the request, which names the problem.
func TestPlainAppenderDeclines(t *testing.T) {
	enc := func(ts ...prompb.TimeSeries) []byte {
		b, err := (&prompb.WriteRequest{Timeseries: ts}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "a"}, {Name: "x", Value: "1"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 5}}}
	var pa PlainAppender
	for name, body := range map[string][]byte{
		"histogram":  enc(good, prompb.TimeSeries{Labels: good.Labels, Histograms: []prompb.Histogram{{Count: &prompb.Histogram_CountInt{CountInt: 1}, Timestamp: 1}}}),
		"no samples": enc(good, prompb.TimeSeries{Labels: good.Labels}),
		"metadata":   append(enc(good), 3<<3|wtLen, 0),
		"cut":        enc(good)[:10],
	} {
		if pa.ScanTimesV1(body) {
			t.Errorf("%s: ScanTimesV1 took it", name)
		}
	}
	for name, ts := range map[string]prompb.TimeSeries{
		"unsorted":   {Labels: []prompb.Label{{Name: "x", Value: "1"}, {Name: "__name__", Value: "a"}}, Samples: good.Samples},
		"no name":    {Labels: []prompb.Label{{Name: "x", Value: "1"}}, Samples: good.Samples},
		"bad utf-8":  {Labels: []prompb.Label{{Name: "__name__", Value: "a"}, {Name: "x", Value: "\xff"}}, Samples: good.Samples},
		"empty name": {Labels: []prompb.Label{{Name: "__name__", Value: "a"}, {Name: "", Value: "1"}}, Samples: good.Samples},
	} {
		var m signal.Metrics
		m.ShareAttrSets = true
		body := enc(good, ts)
		if !pa.ScanTimesV1(body) {
			t.Fatalf("%s: ScanTimesV1 refused it", name)
		}
		if pa.AppendV1(&m) {
			t.Errorf("%s: AppendV1 took it", name)
		}
		if _, err := new(Decoder).DecodeV1(new(signal.Metrics), body); err == nil && name != "unsorted" {
			t.Errorf("%s: the decoder takes it", name)
		}
	}
}

// FuzzPlainAppender: PlainAppender takes exactly the requests ScanV1
// takes, and appends what Appender.AppendV1 appends from the scan, into an
// empty batch (every series new) and then again into the same batch
// (every series known: its labels not read again).
func FuzzPlainAppender(f *testing.F) {
	b1, _ := benchBodies(20, 5)
	f.Add(b1)
	good, _ := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: []prompb.Label{{Name: "__name__", Value: "a"}, {Name: "x", Value: "1"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 5}, {Value: 2, Timestamp: 6}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "b"}, {Name: "x", Value: "1"}, {Name: "y", Value: "ü"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 5}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "a"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 5}}},
	}}).Marshal()
	f.Add(good)
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, body []byte) {
		var sc Scanner
		var app Appender
		var pa PlainAppender
		var want, got signal.Metrics
		want.ShareAttrSets, got.ShareAttrSets = true, true
		scanned := sc.ScanV1(body)
		for pass := range 2 {
			took := pa.ScanTimesV1(body)
			if took {
				n0 := got.Len()
				if took = pa.AppendV1(&got); !took {
					got.Truncate(n0)
				}
			}
			if took != scanned {
				t.Fatalf("pass %d: PlainAppender took it %v, ScanV1 %v", pass, took, scanned)
			}
			if !scanned {
				return
			}
			app.AppendV1(&want, &sc)
			a, b := dumpRows(&want), dumpRows(&got)
			if len(a) != len(b) {
				t.Fatalf("pass %d: %d points from the scan, %d from PlainAppender", pass, len(a), len(b))
			}
			for i := range a {
				if a[i] != b[i] {
					t.Fatalf("pass %d point %d:\nscan  %s\nplain %s", pass, i, a[i], b[i])
				}
			}
		}
	})
}
