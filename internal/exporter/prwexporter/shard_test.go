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
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/exporter/sending"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/waittest"
)

// receiver is a remote-write endpoint that records which series it got.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	series map[string]int
	down   atomic.Bool
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{series: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.down.Load() {
			w.WriteHeader(503)
			return
		}
		b, _ := io.ReadAll(req.Body)
		raw, err := snappy.Decode(nil, b)
		var wr prompb.WriteRequest
		if err != nil || wr.Unmarshal(raw) != nil || req.Header.Get("Content-Encoding") != "snappy" {
			w.WriteHeader(400)
			return
		}
		r.mu.Lock()
		for _, ts := range wr.Timeseries {
			key := ""
			for _, l := range ts.Labels {
				key += l.Name + "=" + l.Value + ","
			}
			r.series[key] += len(ts.Samples)
		}
		r.mu.Unlock()
		w.WriteHeader(204)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// instanceMetrics is testMetrics from the resource instance id.
func instanceMetrics(t *testing.T, end time.Time, n int, instance string) []byte {
	req := pmetricotlp.NewExportRequest()
	if err := req.UnmarshalProto(testMetrics(t, end, n)); err != nil {
		t.Fatal(err)
	}
	req.Metrics().ResourceMetrics().At(0).Resource().Attributes().PutStr("service.instance.id", instance)
	b, err := req.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Three endpoints with sharding: every series lands on exactly one, each
// gets a fair share; a dead endpoint opens its breaker (the batch waits),
// and when it returns the breaker closes and its series arrive.
func TestShardingThreeReceivers(t *testing.T) {
	recv := []*receiver{newReceiver(t), newReceiver(t), newReceiver(t)}
	var urls []string
	for _, r := range recv {
		urls = append(urls, r.srv.URL+"/api/v1/write")
	}
	exp, err := New(Config{Endpoints: urls, Shard: true, Policy: sending.Policy{
		InitialBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, BreakerFailures: 3, BreakerCooldown: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	var recs []exporter.Record
	end := time.Now().Truncate(time.Second)
	for i := range 20 {
		// Each record is its own instance, so 20 x 12 distinct series:
		// enough that every endpoint gets a share whatever ports the
		// receivers were given (the ring hashes endpoint URLs).
		body := instanceMetrics(t, end, 2, fmt.Sprintf("i-%d", i))
		recs = append(recs, exporter.Record{Kind: signal.KindMetrics, Tenant: "t", Body: body})
	}
	if err := exp.Send(waittest.Context(t), recs[:10]); err != nil {
		t.Fatal(err)
	}
	total := 0
	for i, r := range recv {
		if len(r.series) == 0 {
			t.Fatalf("receiver %d got no series", i)
		}
		for s := range r.series {
			for j, o := range recv {
				if j != i && o.series[s] > 0 {
					t.Fatalf("series %s on receivers %d and %d", s, i, j)
				}
			}
		}
		total += len(r.series)
	}
	if total != 120 {
		t.Fatalf("%d distinct series over the receivers, want 120", total)
	}

	// One endpoint dies: its breaker opens while the batch waits for it.
	recv[1].down.Store(true)
	done := make(chan error)
	go func() { done <- exp.Send(waittest.Context(t), recs[10:]) }()
	ep := exp.Endpoints()[1]
	deadline := time.Now().Add(5 * time.Second)
	for ep.Breaker.State() != sending.Open && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if ep.Breaker.State() != sending.Open {
		t.Fatal("breaker did not open on the dead endpoint")
	}
	select {
	case err := <-done:
		t.Fatalf("Send returned (%v) while an endpoint of the batch was dead", err)
	case <-time.After(200 * time.Millisecond):
	}
	recv[1].down.Store(false)
	if err := waittest.Recv(t, done, "the Send once the dead endpoint was back"); err != nil {
		t.Fatal(err)
	}
	if ep.Breaker.State() != sending.Closed || ep.Breaker.Opened() == 0 {
		t.Fatalf("breaker %v after the endpoint returned", ep.Breaker.State())
	}
	for i, r := range recv {
		for s, n := range r.series {
			want := 2 // one record's 2 points
			if strings.Contains(s, "target_info") {
				want = 1 // one per record
			}
			if n != want {
				t.Errorf("receiver %d series %s has %d samples", i, s, n)
			}
		}
	}
}

// One exporter per endpoint (Only), as the pipeline runs a shard: each
// delivers exactly its share of the series (the ring over every
// endpoint), on the pass-through path (1.0 and 2.0, one lane and two) and
// the convert path (OTLP); while one endpoint is down, the exporters of
// the others deliver, and only the dead one's Send waits.
func TestShardOnlyEndpoint(t *testing.T) {
	for _, c := range []struct {
		name  string
		v     uint8 // record version; 0: OTLP
		lanes int
	}{{"v1", 1, 1}, {"v2", 2, 1}, {"v1 lanes", 1, 2}, {"otlp", 0, 1}} {
		t.Run(c.name, func(t *testing.T) {
			recv := []*receiver{newReceiver(t), newReceiver(t), newReceiver(t)}
			var urls []string
			for _, r := range recv {
				urls = append(urls, r.srv.URL+"/api/v1/write")
			}
			var exps []*Exporter
			for _, u := range urls {
				exp, err := New(Config{Endpoints: urls, Only: u, Shard: true, Concurrency: c.lanes, Policy: sending.Policy{
					InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, BreakerFailures: 2, BreakerCooldown: 10 * time.Millisecond}})
				if err != nil {
					t.Fatal(err)
				}
				if eps := exp.Endpoints(); len(eps) != 1 || eps[0].Name != u {
					t.Fatalf("Endpoints() of the exporter of %s: %d", u, len(eps))
				}
				exps = append(exps, exp)
			}
			var batch []exporter.Record
			const nSeries = 60
			if c.v == 0 {
				batch = []exporter.Record{{Kind: signal.KindMetrics, Body: instanceMetrics(t, time.Now(), nSeries, "a")}}
			} else {
				batch = laneBatchesV(t, c.v, 1, 1, nSeries)[0]
			}
			dead := 2
			recv[dead].down.Store(true)
			for i, exp := range exps {
				// The dead endpoint's Send is given 300 ms to fail in;
				// a live one's must succeed with the dead one still down,
				// and a loaded machine may take longer than 300 ms over
				// a real send.
				ctx := waittest.Context(t)
				if i == dead {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
					defer cancel()
				}
				err := exp.Send(ctx, batch)
				if i == dead && err == nil {
					t.Fatal("the dead endpoint's exporter returned nil")
				}
				if i != dead && err != nil {
					t.Fatalf("the exporter of live endpoint %d waited for the dead one: %v", i, err)
				}
			}
			recv[dead].down.Store(false)
			if err := exps[dead].Send(waittest.Context(t), batch); err != nil {
				t.Fatal(err)
			}
			ring := sending.NewRing(urls)
			total := 0
			for i, r := range recv {
				r.mu.Lock()
				for key := range r.series {
					var ls []prompb.Label
					for _, kv := range strings.Split(strings.TrimSuffix(key, ","), ",") {
						n, v, _ := strings.Cut(kv, "=")
						ls = append(ls, prompb.Label{Name: n, Value: v})
					}
					if k := ring.Pick(seriesHash(ls)); k != i {
						t.Errorf("series %s on endpoint %d, the ring says %d", key, i, k)
					}
				}
				total += len(r.series)
				r.mu.Unlock()
			}
			if c.v != 0 && total != nSeries {
				t.Errorf("%d series arrived, want %d", total, nSeries)
			}
			if total == 0 {
				t.Fatal("nothing arrived")
			}
		})
	}
}
