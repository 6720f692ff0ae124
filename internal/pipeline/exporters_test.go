package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
)

func forwardingConfig(t *testing.T, downstreamHTTP string) config.Config {
	cfg := testConfig(t)
	cfg.Exporters = map[string]config.Exporter{
		"otlp/down": {
			Endpoints:       []string{"http://" + downstreamHTTP},
			TenantHeader:    "X-Scope-OrgID",
			BatchDelay:      config.Duration(20 * time.Millisecond),
			RetryInitial:    config.Duration(10 * time.Millisecond),
			RetryMax:        config.Duration(100 * time.Millisecond),
			BreakerCooldown: config.Duration(100 * time.Millisecond),
		},
	}
	cfg.Pipelines = map[string]config.Pipeline{
		"logs":    {Receivers: []string{"otlp"}, Exporters: []string{"lake", "otlp/down"}},
		"metrics": {Receivers: []string{"otlp"}, Exporters: []string{"lake"}},
		"traces":  {Receivers: []string{"otlp"}, Exporters: []string{"lake"}},
	}
	return cfg
}

func waitCaughtUp(t *testing.T, p *Pipeline, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		r := p.exps.list()[0]
		if st := r.Stats(); st.Cursor.LagBytes == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("exporter did not catch up in %v: %+v", limit, p.exps.list()[0].Stats())
}

// sluice -> sluice over OTLP/HTTP: the downstream goes away and comes back
// on the same address while the upstream keeps acknowledging; the upstream
// lake is never held up, and every acknowledged record reaches the
// downstream lake, tenant kept. Metrics (not in the logs pipeline of the
// exporter) are not forwarded.
func TestPipelineForwardsThroughDownstreamRestart(t *testing.T) {
	downCfg := testConfig(t)
	down, err := New(downCfg, Settings{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := down.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	downAddr := down.Addrs().HTTP.String()

	up := start(t, forwardingConfig(t, downAddr))
	send := func(from, n int) {
		for i := from; i < from+n; i++ {
			tenant := []string{"t1", "t2"}[i%2]
			if resp := post(t, up, "/v1/logs", tenant, logsRequest(t, i*10, 10)); resp.StatusCode != 200 {
				t.Fatalf("upstream refused request %d: %d", i, resp.StatusCode)
			}
		}
	}
	send(0, 20)
	if resp := post(t, up, "/v1/metrics", "t1", metricsRequest(t, 5)); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	waitCaughtUp(t, up, 60*time.Second)

	// Downstream gone: the upstream keeps acknowledging and its lake commits.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	if err := down.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	send(20, 20)
	if err := up.Checkpoint(context.Background()); err != nil {
		t.Fatalf("the upstream lake must not wait for a dead exporter: %v", err)
	}
	if st := up.exps.list()[0].Stats(); st.Cursor.LagBytes == 0 {
		t.Fatal("exporter claims to be caught up with its downstream down")
	}
	// Retries pile up; the breaker opens (or is half-open, probing).
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, metrics := get(t, up, "/metrics")
		if strings.Contains(metrics, `sluice_exporter_breaker_state{endpoint="http://`+downAddr+`",exporter="otlp/down"} 2`) ||
			strings.Contains(metrics, `sluice_exporter_breaker_state{endpoint="http://`+downAddr+`",exporter="otlp/down"} 1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("breaker not open on /metrics:\n%s", grep(metrics, "sluice_exporter_breaker_state"))
		}
	}

	// Back on the same address and lake.
	downCfg.Receivers.OTLP.HTTPAddr = downAddr
	down2 := start(t, downCfg)
	waitCaughtUp(t, up, 60*time.Second)
	if err := down2.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := lakeSeqs(t, downCfg.Lake.Root)
	for ti, tenant := range []string{"t1", "t2"} {
		var want []int64
		for i := ti; i < 40; i += 2 {
			want = append(want, seqRange(i*10, 10)...)
		}
		seqs := slices.Compact(slices.Clone(got[tenant]))
		if !slices.Equal(seqs, want) {
			t.Fatalf("tenant %s: downstream has %d distinct records of %d", tenant, len(seqs), len(want))
		}
		t.Logf("tenant %s: %d records, %d duplicates", tenant, len(got[tenant]), len(got[tenant])-len(seqs))
	}
	_, metrics := get(t, up, "/metrics")
	for _, want := range []string{
		`sluice_exporter_sent_records_total{exporter="otlp/down"} 40`,
		`sluice_exporter_skipped_records_total{exporter="otlp/down"} 1`,
		`sluice_exporter_queue_lag_bytes{exporter="otlp/down"} 0`,
		`sluice_exporter_breaker_state{endpoint="http://` + downAddr + `",exporter="otlp/down"} 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grep(metrics, "sluice_exporter_"))
		}
	}
	if !strings.Contains(metrics, fmt.Sprintf(`sluice_exporter_breaker_opened_total{endpoint="http://%s",exporter="otlp/down"}`, downAddr)) {
		t.Error("no breaker_opened counter")
	}
}

// OTLP over gRPC (gzip) into a second pipeline's gRPC receiver: every log
// record arrives under its tenant; metrics go out too when the metrics
// pipeline lists the exporter.
func TestPipelineForwardsOverGRPC(t *testing.T) {
	down := start(t, testConfig(t))
	downRoot := down.cfg.Lake.Root
	cfg := forwardingConfig(t, "")
	e := cfg.Exporters["otlp/down"]
	e.Endpoints = []string{down.Addrs().GRPC.String()}
	e.Protocol = "grpc"
	e.Compression = "gzip"
	cfg.Exporters["otlp/down"] = e
	cfg.Pipelines["metrics"] = config.Pipeline{Receivers: []string{"otlp"}, Exporters: []string{"lake", "otlp/down"}}
	up := start(t, cfg)
	for i := range 10 {
		if resp := post(t, up, "/v1/logs", "g1", logsRequest(t, i*10, 10)); resp.StatusCode != 200 {
			t.Fatal(resp.StatusCode)
		}
	}
	if resp := post(t, up, "/v1/metrics", "g1", metricsRequest(t, 5)); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	waitCaughtUp(t, up, 60*time.Second)
	if err := down.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := lakeSeqs(t, downRoot)["g1"]; !slices.Equal(got, seqRange(0, 100)) {
		t.Fatalf("downstream over gRPC has %d records of 100", len(got))
	}
	if st := up.exps.list()[0].Stats(); st.SentRecords != 11 || st.Skipped != 0 {
		t.Fatalf("exporter stats %+v", st)
	}
}

// An exporter removed from the config loses its cursor at the next start,
// so it no longer holds queue segments.
func TestPipelineRemovedExporterReleasesItsCursor(t *testing.T) {
	cfg := forwardingConfig(t, "127.0.0.1:1") // nothing listens: the cursor stays behind
	p, err := New(cfg, Settings{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		post(t, p, "/v1/logs", "t1", logsRequest(t, i*10, 10))
	}
	if names := p.q.Load().CursorNames(); len(names) != 1 || names[0] != "otlp.down" {
		t.Fatalf("cursors %v", names)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	p.Shutdown(ctx)
	cancel()

	cfg.Exporters, cfg.Pipelines = nil, nil
	p2 := start(t, cfg)
	if names := p2.q.Load().CursorNames(); len(names) != 0 {
		t.Fatalf("the removed exporter's cursor is still there: %v", names)
	}
}

// An exporter with several endpoints reads with a cursor per endpoint;
// when an exporter of one endpoint gets a second, both new cursors start
// where the old one was committed (its backlog is not skipped), and the
// old cursor is removed.
func TestPipelineEndpointCursorsTakeOverTheBacklog(t *testing.T) {
	cfg := forwardingConfig(t, "127.0.0.1:1") // nothing listens: the backlog stays
	p := start(t, cfg)
	for i := range 5 {
		post(t, p, "/v1/logs", "t1", logsRequest(t, i*10, 10))
	}
	lag := p.exps.list()[0].Stats().Cursor.LagBytes
	if lag <= 0 {
		t.Fatalf("lag %d before the change", lag)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	p.Shutdown(ctx)
	cancel()

	ec := cfg.Exporters["otlp/down"]
	ec.Endpoints = []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}
	cfg.Exporters["otlp/down"] = ec
	p2 := start(t, cfg)
	names := p2.q.Load().CursorNames()
	want := endpointCursors("otlp/down", ec.Endpoints)
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("cursors %v, want %v (the old one removed)", names, want)
	}
	runners := p2.exps.list()
	if len(runners) != 2 {
		t.Fatalf("%d runners, want one per endpoint", len(runners))
	}
	for _, r := range runners {
		if got := r.Stats().Cursor.LagBytes; got != lag {
			t.Errorf("a new endpoint cursor lags %d bytes, want the old one's %d", got, lag)
		}
		if eps := r.Endpoints(); len(eps) != 1 {
			t.Errorf("a runner has %d endpoints, want 1", len(eps))
		}
	}
}
