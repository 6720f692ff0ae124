package prw

import (
	"math/rand/v2"
	"testing"

	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/signal"
)

// plain2Bodies are 2.0 requests for PlainAppender2's tests: the bench
// shapes, the scan's plain request (created and start timestamps,
// metadata), metadata that reaches a family's other metrics (foo_total
// described by foo's, a later series') and the same series described
// differently in another request (a known series takes its request's
// descriptor, not the one it was first seen with).
func plain2Bodies(t testing.TB) [][]byte {
	fam := func(help string, typ writev2.Metadata_MetricType) []byte {
		req := &writev2.Request{
			Symbols: []string{"", "__name__", "foo_total", "foo", "job", "a", help, "seconds", "bar"},
			Timeseries: []writev2.TimeSeries{
				{LabelsRefs: []uint32{1, 2, 4, 5}, Samples: []writev2.Sample{{Value: 1, Timestamp: t0ms}}},
				{LabelsRefs: []uint32{1, 3, 4, 5}, Samples: []writev2.Sample{{Value: 2, Timestamp: t0ms, StartTimestamp: t0ms - 3}},
					Metadata: writev2.Metadata{Type: typ, HelpRef: 6, UnitRef: 7}},
				{LabelsRefs: []uint32{1, 8}, Samples: []writev2.Sample{{Value: 3, Timestamp: t0ms}},
					Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE}},
				{LabelsRefs: []uint32{1, 8, 4, 5}, Samples: []writev2.Sample{{Value: 3, Timestamp: t0ms}, {Value: 4, Timestamp: t0ms + 1}}},
			}}
		b, err := req.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bodies := [][]byte{scanV2Plain(t0ms), scanV2Plain(t0ms + 7), fam("h1", writev2.Metadata_METRIC_TYPE_COUNTER), fam("h2", writev2.Metadata_METRIC_TYPE_SUMMARY), fam("h1", writev2.Metadata_METRIC_TYPE_COUNTER)}
	for _, shape := range [][2]int{{1, 0}, {100, 5}, {1500, 8}, {300, 10}} {
		_, b2 := benchBodies(shape[0], shape[1])
		_, c2 := benchBodiesNamed(shape[0], shape[1], func(i int) int { return i % 7 })
		bodies = append(bodies, b2, c2, b2)
	}
	return bodies
}

// TestPlainAppender2MatchesDecodeCopy: appending 2.0 requests with
// PlainAppender2 gives the batch the lake writer's copy of DecodeV2's
// batch gives (points, descriptors with their metadata, attributes, series
// ids, start times, times and values, the same sets shared), with series
// that recur (hits), batches cut back by Truncate in between and Reset
// between rounds, some requests copied instead.
func TestPlainAppender2MatchesDecodeCopy(t *testing.T) {
	bodies := plain2Bodies(t)
	rng := rand.New(rand.NewPCG(5, 6))
	var copied, direct, dec signal.Metrics
	copied.ShareAttrSets, direct.ShareAttrSets = true, true
	var d Decoder
	var pa PlainAppender2
	hits := 0
	for round := range 8 {
		copied.Reset()
		direct.Reset()
		for i, body := range bodies {
			dec.Reset()
			if _, err := d.DecodeV2(&dec, body); err != nil {
				t.Fatalf("body %d: %v", i, err)
			}
			copied.CopyRows(&dec, signal.Rows{From: 0, To: dec.Len()})
			if !pa.ScanTimesV2(body) {
				t.Fatalf("body %d: not plain", i)
			}
			switch {
			case round > 0 && rng.IntN(3) == 0:
				direct.CopyRows(&dec, signal.Rows{From: 0, To: dec.Len()})
				continue
			case round > 1 && rng.IntN(4) == 0:
				n0 := direct.Len()
				if !pa.AppendV2(&direct) {
					t.Fatalf("body %d: declined", i)
				}
				direct.Truncate(n0)
				if !pa.ScanTimesV2(body) {
					t.Fatalf("body %d: not plain", i)
				}
			}
			n0 := direct.Len()
			for _, key := range pa.skeys {
				if _, ok := direct.KnownSeries(key); ok {
					hits++
				}
			}
			if !pa.AppendV2(&direct) {
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
	described := 0
	for _, md := range direct.Descs {
		if h := direct.String(md.Description); h == "h2" || h == "h1" {
			described++
		}
	}
	if described < 3 {
		t.Fatalf("%d descriptors described by the requests' metadata: the test does not cover metadata", described)
	}
}

// FuzzPlainAppender2: PlainAppender2 takes exactly the requests ScanV2
// takes, and appends what the copy of DecodeV2's batch gives, into an
// empty batch (every series new) and again into the same batch (every
// series known: its labels not checked again).
func FuzzPlainAppender2(f *testing.F) {
	for _, b := range plain2Bodies(f)[:8] {
		f.Add(b)
	}
	f.Add([]byte{0x22, 0x00, 0x2a, 0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, body []byte) {
		var sc Scanner
		var d Decoder
		var pa PlainAppender2
		var dec, want, got signal.Metrics
		want.ShareAttrSets, got.ShareAttrSets = true, true
		scanned := sc.ScanV2(body)
		for pass := range 2 {
			took := pa.ScanTimesV2(body)
			if took {
				n0 := got.Len()
				if took = pa.AppendV2(&got); !took {
					got.Truncate(n0)
				}
			}
			if took != scanned {
				t.Fatalf("pass %d: PlainAppender2 took it %v, ScanV2 %v", pass, took, scanned)
			}
			if !scanned {
				return
			}
			dec.Reset()
			if _, err := d.DecodeV2(&dec, body); err != nil {
				t.Fatalf("pass %d: scanned but DecodeV2: %v", pass, err)
			}
			want.CopyRows(&dec, signal.Rows{From: 0, To: dec.Len()})
			a, b := dumpRows(&want), dumpRows(&got)
			if len(a) != len(b) {
				t.Fatalf("pass %d: %d points decoded and copied, %d from PlainAppender2", pass, len(a), len(b))
			}
			for i := range a {
				if a[i] != b[i] {
					t.Fatalf("pass %d point %d:\ncopy  %s\nplain %s", pass, i, a[i], b[i])
				}
			}
		}
	})
}
