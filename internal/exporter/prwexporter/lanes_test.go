package prwexporter

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/exporter/sending"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/waittest"
)

// laneReceiver is a remote-write 1.0 endpoint answering each request
// after delay. It records every sample's timestamp per series, the
// requests in flight at once, and can fail requests holding a series.
type laneReceiver struct {
	srv      *httptest.Server
	v2       bool // takes remote write 2.0 too (else answers 415 to it); set before the first request
	delay    time.Duration
	barrier  int64 // the first requests wait (up to 30s) until this many are in flight
	cur, max atomic.Int64
	requests atomic.Int64
	// fail answers status to requests holding series failSeries, times
	// times (-1: always).
	failSeries string
	failStatus int
	failTimes  atomic.Int64

	// probe, when set, is read once the barrier is passed (the
	// exporter's in-flight gauge), its highest value kept in seen.
	probe atomic.Pointer[func() int]
	seen  atomic.Int64

	mu      sync.Mutex
	samples map[string][]int64 // series -> timestamps, in arrival order
}

func newLaneReceiver(t *testing.T, delay time.Duration, barrier int64) *laneReceiver {
	r := &laneReceiver{delay: delay, barrier: barrier, samples: map[string][]int64{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		n := r.cur.Add(1)
		defer r.cur.Add(-1)
		for m := r.max.Load(); n > m && !r.max.CompareAndSwap(m, n); m = r.max.Load() {
		}
		// Wait for the other lanes' requests: proves they are in flight
		// at once without depending on timing.
		for deadline := time.Now().Add(30 * time.Second); r.max.Load() < r.barrier && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		if p := r.probe.Load(); p != nil {
			v := int64((*p)())
			for m := r.seen.Load(); v > m && !r.seen.CompareAndSwap(m, v); m = r.seen.Load() {
			}
		}
		time.Sleep(r.delay)
		isV2 := strings.Contains(req.Header.Get("Content-Type"), "write.v2")
		if isV2 && !r.v2 {
			w.WriteHeader(http.StatusUnsupportedMediaType) // a 1.0-only receiver
			return
		}
		b, _ := io.ReadAll(req.Body)
		raw, err := snappy.Decode(nil, b)
		var wr prompb.WriteRequest
		if err == nil && isV2 {
			wr, err = v2AsV1(raw)
		} else if err == nil {
			err = wr.Unmarshal(raw)
		}
		if err != nil {
			w.WriteHeader(400)
			return
		}
		if r.failSeries != "" {
			for _, ts := range wr.Timeseries {
				if seriesKey(ts.Labels) == r.failSeries && r.failTimes.Load() != 0 {
					r.failTimes.Add(-1)
					w.WriteHeader(r.failStatus)
					return
				}
			}
		}
		r.mu.Lock()
		for _, ts := range wr.Timeseries {
			k := seriesKey(ts.Labels)
			for _, s := range ts.Samples {
				r.samples[k] = append(r.samples[k], s.Timestamp)
			}
		}
		r.mu.Unlock()
		if isV2 {
			w.Header().Set("X-Prometheus-Remote-Write-Samples-Written", "1")
		}
		w.WriteHeader(204)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// v2AsV1 reads a 2.0 request's series (labels resolved in its symbols
// table, samples) as 1.0 series.
func v2AsV1(raw []byte) (prompb.WriteRequest, error) {
	var req writev2.Request
	var wr prompb.WriteRequest
	if err := req.Unmarshal(raw); err != nil {
		return wr, err
	}
	for _, ts := range req.Timeseries {
		var p prompb.TimeSeries
		if len(ts.LabelsRefs)%2 != 0 {
			return wr, fmt.Errorf("%d label references", len(ts.LabelsRefs))
		}
		for i := 0; i < len(ts.LabelsRefs); i += 2 {
			n, v := ts.LabelsRefs[i], ts.LabelsRefs[i+1]
			if int(n) >= len(req.Symbols) || int(v) >= len(req.Symbols) {
				return wr, fmt.Errorf("reference past %d symbols", len(req.Symbols))
			}
			p.Labels = append(p.Labels, prompb.Label{Name: req.Symbols[n], Value: req.Symbols[v]})
		}
		for _, x := range ts.Samples {
			p.Samples = append(p.Samples, prompb.Sample{Value: x.Value, Timestamp: x.Timestamp})
		}
		wr.Timeseries = append(wr.Timeseries, p)
	}
	return wr, nil
}

func seriesKey(ls []prompb.Label) string {
	k := ""
	for _, l := range ls {
		k += l.Name + "=" + l.Value + ","
	}
	return k
}

// laneBatches are batches of remote-write 1.0 records as the receiver
// queues them: every record holds one sample of each of nSeries series,
// timestamps rising record after record.
func laneBatches(t *testing.T, nBatches, perBatch, nSeries int) [][]exporter.Record {
	return laneBatchesV(t, 1, nBatches, perBatch, nSeries)
}

// laneBatchesV is laneBatches of remote-write version v (1 or 2; 2.0 with
// a symbols table per record and metadata on every series).
func laneBatchesV(t *testing.T, v uint8, nBatches, perBatch, nSeries int) [][]exporter.Record {
	var out [][]exporter.Record
	ts := int64(1_700_000_000_000)
	for range nBatches {
		var recs []exporter.Record
		for range perBatch {
			var wr prompb.WriteRequest
			for s := range nSeries {
				wr.Timeseries = append(wr.Timeseries, prompb.TimeSeries{
					Labels:  []prompb.Label{{Name: "__name__", Value: "lane_test"}, {Name: "s", Value: fmt.Sprint(s)}},
					Samples: []prompb.Sample{{Value: float64(ts), Timestamp: ts}},
				})
			}
			raw, err := wr.Marshal()
			if v == 2 {
				st := writev2.NewSymbolTable()
				req := writev2.Request{}
				for _, p := range wr.Timeseries {
					var refs []uint32
					for _, l := range p.Labels {
						refs = append(refs, st.Symbolize(l.Name), st.Symbolize(l.Value))
					}
					req.Timeseries = append(req.Timeseries, writev2.TimeSeries{LabelsRefs: refs,
						Samples:  []writev2.Sample{{Value: p.Samples[0].Value, Timestamp: p.Samples[0].Timestamp}},
						Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE, HelpRef: st.Symbolize("A lane test.")}})
				}
				req.Symbols = st.Symbols()
				raw, err = req.Marshal()
			}
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, exporter.Record{Kind: signal.KindMetrics, Tenant: "t", RemoteWrite: v, Series: nSeries,
				Body: snappy.Encode(nil, raw)})
			ts += 1000
		}
		out = append(out, recs)
	}
	return out
}

func laneExporter(t *testing.T, url string, conc int) *Exporter {
	return laneExporterV(t, url, conc, 1)
}

// laneExporterV is laneExporter speaking remote-write version v.
func laneExporterV(t *testing.T, url string, conc int, v uint8) *Exporter {
	t.Helper()
	exp, err := New(Config{Endpoints: []string{url + "/api/v1/write"}, Protocol: fmt.Sprintf("%d.0", v), Concurrency: conc, Policy: sending.Policy{
		Concurrency: conc, InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, BreakerFailures: 100}})
	if err != nil {
		t.Fatal(err)
	}
	return exp
}

// checkSamples: every series but skip got want samples, each once, in
// timestamp order; skip got none. It returns the series count.
func checkSamples(t *testing.T, r *laneReceiver, nSeries, want int, skip map[string]bool) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for s := range nSeries {
		k := seriesKey([]prompb.Label{{Name: "__name__", Value: "lane_test"}, {Name: "s", Value: fmt.Sprint(s)}})
		got := r.samples[k]
		if skip[k] {
			if len(got) != 0 {
				t.Errorf("series %s: %d samples, want none (its lane was refused)", k, len(got))
			}
			continue
		}
		if len(got) != want {
			t.Errorf("series %s: %d samples, want %d exactly once", k, len(got), want)
		}
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				t.Fatalf("series %s: sample %d at %d after %d: out of order", k, i, got[i], got[i-1])
			}
		}
	}
}

// laneSeries returns the keys of the series of the lane series s is in.
func laneSeries(nSeries, lanes, s int) map[string]bool {
	key := func(i int) []prompb.Label {
		return []prompb.Label{{Name: "__name__", Value: "lane_test"}, {Name: "s", Value: fmt.Sprint(i)}}
	}
	want := laneOf(seriesHash(key(s)), lanes)
	out := map[string]bool{}
	for i := range nSeries {
		if laneOf(seriesHash(key(i)), lanes) == want {
			out[seriesKey(key(i))] = true
		}
	}
	return out
}

// passedThrough fails the test when a record of exp took the convert
// path (decoded and encoded again) instead of being split as received.
func passedThrough(t *testing.T, exp *Exporter) {
	t.Helper()
	if n := len(exp.cv.series); n != 0 {
		t.Fatalf("%d series converted: the records did not pass through", n)
	}
}

// With concurrency 4, each batch of remote-write records (1.0 and 2.0)
// is split as received (no convert) into 4 requests in flight at once
// (one per lane), a series' samples arrive in timestamp order and every
// sample exactly once; with concurrency 1, one request at a time.
func TestLanesConcurrentInOrder(t *testing.T) {
	for _, v := range []uint8{1, 2} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) { testLanesConcurrentInOrder(t, v) })
	}
}

func testLanesConcurrentInOrder(t *testing.T, v uint8) {
	const nBatches, perBatch, nSeries = 5, 3, 200
	batches := laneBatchesV(t, v, nBatches, perBatch, nSeries)
	r := newLaneReceiver(t, 200*time.Millisecond, 4)
	r.v2 = v == 2
	exp := laneExporterV(t, r.srv.URL, 4, v)
	probe := exp.Endpoints()[0].InFlight
	r.probe.Store(&probe)
	start := time.Now()
	for _, b := range batches {
		if err := exp.Send(waittest.Context(t), b); err != nil {
			t.Fatal(err)
		}
		if n := exp.Endpoints()[0].InFlight(); n != 0 {
			t.Fatalf("%d requests in flight after Send returned", n)
		}
	}
	conc := time.Since(start)
	passedThrough(t, exp)
	if m := r.max.Load(); m != 4 {
		t.Fatalf("%d requests in flight at most, want 4 (one per lane)", m)
	}
	if v := r.seen.Load(); v != 4 {
		t.Fatalf("in-flight gauge showed %d at most, want 4", v)
	}
	if n := r.requests.Load(); n != 4*nBatches {
		t.Fatalf("%d requests, want %d (4 lanes x %d batches)", n, 4*nBatches, nBatches)
	}
	checkSamples(t, r, nSeries, nBatches*perBatch, nil)
	if _, _, sent := exp.Stats(); sent != nBatches*nSeries*perBatch {
		t.Errorf("%d series sent, want %d", sent, nBatches*nSeries*perBatch)
	}
	if fb := exp.Fallbacks(); fb != 0 {
		t.Fatalf("%d fallbacks to 1.0", fb)
	}

	// The same load one request at a time: pass-through, never two in flight.
	r1 := newLaneReceiver(t, 200*time.Millisecond, 0)
	r1.v2 = v == 2
	exp1 := laneExporterV(t, r1.srv.URL, 1, v)
	start = time.Now()
	for _, b := range batches {
		if err := exp1.Send(waittest.Context(t), b); err != nil {
			t.Fatal(err)
		}
	}
	seq := time.Since(start)
	if m := r1.max.Load(); m != 1 {
		t.Fatalf("concurrency 1: %d requests in flight at most", m)
	}
	checkSamples(t, r1, nSeries, nBatches*perBatch, nil)
	t.Logf("%d batches against a 200ms endpoint: concurrency 4 in %v (%d requests), concurrency 1 in %v (%d requests)",
		nBatches, conc, r.requests.Load(), seq, r1.requests.Load())
}

// A lane answered 503 once is retried alone: no other lane's samples
// arrive twice, and every sample arrives once (1.0 and 2.0 records,
// passed through).
func TestLaneRetriedAlone(t *testing.T) {
	for _, v := range []uint8{1, 2} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			const nSeries = 200
			batches := laneBatchesV(t, v, 2, 3, nSeries)
			r := newLaneReceiver(t, 0, 0)
			r.v2 = v == 2
			r.failSeries, r.failStatus = seriesKey([]prompb.Label{{Name: "__name__", Value: "lane_test"}, {Name: "s", Value: "7"}}), 503
			r.failTimes.Store(1)
			exp := laneExporterV(t, r.srv.URL, 4, v)
			for _, b := range batches {
				if err := exp.Send(waittest.Context(t), b); err != nil {
					t.Fatal(err)
				}
			}
			passedThrough(t, exp)
			checkSamples(t, r, nSeries, 6, nil)
			if n := r.requests.Load(); n != 2*4+1 {
				t.Fatalf("%d requests, want 9 (2 batches x 4 lanes, one retried)", n)
			}
			st := &exp.Endpoints()[0].Stats
			if st.Retried.Load() != 1 || st.Dropped.Load() != 0 {
				t.Fatalf("retried %d, dropped %d requests; want 1 and 0", st.Retried.Load(), st.Dropped.Load())
			}
		})
	}
}

// A lane answered 400 is dropped and counted alone: the other lanes'
// samples all arrive once (1.0 and 2.0 records, passed through).
func TestLaneRefusedAlone(t *testing.T) {
	for _, v := range []uint8{1, 2} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			const nSeries = 200
			batches := laneBatchesV(t, v, 1, 3, nSeries)
			r := newLaneReceiver(t, 0, 0)
			r.v2 = v == 2
			r.failSeries, r.failStatus = seriesKey([]prompb.Label{{Name: "__name__", Value: "lane_test"}, {Name: "s", Value: "7"}}), 400
			r.failTimes.Store(-1)
			exp := laneExporterV(t, r.srv.URL, 4, v)
			if err := exp.Send(waittest.Context(t), batches[0]); err != nil {
				t.Fatal(err)
			}
			passedThrough(t, exp)
			skip := laneSeries(nSeries, 4, 7)
			if len(skip) == 0 || len(skip) == nSeries {
				t.Fatalf("lane of series 7 holds %d of %d series", len(skip), nSeries)
			}
			checkSamples(t, r, nSeries, 3, skip)
			st := &exp.Endpoints()[0].Stats
			if st.Dropped.Load() != 1 || st.Sent.Load() != 3 || st.Retried.Load() != 0 {
				t.Fatalf("dropped %d, sent %d, retried %d requests; want 1, 3, 0", st.Dropped.Load(), st.Sent.Load(), st.Retried.Load())
			}
			if _, _, sent := exp.Stats(); sent != uint64(3*(nSeries-len(skip))) {
				t.Fatalf("%d series counted as sent, want %d (the refused lane's not)", sent, 3*(nSeries-len(skip)))
			}
		})
	}
}

// A 2.0 exporter with lanes against a 1.0-only endpoint: every lane gets
// 415 at once, the endpoint falls back once (counted once), and every
// sample arrives once, in order.
func TestLanesFallbackOnce(t *testing.T) {
	const nSeries = 200
	batches := laneBatches(t, 2, 3, nSeries)
	r := newLaneReceiver(t, 0, 4)
	exp, err := New(Config{Endpoints: []string{r.srv.URL + "/api/v1/write"}, Protocol: "2.0", Concurrency: 4,
		Policy: sending.Policy{Concurrency: 4, InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if err := exp.Send(waittest.Context(t), b); err != nil {
			t.Fatal(err)
		}
	}
	checkSamples(t, r, nSeries, 6, nil)
	if n := exp.Fallbacks(); n != 1 {
		t.Fatalf("%d fallbacks counted for one endpoint, want 1", n)
	}
	if _, _, sent := exp.Stats(); sent != 2*3*nSeries {
		t.Fatalf("%d series counted as sent, want %d", sent, 2*3*nSeries)
	}
}

// A batch of OTLP metrics that needs several requests (2,000 series
// each) takes them one after another with concurrency 1 and about a
// quarter of the time with 4 lanes against an endpoint answering after
// 200 ms. The times are logged; what is asserted does not depend on them.
func TestLanesCutBatchTime(t *testing.T) {
	var recs []exporter.Record
	end := time.Now().Truncate(time.Second)
	for i := range 630 { // 12 series each: 7,560 series
		recs = append(recs, exporter.Record{Kind: signal.KindMetrics, Tenant: "t", Body: instanceMetrics(t, end, 1, fmt.Sprintf("i-%d", i))})
	}
	var took [2]time.Duration
	var reqs [2]int64
	for i, conc := range []int{1, 4} {
		barrier := int64(0)
		if conc > 1 {
			barrier = int64(conc)
		}
		r := newLaneReceiver(t, 200*time.Millisecond, barrier)
		exp := laneExporter(t, r.srv.URL, conc)
		start := time.Now()
		if err := exp.Send(waittest.Context(t), recs); err != nil {
			t.Fatal(err)
		}
		took[i], reqs[i] = time.Since(start), r.requests.Load()
		if m := r.max.Load(); m != int64(conc) {
			t.Fatalf("concurrency %d: %d requests in flight at most", conc, m)
		}
		if _, _, sent := exp.Stats(); sent != 630*12 {
			t.Fatalf("concurrency %d: %d series sent, want %d", conc, sent, 630*12)
		}
	}
	if reqs[0] != 4 {
		t.Fatalf("concurrency 1: %d requests, want 4 of at most 2,000 series", reqs[0])
	}
	t.Logf("7,560 series against a 200ms endpoint: concurrency 1 %v (%d requests one after another), concurrency 4 %v (%d requests in 4 lanes)",
		took[0], reqs[0], took[1], reqs[1])
}

// Lanes pass 1.0 records through as received: each series arrives byte
// for byte (labels unsorted as sent, exemplars, native histograms), once
// per endpoint, in the request of its lane (the convert path's laneOf of
// its sorted labels' hash: a series never changes lane with the path that
// carried it); the records' metadata (and a record of metadata alone)
// arrives once per endpoint, in order, with lane 0; both replicated
// endpoints get the same.
func TestLanesPassThroughV1Bytes(t *testing.T) {
	recs, series, meta := passRecords(t, 6)
	// Metadata alone, as Prometheus sends it: to lane 0 too.
	only := prompb.WriteRequest{Metadata: []prompb.MetricMetadata{{Type: prompb.MetricMetadata_COUNTER, MetricFamilyName: "alone_total", Help: "Alone."}}}
	raw, err := only.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	recs = append(recs, exporter.Record{Kind: signal.KindMetrics, Tenant: "acme", Body: snappy.Encode(nil, raw), RemoteWrite: 1})
	meta = append(meta, only.Metadata...)
	css, urls := captureServers(t, 2)
	exp, err := New(Config{Endpoints: urls, Protocol: "1.0", Concurrency: 4, Policy: sending.Policy{Concurrency: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Send(waittest.Context(t), recs); err != nil {
		t.Fatal(err)
	}
	passedThrough(t, exp)
	laneOfSeries := func(ls []prompb.Label) int {
		ls = append([]prompb.Label(nil), ls...)
		slices.SortFunc(ls, cmpLabel)
		return laneOf(seriesHash(ls), 4)
	}
	want := map[string][]byte{}
	for _, s := range series {
		b, _ := s.Marshal()
		want[seriesKey(s.Labels)] = b
	}
	for k, cs := range css {
		if len(cs.bodies) != 4 {
			t.Fatalf("endpoint %d: %d requests, want 4 (one per lane)", k, len(cs.bodies))
		}
		got := map[string]int{}
		var gotMeta []prompb.MetricMetadata
		lanes := map[int]bool{}
		for _, b := range cs.bodies {
			var wr prompb.WriteRequest
			if err := wr.Unmarshal(b); err != nil {
				t.Fatal(err)
			}
			lane := -1
			for _, ts := range wr.Timeseries {
				l := laneOfSeries(ts.Labels)
				if lane >= 0 && l != lane {
					t.Fatalf("endpoint %d: one request holds series of lanes %d and %d", k, lane, l)
				}
				lane = l
				key := seriesKey(ts.Labels)
				got[key]++
				if b, _ := ts.Marshal(); !bytes.Equal(b, want[key]) {
					t.Fatalf("series %s: bytes differ from the record's", key)
				}
			}
			if lanes[lane] {
				t.Fatalf("endpoint %d: two requests of lane %d", k, lane)
			}
			lanes[lane] = true
			if len(wr.Metadata) > 0 && lane != 0 && lane != -1 {
				t.Fatalf("endpoint %d: metadata in the request of lane %d, want lane 0", k, lane)
			}
			gotMeta = append(gotMeta, wr.Metadata...)
		}
		for key := range want {
			if got[key] != 1 {
				t.Fatalf("endpoint %d: series %s arrived %d times, want once", k, key, got[key])
			}
		}
		if len(got) != len(want) {
			t.Fatalf("endpoint %d: %d series, want %d", k, len(got), len(want))
		}
		if !slices.EqualFunc(gotMeta, meta, func(a, b prompb.MetricMetadata) bool { return a.String() == b.String() }) {
			t.Fatalf("endpoint %d: metadata %v, want %v once, in order", k, gotMeta, meta)
		}
	}
	if _, bad, sent := exp.Stats(); bad != 0 || sent != uint64(2*len(series)) {
		t.Fatalf("bad %d, sent %d series; want 0 and %d", bad, sent, 2*len(series))
	}
}

// v2Records are remote-write 2.0 records of n series each, the same
// series in every record at a later timestamp: samples with start
// timestamps, every 5th series a native histogram, every 7th an
// exemplar, metadata (type, help, unit) on each, and one symbols table
// per record.
func v2Records(t *testing.T, nRecs, n int) []exporter.Record {
	var recs []exporter.Record
	h := &histogram.Histogram{Count: 3, Sum: 1.5, Schema: 0, PositiveSpans: []histogram.Span{{Offset: -1, Length: 1}}, PositiveBuckets: []int64{3}}
	for r := range nRecs {
		st := writev2.NewSymbolTable()
		req := &writev2.Request{}
		ts := int64(1_800_000_000_000 + 1000*r)
		for s := range n {
			refs := []uint32{st.Symbolize("__name__"), st.Symbolize(fmt.Sprintf("m_%d", s%4)), st.Symbolize("instance"), st.Symbolize(fmt.Sprintf("i-%d", s)), st.Symbolize("zone"), st.Symbolize(fmt.Sprint(s % 3))}
			x := writev2.TimeSeries{LabelsRefs: refs,
				Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_COUNTER, HelpRef: st.Symbolize(fmt.Sprintf("Help %d.", s%4)), UnitRef: st.Symbolize("bytes")}}
			if s%5 == 0 {
				x.Histograms = []writev2.Histogram{writev2.FromIntHistogram(ts-60_000, ts, h)}
				x.Metadata.Type = writev2.Metadata_METRIC_TYPE_HISTOGRAM
			} else {
				x.Samples = []writev2.Sample{{Value: float64(s), Timestamp: ts, StartTimestamp: ts - 30_000}}
			}
			if s%7 == 0 {
				x.Exemplars = []writev2.Exemplar{{LabelsRefs: []uint32{st.Symbolize("trace_id"), st.Symbolize(fmt.Sprintf("%032x", s))}, Value: 1, Timestamp: ts - 1}}
			}
			req.Timeseries = append(req.Timeseries, x)
		}
		req.Symbols = st.Symbols()
		body, err := req.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, exporter.Record{Kind: signal.KindMetrics, Tenant: "t", RemoteWrite: 2, Body: snappy.Encode(nil, body)})
	}
	return recs
}

// resolvedV2 is a 2.0 series with its references resolved: what a
// receiver reads of it, whatever the symbols table.
func resolvedV2(t *testing.T, syms []string, ts writev2.TimeSeries) string {
	t.Helper()
	sym := func(r uint32) string {
		if int(r) >= len(syms) {
			t.Fatalf("reference %d past %d symbols", r, len(syms))
		}
		return syms[r]
	}
	var sb strings.Builder
	for _, r := range ts.LabelsRefs {
		fmt.Fprintf(&sb, "%q ", sym(r))
	}
	fmt.Fprintf(&sb, "samples %v histograms ", ts.Samples)
	for _, h := range ts.Histograms {
		b, err := h.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sb, "%x ", b)
	}
	for _, e := range ts.Exemplars {
		for _, r := range e.LabelsRefs {
			fmt.Fprintf(&sb, "ex %q ", sym(r))
		}
		fmt.Fprintf(&sb, "%v@%d ", e.Value, e.Timestamp)
	}
	fmt.Fprintf(&sb, "meta %v %q %q", ts.Metadata.Type, sym(ts.Metadata.HelpRef), sym(ts.Metadata.UnitRef))
	return sb.String()
}

// Lanes pass 2.0 records through re-symbolized, not decoded: each lane's
// request has a symbols table of its own ("" first, only the symbols its
// series use), each series reads as it was sent (labels, samples with
// start timestamps, native histograms, exemplars, metadata), once, in
// the request of its lane, its samples in timestamp order; Prometheus's
// own 2.0 handler takes every request; an endpoint that takes 1.0 only
// gets each lane converted, every series once.
func TestLanesPassThroughV2(t *testing.T) {
	const nRecs, nSeries = 3, 60
	recs := v2Records(t, nRecs, nSeries)
	want := map[string]bool{}
	for _, r := range recs {
		raw, _ := snappy.Decode(nil, r.Body)
		var req writev2.Request
		if err := req.Unmarshal(raw); err != nil {
			t.Fatal(err)
		}
		for _, ts := range req.Timeseries {
			want[resolvedV2(t, req.Symbols, ts)] = true
		}
	}
	css, urls := captureServers(t, 2)
	css[1].v1Only = true
	store, ref := referenceHandler(t, remoteapi.MessageTypes{remoteapi.WriteV2MessageType})
	exp, err := New(Config{Endpoints: append(urls, ref), Protocol: "2.0", Concurrency: 4, SendNativeHistograms: true,
		Policy: sending.Policy{Concurrency: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Send(waittest.Context(t), recs); err != nil {
		t.Fatal(err)
	}
	passedThrough(t, exp)

	// The 2.0 endpoint: one request per lane.
	if len(css[0].bodies) != 4 {
		t.Fatalf("%d requests, want 4 (one per lane)", len(css[0].bodies))
	}
	got := map[string]int{}
	lastTs := map[string]int64{}
	for _, b := range css[0].bodies {
		var req writev2.Request
		if err := req.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		if len(req.Symbols) == 0 || req.Symbols[0] != "" {
			t.Fatalf("symbols %q: want \"\" first", req.Symbols)
		}
		used := make([]bool, len(req.Symbols))
		used[0] = true
		lane := -1
		for _, ts := range req.Timeseries {
			got[resolvedV2(t, req.Symbols, ts)]++
			var ls []prompb.Label
			for i := 0; i < len(ts.LabelsRefs); i += 2 {
				ls = append(ls, prompb.Label{Name: req.Symbols[ts.LabelsRefs[i]], Value: req.Symbols[ts.LabelsRefs[i+1]]})
			}
			slices.SortFunc(ls, cmpLabel)
			if l := laneOf(seriesHash(ls), 4); lane >= 0 && l != lane {
				t.Fatalf("one request holds series of lanes %d and %d", lane, l)
			} else {
				lane = l
			}
			key := seriesKey(ls)
			for _, x := range ts.Samples {
				if x.Timestamp <= lastTs[key] {
					t.Fatalf("series %s: sample at %d after %d", key, x.Timestamp, lastTs[key])
				}
				lastTs[key] = x.Timestamp
			}
			for _, r := range ts.LabelsRefs {
				used[r] = true
			}
			for _, e := range ts.Exemplars {
				for _, r := range e.LabelsRefs {
					used[r] = true
				}
			}
			used[ts.Metadata.HelpRef], used[ts.Metadata.UnitRef] = true, true
		}
		for i, u := range used {
			if !u {
				t.Fatalf("symbol %d %q is used by no series of its request: not re-symbolized", i, req.Symbols[i])
			}
		}
	}
	for w := range want {
		if got[w] != 1 {
			t.Fatalf("series %s arrived %d times, want once", w, got[w])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d series, want %d", len(got), len(want))
	}

	// The 1.0-only endpoint: each lane converted, every series once.
	n1 := map[string]int{}
	for i, b := range css[1].bodies {
		if css[1].types[i] != "application/x-protobuf" {
			continue // the 2.0 attempts it refused
		}
		var wr prompb.WriteRequest
		if err := wr.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		for _, ts := range wr.Timeseries {
			n1[seriesKey(ts.Labels)] += len(ts.Samples) + len(ts.Histograms)
		}
	}
	if len(n1) != nSeries {
		t.Fatalf("1.0 endpoint: %d series, want %d", len(n1), nSeries)
	}
	for k, n := range n1 {
		if n != nRecs {
			t.Fatalf("1.0 endpoint: series %s has %d points, want %d", k, n, nRecs)
		}
	}
	if exp.Fallbacks() != 1 {
		t.Fatalf("%d fallbacks, want 1", exp.Fallbacks())
	}

	// Prometheus's handler: every series' every point, with its metadata.
	if len(store.got) != nRecs*nSeries {
		t.Fatalf("reference handler appended %d points, want %d", len(store.got), nRecs*nSeries)
	}
	for _, a := range store.got {
		if a.meta.Unit != "bytes" || !strings.HasPrefix(a.meta.Help, "Help ") {
			t.Fatalf("%s: metadata %+v", a.lbls, a.meta)
		}
	}
	if _, bad, sent := exp.Stats(); bad != 0 || sent != uint64(3*nRecs*nSeries) {
		t.Fatalf("bad %d, sent %d series; want 0 and %d", bad, sent, 3*nRecs*nSeries)
	}
}

// Lanes in shard mode: each series goes to the endpoint it goes to with
// one lane (the ring's pick of its labels' hash), in the request of its
// lane there; each endpoint gets the metadata once, with lane 0.
func TestLanesShard(t *testing.T) {
	recs, series, meta := passRecords(t, 4)
	// One set of endpoints for both: the ring is keyed by their URLs.
	css, urls := captureServers(t, 3)
	where := func(conc int) (map[string]int, [][][]byte) {
		for _, cs := range css {
			cs.bodies = nil
		}
		exp, err := New(Config{Endpoints: urls, Protocol: "1.0", Shard: true, Concurrency: conc, Policy: sending.Policy{Concurrency: conc}})
		if err != nil {
			t.Fatal(err)
		}
		if err := exp.Send(waittest.Context(t), recs); err != nil {
			t.Fatal(err)
		}
		passedThrough(t, exp)
		at := map[string]int{}
		var bodies [][][]byte
		for k, cs := range css {
			bodies = append(bodies, cs.bodies)
			for _, b := range cs.bodies {
				var wr prompb.WriteRequest
				if err := wr.Unmarshal(b); err != nil {
					t.Fatal(err)
				}
				for _, ts := range wr.Timeseries {
					key := seriesKey(ts.Labels)
					if _, ok := at[key]; ok {
						t.Fatalf("concurrency %d: series %s sent twice", conc, key)
					}
					at[key] = k
				}
			}
		}
		if len(at) != len(series) {
			t.Fatalf("concurrency %d: %d series arrived, want %d", conc, len(at), len(series))
		}
		return at, bodies
	}
	one, _ := where(1)
	two, bodies := where(2)
	for key, k := range one {
		if two[key] != k {
			t.Fatalf("series %s on endpoint %d with one lane, %d with two", key, k, two[key])
		}
	}
	for k, reqs := range bodies {
		if len(reqs) == 0 || len(reqs) > 2 {
			t.Fatalf("endpoint %d: %d requests, want 1 or 2 (its lanes)", k, len(reqs))
		}
		var gotMeta int
		for _, b := range reqs {
			var wr prompb.WriteRequest
			if err := wr.Unmarshal(b); err != nil {
				t.Fatal(err)
			}
			lane := -1
			for _, ts := range wr.Timeseries {
				ls := slices.Clone(ts.Labels)
				slices.SortFunc(ls, cmpLabel)
				if l := laneOf(seriesHash(ls), 2); lane >= 0 && l != lane {
					t.Fatalf("endpoint %d: one request holds lanes %d and %d", k, lane, l)
				} else {
					lane = l
				}
			}
			if len(wr.Metadata) > 0 && lane > 0 {
				t.Fatalf("endpoint %d: metadata with lane %d", k, lane)
			}
			gotMeta += len(wr.Metadata)
		}
		if gotMeta != len(meta) {
			t.Fatalf("endpoint %d: %d metadata, want %d (every family's, once)", k, gotMeta, len(meta))
		}
	}
}

// A record that does not parse in the middle of a group (the receiver
// checked it: a damaged queue) is dropped whole and counted, its series
// before the damage too; the records around it arrive, every series once
// (1.0: a TimeSeries field running past the body; 2.0: a label reference
// past the symbols table).
func TestLanesDamagedRecordDroppedWhole(t *testing.T) {
	for _, v := range []uint8{1, 2} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			const nSeries = 50
			recs := laneBatchesV(t, v, 1, 3, nSeries)[0]
			raw, err := snappy.Decode(nil, recs[1].Body)
			if err != nil {
				t.Fatal(err)
			}
			if v == 1 {
				raw = append(raw, 1<<3|2, 0x7f) // a series of 127 bytes, none there
			} else {
				var req writev2.Request
				if err := req.Unmarshal(raw); err != nil {
					t.Fatal(err)
				}
				req.Timeseries[nSeries-1].LabelsRefs[1] = uint32(len(req.Symbols)) // past the table
				if raw, err = req.Marshal(); err != nil {
					t.Fatal(err)
				}
			}
			recs[1].Body = snappy.Encode(nil, raw)
			r := newLaneReceiver(t, 0, 0)
			r.v2 = v == 2
			exp := laneExporterV(t, r.srv.URL, 2, v)
			if err := exp.Send(waittest.Context(t), recs); err != nil {
				t.Fatal(err)
			}
			passedThrough(t, exp)
			checkSamples(t, r, nSeries, 2, nil) // records 0 and 2, each series once
			if _, bad, sent := exp.Stats(); bad != 1 || sent != 2*nSeries {
				t.Fatalf("bad %d, sent %d series; want 1 and %d", bad, sent, 2*nSeries)
			}
			if n := r.requests.Load(); n != 2 {
				t.Fatalf("%d requests, want 2 (one group, two lanes)", n)
			}
		})
	}
}
