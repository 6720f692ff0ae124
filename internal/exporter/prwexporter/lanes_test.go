package prwexporter

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/exporter/sending"
	"github.com/sluice-dev/sluice/internal/signal"
)

// laneReceiver is a remote-write 1.0 endpoint answering each request
// after delay. It records every sample's timestamp per series, the
// requests in flight at once, and can fail requests holding a series.
type laneReceiver struct {
	srv      *httptest.Server
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
		if strings.Contains(req.Header.Get("Content-Type"), "write.v2") {
			w.WriteHeader(http.StatusUnsupportedMediaType) // a 1.0-only receiver
			return
		}
		b, _ := io.ReadAll(req.Body)
		raw, err := snappy.Decode(nil, b)
		var wr prompb.WriteRequest
		if err != nil || wr.Unmarshal(raw) != nil {
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
		w.WriteHeader(204)
	}))
	t.Cleanup(r.srv.Close)
	return r
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
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, exporter.Record{Kind: signal.KindMetrics, Tenant: "t", RemoteWrite: 1, Series: nSeries,
				Body: snappy.Encode(nil, raw)})
			ts += 1000
		}
		out = append(out, recs)
	}
	return out
}

func laneExporter(t *testing.T, url string, conc int) *Exporter {
	t.Helper()
	exp, err := New(Config{Endpoints: []string{url + "/api/v1/write"}, Concurrency: conc, Policy: sending.Policy{
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

// With concurrency 4, each batch goes out as 4 requests in flight at
// once (one per lane), a series' samples arrive in timestamp order and
// every sample exactly once; with concurrency 1 (pass-through), one
// request at a time.
func TestLanesConcurrentInOrder(t *testing.T) {
	const nBatches, perBatch, nSeries = 5, 3, 200
	batches := laneBatches(t, nBatches, perBatch, nSeries)
	r := newLaneReceiver(t, 200*time.Millisecond, 4)
	exp := laneExporter(t, r.srv.URL, 4)
	probe := exp.Endpoints()[0].InFlight
	r.probe.Store(&probe)
	start := time.Now()
	for _, b := range batches {
		if err := exp.Send(context.Background(), b); err != nil {
			t.Fatal(err)
		}
		if n := exp.Endpoints()[0].InFlight(); n != 0 {
			t.Fatalf("%d requests in flight after Send returned", n)
		}
	}
	conc := time.Since(start)
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

	// The same load one request at a time: pass-through, never two in flight.
	r1 := newLaneReceiver(t, 200*time.Millisecond, 0)
	exp1 := laneExporter(t, r1.srv.URL, 1)
	start = time.Now()
	for _, b := range batches {
		if err := exp1.Send(context.Background(), b); err != nil {
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
// arrive twice, and every sample arrives once.
func TestLaneRetriedAlone(t *testing.T) {
	const nSeries = 200
	batches := laneBatches(t, 2, 3, nSeries)
	r := newLaneReceiver(t, 0, 0)
	r.failSeries, r.failStatus = seriesKey([]prompb.Label{{Name: "__name__", Value: "lane_test"}, {Name: "s", Value: "7"}}), 503
	r.failTimes.Store(1)
	exp := laneExporter(t, r.srv.URL, 4)
	for _, b := range batches {
		if err := exp.Send(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	checkSamples(t, r, nSeries, 6, nil)
	if n := r.requests.Load(); n != 2*4+1 {
		t.Fatalf("%d requests, want 9 (2 batches x 4 lanes, one retried)", n)
	}
	st := &exp.Endpoints()[0].Stats
	if st.Retried.Load() != 1 || st.Dropped.Load() != 0 {
		t.Fatalf("retried %d, dropped %d requests; want 1 and 0", st.Retried.Load(), st.Dropped.Load())
	}
}

// A lane answered 400 is dropped and counted alone: the other lanes'
// samples all arrive once.
func TestLaneRefusedAlone(t *testing.T) {
	const nSeries = 200
	batches := laneBatches(t, 1, 3, nSeries)
	r := newLaneReceiver(t, 0, 0)
	r.failSeries, r.failStatus = seriesKey([]prompb.Label{{Name: "__name__", Value: "lane_test"}, {Name: "s", Value: "7"}}), 400
	r.failTimes.Store(-1)
	exp := laneExporter(t, r.srv.URL, 4)
	if err := exp.Send(context.Background(), batches[0]); err != nil {
		t.Fatal(err)
	}
	skip := laneSeries(nSeries, 4, 7)
	if len(skip) == 0 || len(skip) == nSeries {
		t.Fatalf("lane of series 7 holds %d of %d series", len(skip), nSeries)
	}
	checkSamples(t, r, nSeries, 3, skip)
	st := &exp.Endpoints()[0].Stats
	if st.Dropped.Load() != 1 || st.Sent.Load() != 3 || st.Retried.Load() != 0 {
		t.Fatalf("dropped %d, sent %d, retried %d requests; want 1, 3, 0", st.Dropped.Load(), st.Sent.Load(), st.Retried.Load())
	}
	if _, _, sent := exp.Stats(); sent == 0 {
		t.Fatal("no series counted as sent")
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
		if err := exp.Send(context.Background(), b); err != nil {
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
		if err := exp.Send(context.Background(), recs); err != nil {
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
