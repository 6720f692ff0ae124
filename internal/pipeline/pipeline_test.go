package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/klauspost/compress/snappy"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/queue"
	"github.com/sluice-dev/sluice/internal/receiver/otlpreceiver"
	"github.com/sluice-dev/sluice/internal/signal"
)

// testConfig listens on free loopback ports, writes into a temp lake and
// checkpoints only when asked (or at shutdown).
func testConfig(t *testing.T) config.Config {
	t.Helper()
	c := config.Default()
	c.Lake.Root = t.TempDir()
	c.Receivers.OTLP.GRPCAddr = "127.0.0.1:0"
	c.Receivers.OTLP.HTTPAddr = "127.0.0.1:0"
	c.Receivers.OTLP.TenantHeader = "X-Scope-OrgID"
	c.Admin.Addr = "127.0.0.1:0"
	c.Query.Addr = "" // on by default at localhost:9090; these tests do not query
	c.Lake.FlushInterval = config.Duration(time.Hour)
	c.Queue.MaxBytes = 64 << 20
	c.Queue.SegmentBytes = 1 << 20
	c.Receivers.OTLP.MaxRequestBytes = 512 << 10
	c.ShutdownTimeout = config.Duration(20 * time.Second)
	return c
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func start(t *testing.T, cfg config.Config) *Pipeline {
	t.Helper()
	p, err := New(cfg, Settings{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		p.Shutdown(ctx)
	})
	return p
}

// logsRequest is an OTLP logs export request of n records whose "seq"
// attributes are first, first+1, ...
func logsRequest(t testing.TB, first, n int) []byte {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "svc")
	sl := rl.ScopeLogs().AppendEmpty()
	now := time.Now()
	for i := range n {
		r := sl.LogRecords().AppendEmpty()
		r.SetTimestamp(pcommon.NewTimestampFromTime(now))
		r.Body().SetStr(fmt.Sprintf("record %d", first+i))
		r.Attributes().PutInt("seq", int64(first+i))
	}
	b, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func metricsRequest(t testing.TB, n int) []byte {
	md := pmetric.NewMetrics()
	sm := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty()
	g := sm.Metrics().AppendEmpty()
	g.SetName("temp")
	pts := g.SetEmptyGauge().DataPoints()
	for i := range n {
		dp := pts.AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
		dp.SetDoubleValue(float64(i))
	}
	b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func post(t testing.TB, p *Pipeline, path, tenant string, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+p.Addrs().HTTP.String()+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if tenant != "" {
		req.Header.Set("X-Scope-OrgID", tenant)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func get(t *testing.T, p *Pipeline, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + p.Addrs().Admin.String() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// lakeSeqs reads every catalogued logs file and returns the "seq"
// attribute of every record, per tenant.
func lakeSeqs(t *testing.T, root string) map[string][]int64 {
	t.Helper()
	cat, err := catalog.Open(context.Background(), "sqlite:"+filepath.Join(root, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	segs, err := cat.List(context.Background(), catalog.Filter{Table: "logs"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]int64{}
	for _, s := range segs {
		f, err := lake.OpenFile(filepath.Join(root, s.Path))
		if err != nil {
			t.Fatal(err)
		}
		var l signal.Logs
		if err := f.ReadLogs(&l); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if int64(l.Len()) != s.Rows {
			t.Errorf("%s: %d rows, catalog says %d", s.Path, l.Len(), s.Rows)
		}
		for i := range l.Len() {
			a := l.FindAttr(l.Attr[i], "seq")
			if a < 0 {
				t.Fatalf("%s: record %d has no seq", s.Path, i)
			}
			out[s.Tenant] = append(out[s.Tenant], l.AttrInt(a))
		}
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}

func seqRange(first, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(first + i)
	}
	return out
}

func TestPipelineHTTPToLake(t *testing.T) {
	cfg := testConfig(t)
	p := start(t, cfg)
	if code, _ := get(t, p, "/readyz"); code != 200 {
		t.Fatalf("readyz %d", code)
	}
	for i, tenant := range []string{"acme", "acme", "globex", ""} {
		if r := post(t, p, "/v1/logs", tenant, logsRequest(t, i*10, 10)); r.StatusCode != 200 {
			t.Fatalf("request %d: status %d", i, r.StatusCode)
		}
	}
	if r := post(t, p, "/v1/metrics", "acme", metricsRequest(t, 5)); r.StatusCode != 200 {
		t.Fatalf("metrics: status %d", r.StatusCode)
	}
	if err := p.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := lakeSeqs(t, cfg.Lake.Root)
	want := map[string][]int64{"acme": seqRange(0, 20), "globex": seqRange(20, 10), "default": seqRange(30, 10)}
	for tenant, w := range want {
		if !slices.Equal(got[tenant], w) {
			t.Errorf("tenant %s: seqs %v, want %v", tenant, got[tenant], w)
		}
	}
	// The committed position covers everything acknowledged, and the queue
	// released what is in the lake.
	q := p.q.Load()
	pos, err := p.cat.QueuePosition(context.Background(), QueueName)
	if err != nil || pos != int64(q.Stats().Last) {
		t.Errorf("committed %d (%v), queue end %d", pos, err, q.Stats().Last)
	}
	segs, _ := p.cat.List(context.Background(), catalog.Filter{Table: "metrics", Tenant: "acme"})
	if len(segs) != 1 || segs[0].Rows != 5 {
		t.Errorf("metrics segments %+v", segs)
	}
	_, metrics := get(t, p, "/metrics")
	for _, want := range []string{
		`sluice_pipeline_accepted_records_total{signal="logs",tenant="acme"} 20`,
		`sluice_pipeline_accepted_records_total{signal="metrics",tenant="acme"} 5`,
		`sluice_lake_written_rows_total{signal="logs",tenant="default"} 10`,
		`sluice_lake_checkpoints_total{reason="request"} 1`,
		`sluice_lake_segments_total 4`,
		`sluice_queue_appended_records_total 5`,
		`sluice_receiver_requests_total{outcome="accepted",signal="logs",tenant="acme",transport="http"} 2`,
		`sluice_lake_checkpoint_duration_seconds_count 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// A second checkpoint with nothing new commits nothing.
	if err := p.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(must(p.cat.List(context.Background(), catalog.Filter{}))); n != 4 {
		t.Errorf("%d segments after an empty checkpoint", n)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestPipelineRejectsInvalid(t *testing.T) {
	p := start(t, testConfig(t))
	bad := logsRequest(t, 0, 3)
	bad = bad[:len(bad)-4] // truncated protobuf
	if r := post(t, p, "/v1/logs", "acme", bad); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("truncated request: status %d, want 400", r.StatusCode)
	}
	if r := post(t, p, "/v1/logs", "acme", []byte{0xff, 0xff, 0xff}); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("garbage request: status %d, want 400", r.StatusCode)
	}
	if st := p.q.Load().Stats(); st.AppendedRecords != 0 || st.Last != 0 {
		t.Errorf("queue took invalid data: %+v", st)
	}
	// Still serving.
	if r := post(t, p, "/v1/logs", "acme", logsRequest(t, 0, 3)); r.StatusCode != 200 {
		t.Fatalf("good request after bad ones: %d", r.StatusCode)
	}
	// Once acme has data, its invalid requests count under its name;
	// before, under tenant "", so that garbage sent under ever new tenant
	// names makes no series (TestMaxTenants).
	if r := post(t, p, "/v1/logs", "acme", []byte{0xff}); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("garbage request: status %d, want 400", r.StatusCode)
	}
	_, m := get(t, p, "/metrics")
	for _, want := range []string{
		`sluice_pipeline_invalid_requests_total{signal="logs",tenant=""} 2`,
		`sluice_pipeline_invalid_requests_total{signal="logs",tenant="acme"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("invalid requests not counted as %s:\n%s", want, grep(m, "sluice_pipeline"))
		}
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestPipelineQueueFullBackpressure(t *testing.T) {
	cfg := testConfig(t)
	cfg.Queue.SegmentBytes = 64 << 10
	cfg.Queue.MaxBytes = 128 << 10
	cfg.Receivers.OTLP.MaxRequestBytes = 32 << 10
	cfg.Lake.CheckpointQueueBytes = cfg.Queue.MaxBytes // only the explicit checkpoint frees space
	cfg.Queue.RetryAfter = config.Duration(3 * time.Second)
	p := start(t, cfg)
	body := logsRequest(t, 0, 100) // ~4KB
	var accepted int
	var full *http.Response
	for i := range 200 {
		r := post(t, p, "/v1/logs", "acme", body)
		if r.StatusCode == http.StatusTooManyRequests {
			full = r
			break
		}
		if r.StatusCode != 200 {
			t.Fatalf("request %d: status %d", i, r.StatusCode)
		}
		accepted++
	}
	if full == nil {
		t.Fatal("queue never filled")
	}
	if ra := full.Header.Get("Retry-After"); ra != "3" {
		t.Errorf("Retry-After %q, want 3", ra)
	}
	_, m := get(t, p, "/metrics")
	if !strings.Contains(m, `sluice_pipeline_rejected_records_total{reason="backpressure",signal="logs",tenant="acme"} 100`) {
		t.Errorf("backpressure not counted:\n%s", grep(m, "rejected"))
	}
	// A checkpoint commits and releases; the queue takes data again.
	if err := p.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := post(t, p, "/v1/logs", "acme", body); r.StatusCode != 200 {
		t.Fatalf("after checkpoint: status %d", r.StatusCode)
	}
	if err := p.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(lakeSeqs(t, cfg.Lake.Root)["acme"]); n != (accepted+1)*100 {
		t.Errorf("lake holds %d records, want %d", n, (accepted+1)*100)
	}
}

// Graceful shutdown commits everything acknowledged; a restart replays
// nothing twice; the catalog position only grows.
func TestPipelineShutdownAndRestart(t *testing.T) {
	cfg := testConfig(t)
	p := start(t, cfg)
	for i := range 5 {
		if r := post(t, p, "/v1/logs", "", logsRequest(t, i*7, 7)); r.StatusCode != 200 {
			t.Fatalf("status %d", r.StatusCode)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Shutdown(ctx); err != nil { // idempotent
		t.Fatal(err)
	}
	if got := lakeSeqs(t, cfg.Lake.Root)["default"]; !slices.Equal(got, seqRange(0, 35)) {
		t.Fatalf("after shutdown: %v", got)
	}
	p2 := start(t, cfg)
	if r := post(t, p2, "/v1/logs", "", logsRequest(t, 35, 5)); r.StatusCode != 200 {
		t.Fatalf("status %d", r.StatusCode)
	}
	if err := p2.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := lakeSeqs(t, cfg.Lake.Root)["default"]; !slices.Equal(got, seqRange(0, 40)) {
		t.Fatalf("after restart: %v", got)
	}
}

// The writer's own size-triggered files wait for the checkpoint like the
// others, and the buffered-bytes threshold triggers a checkpoint by itself.
func TestPipelineThresholdCheckpoint(t *testing.T) {
	cfg := testConfig(t)
	cfg.Lake.TargetFileBytes = 8 << 10
	cfg.Lake.CheckpointBufferedBytes = 1 << 30
	cfg.Lake.CheckpointQueueBytes = 40 << 10
	p := start(t, cfg)
	for i := range 20 {
		if r := post(t, p, "/v1/logs", "", logsRequest(t, i*100, 100)); r.StatusCode != 200 {
			t.Fatalf("status %d", r.StatusCode)
		}
	}
	// 1,000 files of one row each, each fsynced: on a loaded machine that
	// took more than 10 s (a failed run at load 24).
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, m := get(t, p, "/metrics")
		if strings.Contains(m, `sluice_lake_checkpoints_total{reason="queue"}`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no queue-threshold checkpoint:\n%s", grep(m, "sluice_lake"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := p.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := lakeSeqs(t, cfg.Lake.Root)["default"]; !slices.Equal(got, seqRange(0, 2000)) {
		t.Fatalf("lake holds %d records, want 2000", len(got))
	}
}

func TestPipelineLakeLocked(t *testing.T) {
	cfg := testConfig(t)
	start(t, cfg)
	p2, err := New(cfg, Settings{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	err = p2.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "another sluice process (run or ingest) is using this lake") {
		t.Fatalf("second run on one lake: %v", err)
	}
}

func TestSweepOrphans(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	write := func(rel string) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(rel string) bool {
		_, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
		return err == nil
	}
	const (
		known  = "logs/tenant=a/dt=2025-01-02/hour=03/known.parquet"
		orphan = "logs/tenant=a/dt=2025-01-02/hour=03/orphan.parquet"
	)
	keep := []string{
		known,
		"logs/tenant=a/dt=2025-01-02/hour=03/notes.txt",      // not parquet
		"logs/tenant=a/dt=2025-01-02/stray.parquet",          // wrong depth
		"logs/tenant=a/dt=2025-01-02/hour=03/x/deep.parquet", // wrong depth
		"logs/a/dt=2025-01-02/hour=03/bad-layout.parquet",    // no tenant=
		"_queue/00000000000000000000.seg",
		"_other/t/tenant=a/dt=2025-01-02/hour=03/hidden.parquet",
		"logs/tenant=a/dt=2025-01-02/hour=03/.hidden.parquet",
		"top.parquet",
	}
	for _, f := range append(keep, orphan, "metrics/tenant=b/dt=2025-01-02/hour=04/o2.parquet", "_tmp/123-x.parquet.tmp") {
		write(f)
	}
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(root, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()

	// Never committed: quarantine, do not delete.
	res, err := sweepOrphans(ctx, cat, lake.NewLocalStore(root), 0, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Quarantined != 3 || res.Removed != 0 || res.Temp != 1 {
		t.Fatalf("first sweep %+v", res)
	}
	if !exists("_orphans/"+known) || exists(known) || exists("_tmp/123-x.parquet.tmp") {
		t.Fatal("quarantine did not move the files")
	}
	for _, f := range keep[1:] {
		if !exists(f) {
			t.Errorf("sweep touched %s", f)
		}
	}

	// With a catalog that has committed: delete what it does not know.
	write(known)
	write(orphan)
	start := time.Date(2025, 1, 2, 3, 0, 0, 0, time.UTC).UnixNano()
	seg := catalog.Segment{Table: "logs", Tenant: "a", Day: "2025-01-02", Hour: 3, Path: known, MinTime: start, MaxTime: start, Rows: 1, Bytes: 1}
	if err := cat.AddSegmentsWithQueue(ctx, catalog.QueueCommit{Name: QueueName, Pos: 10}, seg); err != nil {
		t.Fatal(err)
	}
	res, err = sweepOrphans(ctx, cat, lake.NewLocalStore(root), 10, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed != 1 || res.Quarantined != 0 || exists(orphan) || !exists(known) {
		t.Fatalf("second sweep %+v, orphan exists %v, known exists %v", res, exists(orphan), exists(known))
	}
	for _, f := range keep {
		if !exists(f) {
			t.Errorf("sweep touched %s", f)
		}
	}
}

func TestRecord(t *testing.T) {
	rec := appendRecord(nil, signal.KindMetrics, "acme", []byte("body"))
	r, err := parseRecord(rec)
	if err != nil || r.Kind != signal.KindMetrics || r.Enc != encOTLP || string(r.Tenant) != "acme" || string(r.Body) != "body" {
		t.Fatalf("round trip: %+v %v", r, err)
	}
	if !r.to(lakeDest) || !r.to("otlp/x") || r.destinations() != nil {
		t.Fatalf("a record without destinations goes to everyone: %v", r.destinations())
	}

	// Routed: only the named consumers take it.
	rec = appendRecordTo(nil, signal.KindLogs, encOTLP, "t", dest{"otlp/a", lakeDest}, []byte{9})
	r, err = parseRecord(rec)
	if err != nil || string(r.Body) != "\x09" || string(r.Tenant) != "t" {
		t.Fatalf("routed: %+v %v", r, err)
	}
	if !r.to("otlp/a") || !r.to(lakeDest) || r.to("otlp/b") || r.to("otlp/") {
		t.Fatalf("routing wrong: %v", r.destinations())
	}
	if d := r.destinations(); len(d) != 2 || d[0] != "otlp/a" || d[1] != lakeDest {
		t.Fatalf("destinations %v", d)
	}

	// Version 1 records (older builds) still read, to everyone.
	r, err = parseRecord([]byte{1, byte(signal.KindTraces), 2, 'a', 'b', 7})
	if err != nil || r.Kind != signal.KindTraces || string(r.Tenant) != "ab" || string(r.Body) != "\x07" || !r.to("x") {
		t.Fatalf("v1: %+v %v", r, err)
	}

	for _, bad := range [][]byte{
		nil, {1, 1}, {3, 1, 1, 'a'}, {1, 9, 1, 'a'}, {1, 1, 0}, {1, 1, 5, 'a'},
		{2, 1, 1, 1, 'a', 0},    // io wire body for logs
		{2, 1, 7, 1, 'a', 0},    // unknown encoding
		{2, 1, 0, 1, 'a'},       // no destination count
		{2, 1, 0, 1, 'a', 1, 3}, // destination cut
		{2, 1, 0, 1, 'a', 1, 0}, // empty destination name
	} {
		if _, err := parseRecord(bad); err == nil {
			t.Errorf("parseRecord(%v) accepted", bad)
		}
	}
}

func FuzzParseRecord(f *testing.F) {
	f.Add(appendRecord(nil, signal.KindLogs, "t", []byte{1, 2}))
	f.Add(appendRecordTo(nil, signal.KindMetrics, encOTLP, "t", dest{"lake", "otlp/x"}, []byte{1, 2}))
	for enc, body := range nastyBodies(f) {
		f.Add(appendRecordTo(nil, signal.KindMetrics, enc, "t", dest{"lake", "prometheus_remote_write/x"}, snappy.Encode(nil, body[:64])))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseRecord(b)
		if err != nil || b[0] != recordV2 {
			return
		}
		if r.Kind == signal.KindMetrics {
			// Whatever the body, decoding it errs or appends: no panic.
			var m signal.Metrics
			_ = decodeMetricsRecord(&m, r.Enc, r.Body)
		}
		again := appendRecordTo(nil, r.Kind, r.Enc, string(r.Tenant), r.destinations(), r.Body)
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs: %x vs %x", again, b)
		}
	})
}

// The consumer's steady state allocates nothing per request itself:
// batches and the record buffer come from the pool, and metric series are
// resolved once per signal and tenant.
func TestConsumeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	q, err := queue.Open(queue.Options{Dir: t.TempDir(), SegmentBytes: 256 << 20, MaxBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	c := newConsumer(q, time.Second, newMetrics())
	req := &otlpreceiver.Request{Tenant: "acme", Kind: signal.KindLogs, Body: logsRequest(t, 0, 100), Transport: otlpreceiver.TransportHTTP}
	ctx := context.Background()
	for range 3 {
		if _, err := c.Consume(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := c.Consume(ctx, req); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Errorf("%.1f allocations per Consume, want 0", allocs)
	}
}

// TestLockLakeExclusive: a second holder (sluice ingest while sluice run
// owns the lake, or two runs) is refused with a message saying why.
func TestLockLakeExclusive(t *testing.T) {
	root := t.TempDir()
	first, err := LockLake(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockLake(root); err == nil || !strings.Contains(err.Error(), "another sluice process") {
		t.Fatalf("second lock: err %v, want refusal", err)
	}
	first.Close()
	again, err := LockLake(root)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again.Close()
}

// Tenants that differ only in case would share one directory on a
// case-insensitive file system: the second spelling is refused with 400,
// also after a restart, when the first is only known from the catalog.
func TestPipelineTenantCaseVariants(t *testing.T) {
	cfg := testConfig(t)
	p := start(t, cfg)
	if r := post(t, p, "/v1/logs", "Acme", logsRequest(t, 0, 3)); r.StatusCode != 200 {
		t.Fatalf("first spelling: status %d", r.StatusCode)
	}
	if r := post(t, p, "/v1/logs", "acme", logsRequest(t, 3, 3)); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("second spelling: status %d, want 400", r.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	p2 := start(t, cfg)
	for _, name := range []string{"ACME", "acme"} {
		if r := post(t, p2, "/v1/logs", name, logsRequest(t, 3, 3)); r.StatusCode != http.StatusBadRequest {
			t.Errorf("%s after restart: status %d, want 400", name, r.StatusCode)
		}
	}
	if r := post(t, p2, "/v1/logs", "Acme", logsRequest(t, 6, 3)); r.StatusCode != 200 {
		t.Fatalf("first spelling after restart: status %d", r.StatusCode)
	}
	if err := p2.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := lakeSeqs(t, cfg.Lake.Root)
	if len(got) != 1 || !slices.Equal(got["Acme"], []int64{0, 1, 2, 6, 7, 8}) {
		t.Fatalf("lake tenants: %v, want only Acme with 0-2 and 6-8", got)
	}
	_, m := get(t, p2, "/metrics")
	// Refused spellings are no tenants: they count under tenant "".
	if !strings.Contains(m, `sluice_pipeline_invalid_requests_total{signal="logs",tenant=""} 2`) || strings.Contains(m, `tenant="ACME"`) {
		t.Errorf("refusal not counted:\n%s", grep(m, "invalid_requests"))
	}
}
