package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/queue"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/tracer"
	"github.com/sluice-dev/sluice/internal/tracer/tracertest"
)

func TestIOPathPrefix(t *testing.T) {
	for _, c := range []struct {
		path  string
		depth int
		want  string
	}{
		{"/var/lib/x/y", 2, "/var/lib"},
		{"/var/lib/x/y", 1, "/var"},
		{"/var/lib/x/y", 4, "/var/lib/x/y"},
		{"/var/lib/x/y", 9, "/var/lib/x/y"},
		{"/var/lib", 2, "/var/lib"},
		{"/var", 2, "/var"},
		{"//var//lib//x", 2, "//var//lib"},
		{"/var/lib/", 2, "/var/lib"},
		{"rel/a/b", 2, "rel/a"},
		{"rel", 2, "rel"},
		{"/", 2, ""},
		{"", 2, ""},
	} {
		if got := string(pathPrefix([]byte(c.path), c.depth)); got != c.want {
			t.Errorf("pathPrefix(%q, %d) = %q, want %q", c.path, c.depth, got, c.want)
		}
	}
}

// TestIOAggregation: calls add up per (comm, syscall, path_prefix); beyond
// max_series new series fold into comm=other, path_prefix=other of their
// syscall and are counted; the snapshot survives the OTLP encoding as
// cumulative sums and a histogram whose count is the ops.
func TestIOAggregation(t *testing.T) {
	overflow := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
	a := newIOAgg(2, 3, overflow)
	b := new(signal.IOEvents)
	row := func(comm, path string, sc tracer.Syscall, n int64, errno int32, dur time.Duration) {
		b.Append(&signal.IOEvent{Comm: b.AppendString(comm), Path: b.AppendString(path), Syscall: uint16(sc),
			Bytes: n, Errno: errno, Duration: int64(dur)})
	}
	row("db", "/var/lib/db/1", tracer.SysRead, 100, 0, 500*time.Nanosecond)
	row("db", "/var/lib/db/2", tracer.SysRead, 300, 0, 3*time.Millisecond)
	row("db", "/var/lib/wal", tracer.SysWrite, 50, 0, time.Minute) // beyond the last bound
	row("web", "/srv", tracer.SysOpenat, 0, 2, time.Microsecond)   // ENOENT
	a.Add(b)
	b.Reset()
	row("db", "/var/lib/db/3", tracer.SysRead, 1, 0, time.Microsecond) // an existing series
	row("cron", "/etc/x", tracer.SysRead, 7, 0, time.Microsecond)      // 4th series: folded
	row("sh", "/bin/sh", tracer.SysRead, 8, 0, time.Microsecond)       // folded into the same
	row("sh", "/bin/sh", tracer.SysRead, 2, 0, time.Microsecond)       // again (the previous row's series)
	row("sh", "", tracer.SysClose, 0, 0, time.Microsecond)             // folded, its own syscall
	a.Add(b)
	if v := counterValue(overflow); v != 4 {
		t.Errorf("overflow counted %v calls, want 4", v)
	}

	var m signal.Metrics
	now := time.Now().UnixNano()
	if !a.snapshot(&m, "h1", now) {
		t.Fatal("no snapshot")
	}
	var d signal.Metrics
	if err := otlp.DecodeMetrics(&d, otlp.AppendMetricsProto(nil, &m)); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for i := range d.Len() {
		desc := d.Descs[d.Desc[i]]
		if d.Time[i] != now || d.StartTime[i] != a.start || desc.Temporality != signal.TemporalityCumulative {
			t.Fatalf("point %d: time %d start %d temporality %v", i, d.Time[i], d.StartTime[i], desc.Temporality)
		}
		if r := d.Resource[i]; d.ServiceName(r) != "sluice-iotrace" {
			t.Fatalf("service.name %q", d.ServiceName(r))
		}
		attr := func(k string) string {
			if j := d.FindAttr(d.Attr[i], k); j >= 0 {
				return d.AttrString(j)
			}
			return "?"
		}
		key := fmt.Sprintf("%s{%s,%s,%s}", d.String(desc.Name), attr("comm"), attr("syscall"), attr("path_prefix"))
		var v string
		switch desc.Type {
		case signal.MetricSum:
			if !desc.Monotonic {
				t.Fatalf("%s is not monotonic", key)
			}
			v = fmt.Sprint(d.Value(i))
		case signal.MetricHistogram:
			bc := d.U64[d.BucketCounts[i].Start:d.BucketCounts[i].End]
			bounds := d.F64[d.Bounds[i].Start:d.Bounds[i].End]
			if len(bc) != len(bounds)+1 || len(bounds) != len(tracer.LatencyBounds) || bounds[0] != 1e-6 {
				t.Fatalf("%s: %d buckets, %d bounds from %v", key, len(bc), len(bounds), bounds[0])
			}
			var total uint64
			var nonzero []string
			for k, c := range bc {
				total += c
				if c > 0 {
					nonzero = append(nonzero, fmt.Sprintf("%d:%d", k, c))
				}
			}
			if total != d.Count[i] {
				t.Errorf("%s: buckets sum to %d, count %d", key, total, d.Count[i])
			}
			v = fmt.Sprintf("n=%d sum=%.9f %s", d.Count[i], d.Sum[i], strings.Join(nonzero, ","))
		}
		got[key] = v
	}
	last := len(tracer.LatencyBounds)
	want := map[string]string{
		"sluice.io.operations{db,read,/var/lib}":  "3",
		"sluice.io.bytes{db,read,/var/lib}":       "401",
		"sluice.io.errors{db,read,/var/lib}":      "0",
		"sluice.io.duration{db,read,/var/lib}":    "n=3 sum=0.003001500 0:2,6:1", // 500ns, 1µs; 3ms <= 4.096ms
		"sluice.io.operations{db,write,/var/lib}": "1",
		"sluice.io.bytes{db,write,/var/lib}":      "50",
		"sluice.io.errors{db,write,/var/lib}":     "0",
		"sluice.io.duration{db,write,/var/lib}":   fmt.Sprintf("n=1 sum=60.000000000 %d:1", last),
		"sluice.io.operations{web,openat,/srv}":   "1",
		"sluice.io.bytes{web,openat,/srv}":        "0",
		"sluice.io.errors{web,openat,/srv}":       "1",
		"sluice.io.duration{web,openat,/srv}":     "n=1 sum=0.000001000 0:1",
		"sluice.io.operations{other,read,other}":  "3",
		"sluice.io.bytes{other,read,other}":       "17",
		"sluice.io.errors{other,read,other}":      "0",
		"sluice.io.duration{other,read,other}":    "n=3 sum=0.000003000 0:3",
		"sluice.io.operations{other,close,other}": "1",
		"sluice.io.bytes{other,close,other}":      "0",
		"sluice.io.errors{other,close,other}":     "0",
		"sluice.io.duration{other,close,other}":   "n=1 sum=0.000001000 0:1",
	}
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if got[k] != want[k] {
			t.Errorf("%s = %q, want %q", k, got[k], want[k])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d points, want %d: %v", len(got), len(want), got)
	}
}

// promTenantQuery runs an instant PromQL query for tenant and returns
// "name{comm,syscall,path_prefix}" => value; it checks every series'
// job label.
func promTenantQuery(t *testing.T, base, tenant, q string) map[string]float64 {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/api/v1/query?"+url.Values{"query": {q}, "time": {fmt.Sprint(float64(time.Now().UnixMilli()) / 1000)}}.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Scope-OrgID", tenant)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Status, Error string
		Data          struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Status != "success" {
		t.Fatalf("query %s: %v %s", q, err, out.Error)
	}
	res := map[string]float64{}
	for _, r := range out.Data.Result {
		m := r.Metric
		if m["job"] != "sluice-iotrace" {
			t.Errorf("%s: job %q, want sluice-iotrace", q, m["job"])
		}
		var f float64
		fmt.Sscan(r.Value[1].(string), &f)
		res[fmt.Sprintf("%s{%s,%s,%s}", m["__name__"], m["comm"], m["syscall"], m["path_prefix"])] = f
	}
	return res
}

// TestIOTraceMetrics runs the pipeline with the tracer and its metrics on,
// filtered to a child doing a known workload: the query API's PromQL must
// show exactly the workload's ops, bytes and errors per comm, syscall and
// path_prefix, and a histogram whose count is the ops, for the iotrace
// tenant.
func TestIOTraceMetrics(t *testing.T) {
	tracertest.RequireTracing(t, tracer.Check().Err())
	work := t.TempDir()
	child := tracertest.Start(t, work, "")
	commB, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", child.PID))
	if err != nil {
		t.Fatal(err)
	}
	comm := strings.TrimSpace(string(commB))
	// The prefix is the work directory itself: its files are one deeper.
	depth := len(strings.Split(strings.Trim(filepath.Clean(work), "/"), "/"))
	cfg := testConfig(t)
	cfg.Query.Addr = "127.0.0.1:0"
	cfg.Receivers.IOTrace.Enabled = true
	cfg.Receivers.IOTrace.Tenant = "hostio"
	cfg.Receivers.IOTrace.PID = uint32(child.PID)
	cfg.Receivers.IOTrace.Metrics = config.IOTraceMetrics{Enabled: true, Interval: config.Duration(100 * time.Millisecond), PathDepth: depth, MaxSeries: 100}
	p := start(t, cfg)
	child.Go(t)

	want := tracertest.Expected(work)
	deadline := time.Now().Add(60 * time.Second)
	for counterValue(p.iom.queued) < float64(len(want)) {
		if time.Now().After(deadline) {
			t.Fatalf("%v rows queued after 60s, want %d", counterValue(p.iom.queued), len(want))
		}
		time.Sleep(20 * time.Millisecond)
	}
	exp := map[string]float64{}
	for _, w := range want {
		prefix := string(pathPrefix([]byte(w.Path), depth))
		if prefix != work {
			t.Fatalf("path %s: prefix %s, want %s", w.Path, prefix, work)
		}
		k := func(name string) string { return fmt.Sprintf("%s{%s,%s,%s}", name, comm, w.Syscall, prefix) }
		exp[k("sluice_io_operations_total")]++
		exp[k("sluice_io_bytes_total")] += float64(w.Bytes)
		exp[k("sluice_io_errors_total")] += 0
		if w.Ret < -1 {
			exp[k("sluice_io_errors_total")]++
		}
		exp[k("sluice_io_duration_seconds_count")]++
		exp[k("sluice_io_duration_seconds_bucket")]++ // le="+Inf"
	}
	// Every row was added to the aggregate before it was queued; a snapshot
	// taken before the last rows may still be the newest for a moment, so
	// checkpoint and query until the newest holds them all.
	base := "http://" + p.Addrs().Query.String()
	var got map[string]float64
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := p.Checkpoint(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		got = map[string]float64{}
		for _, q := range []string{"sluice_io_operations_total", "sluice_io_bytes_total", "sluice_io_errors_total",
			"sluice_io_duration_seconds_count", `sluice_io_duration_seconds_bucket{le="+Inf"}`} {
			for k, v := range promTenantQuery(t, base, "hostio", q) {
				got[k] = v
			}
		}
		if maps.Equal(got, exp) {
			break
		}
		if time.Now().After(deadline) {
			var keys []string
			for k := range exp {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if got[k] != exp[k] {
					t.Errorf("%s = %v, want %v", k, got[k], exp[k])
				}
			}
			t.Fatalf("after 60s: %d series, want %d: %v", len(got), len(exp), got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Another tenant sees none of them.
	if other := promTenantQuery(t, base, "default", "sluice_io_operations_total"); len(other) != 0 {
		t.Errorf("tenant default sees %v", other)
	}
	if v := counterValue(p.iom.mc.overflow); v != 0 {
		t.Errorf("overflow %v", v)
	}
}

// BenchmarkIOAggAdd: cost per call of receivers.iotrace.metrics'
// aggregation, batches of 8192 calls over 40 comms × 25 path prefixes.
func BenchmarkIOAggAdd(b *testing.B) {
	a := newIOAgg(2, 10000, prometheus.NewCounter(prometheus.CounterOpts{Name: "x"}))
	ev := new(signal.IOEvents)
	for i := range 8192 {
		ev.Append(&signal.IOEvent{Comm: ev.AppendString(fmt.Sprintf("comm%d", i%40)),
			Path: ev.AppendString(fmt.Sprintf("/data/d%d/f%d", i%25, i)), Syscall: uint16(tracer.SysRead),
			Bytes: 4096, Duration: int64(i % 5000)})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		a.Add(ev)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*ev.Len()), "ns/call")
}

// TestIOTraceMetricsAtShutdown: with an interval longer than the run, the
// one snapshot queued at shutdown holds every call, and the final
// checkpoint writes it into the tenant's metrics table (read by DuckDB).
func TestIOTraceMetricsAtShutdown(t *testing.T) {
	tracertest.RequireTracing(t, tracer.Check().Err())
	py := os.Getenv("SLUICE_PYTHON")
	if py == "" {
		corpustest.Missing(t, "SLUICE_PYTHON (a Python with duckdb)")
	}
	work := t.TempDir()
	child := tracertest.Start(t, work, "")
	cfg := testConfig(t)
	cfg.Receivers.IOTrace.Enabled = true
	cfg.Receivers.IOTrace.Tenant = "hostio"
	cfg.Receivers.IOTrace.PID = uint32(child.PID)
	cfg.Receivers.IOTrace.Metrics = config.IOTraceMetrics{Enabled: true, Interval: config.Duration(time.Hour), PathDepth: 2, MaxSeries: 100}
	p := start(t, cfg)
	child.Go(t)
	want := tracertest.Expected(work)
	deadline := time.Now().Add(60 * time.Second)
	for counterValue(p.iom.queued) < float64(len(want)) {
		if time.Now().After(deadline) {
			t.Fatalf("%v rows queued after 60s, want %d", counterValue(p.iom.queued), len(want))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if v := counterValue(p.iom.mc.emitted); v != 0 {
		t.Fatalf("%v points queued before the first interval", v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var ops, bytes, errs int64
	syscalls := map[string]bool{}
	for _, w := range want {
		ops++
		bytes += w.Bytes
		if w.Ret < -1 {
			errs++
		}
		syscalls[w.Syscall] = true
	}
	script := `import duckdb, sys
con = duckdb.connect()
q = "SELECT metric_name, count(*), sum(coalesce(value_int, 0)), sum(coalesce(count, 0)), count(DISTINCT timestamp) FROM read_parquet(" + repr(sys.argv[1] + "/metrics/tenant=hostio/**/*.parquet") + ") GROUP BY 1 ORDER BY 1"
for r in con.execute(q).fetchall():
    print(*r, sep="|")
`
	out, err := exec.Command(py, "-c", script, cfg.Lake.Root).CombinedOutput()
	if err != nil {
		t.Fatalf("duckdb: %v\n%s", err, out)
	}
	n := len(syscalls) // one series per syscall: one comm, one path prefix
	exp := fmt.Sprintf("sluice.io.bytes|%d|%d|0|1\nsluice.io.duration|%d|0|%d|1\nsluice.io.errors|%d|%d|0|1\nsluice.io.operations|%d|%d|0|1",
		n, bytes, n, ops, n, errs, n, ops)
	if got := strings.TrimSpace(string(out)); got != exp {
		t.Fatalf("metrics table:\n%s\nwant:\n%s", got, exp)
	}
}

// TestIOMetricsEmitQueueFull: a snapshot the queue refuses is counted as a
// failure and skipped; once the queue has room the next snapshot carries
// the cumulative counts.
func TestIOMetricsEmitQueueFull(t *testing.T) {
	q, err := queue.Open(queue.Options{Dir: t.TempDir(), SegmentBytes: 256 << 10, MaxBytes: 1 << 20, Full: queue.Backpressure, MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for _, size := range []int{100 << 10, 1 << 10, 16} {
		for {
			if _, err := q.Append(make([]byte, size)); err != nil {
				if !errors.Is(err, queue.ErrFull) {
					t.Fatal(err)
				}
				break
			}
		}
	}
	mc := newIOMetricsCounters()
	agg := newIOAgg(2, 10, mc.overflow)
	e := &ioEmitter{agg: agg, cons: newConsumer(q, time.Second, newMetrics()), tenant: "t", host: "h", log: testLogger(t),
		emitted: mc.emitted, failures: mc.failures}
	b := new(signal.IOEvents)
	b.Append(&signal.IOEvent{Comm: b.AppendString("db"), Path: b.AppendString("/var/lib/x"), Syscall: uint16(tracer.SysRead), Bytes: 10})
	agg.Add(b)
	e.emit(time.Now())
	if f, n := counterValue(mc.failures), counterValue(mc.emitted); f != 1 || n != 0 {
		t.Fatalf("full queue: failures %v, points %v; want 1, 0", f, n)
	}
	// Make room: a reader past every record lets the queue drop them.
	r := q.NewReader(0)
	defer r.Close()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	var last queue.Position
	for {
		_, pos, err := r.Next(done)
		if err != nil {
			break
		}
		last = pos
	}
	if err := q.Release(last); err != nil {
		t.Fatal(err)
	}
	agg.Add(b)
	e.emit(time.Now())
	if f, n := counterValue(mc.failures), counterValue(mc.emitted); f != 1 || n != 4 {
		t.Fatalf("after room: failures %v, points %v; want 1, 4", f, n)
	}
}
