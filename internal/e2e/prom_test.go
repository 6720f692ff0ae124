package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/query/prom/promtest"
)

// promtool finds the real Prometheus client: $SLUICE_PROMTOOL, else
// promtool on PATH (Debian's prometheus package, installed by make test).
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SLUICE_PROMTOOL"); p != "" {
		return p
	}
	p, err := exec.LookPath("promtool")
	if err != nil {
		corpustest.Missing(t, "promtool (Debian package prometheus; make test installs it)")
	}
	return p
}

var queryLine = regexp.MustCompile(`listening (query=.*)`)

// startQueryServer runs `sluice query-server` on a free port and returns
// its address.
func startQueryServer(t *testing.T, args ...string) string {
	t.Helper()
	return startQueryServerAddrs(t, args...)["query"]
}

// startQueryServerAddrs runs `sluice query-server` on a free port and
// returns the key=value fields of its listening line (query, admin, lake).
func startQueryServerAddrs(t *testing.T, args ...string) map[string]string {
	t.Helper()
	cmd := exec.Command(sluiceBin, append([]string{"query-server", "--addr", "127.0.0.1:0"}, args...)...)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := queryLine.FindStringSubmatch(sc.Text()); m != nil {
				lines <- m[1]
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case l := <-lines:
		fields := map[string]string{}
		for _, f := range strings.Fields(l) {
			if k, v, ok := strings.Cut(f, "="); ok {
				fields[k] = v
			}
		}
		return fields
	case <-exited:
		t.Fatalf("query-server exited before listening:\n%s", stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("query-server did not print its address:\n%s", stderr)
	}
	return nil
}

// promSeries is one series of a promtool -o json answer or of prom_check.py.
type promSeries struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
	Values [][]any           `json:"values"`
}

func seriesKey(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q,", k, m[k])
	}
	return b.String()
}

func num(t *testing.T, v any) float64 {
	t.Helper()
	switch x := v.(type) {
	case float64:
		return x
	case string:
		f, err := strconv.ParseFloat(x, 64)
		if err != nil {
			t.Fatalf("value %q: %v", x, err)
		}
		return f
	}
	t.Fatalf("unexpected value %v (%T)", v, v)
	return 0
}

// points turns a series into ms timestamp -> value.
func points(t *testing.T, s promSeries) map[int64]float64 {
	out := map[int64]float64{}
	vs := s.Values
	if s.Value != nil {
		vs = append(vs, s.Value)
	}
	for _, p := range vs {
		out[int64(math.Round(num(t, p[0])*1000))] = num(t, p[1])
	}
	return out
}

// TestPromtoolAgainstDuckDB ingests the corpus metrics plus a synthetic
// counter, classic histogram and gauge with uneven increments over an hour,
// serves the lake with `sluice query-server`, runs real `promtool query`
// commands against it and compares every answer with what
// tests/crosscheck/prom_check.py computes from the raw Parquet with DuckDB
// (implementing Prometheus's extrapolation and quantile rules itself).
// Windows start and end off the sample grid, so rate and increase
// extrapolate at both ends.
func TestPromtoolAgainstDuckDB(t *testing.T) {
	tool := promtool(t)
	py := python(t)
	lake := t.TempDir()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	synth := promtest.Synth{Start: t0, Interval: 15 * time.Second, Points: 240,
		Services: []string{"checkout", "cart"}, Routes: []string{"/a", "/b", "/c"},
		CounterStep: 3, Bounds: []float64{0.05, 0.1, 0.25, 0.5, 1}, HistStep: []int{3, 5, 4, 2, 1, 1}, Vary: true}
	in := filepath.Join(t.TempDir(), "synth.json")
	if err := os.WriteFile(in, synth.JSON(), 0o644); err != nil {
		t.Fatal(err)
	}
	corpus := filepath.Join(corpustest.Dir(t), "otlp", "metrics")
	if r := run(t, "ingest", "--lake", lake, "--progress", "never", corpus, in); r.code != 0 {
		t.Fatalf("ingest exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	addr := "http://" + startQueryServer(t, "--lake", lake)

	sec := func(x time.Time) float64 { return float64(x.UnixMilli()) / 1000 }
	type tcase struct {
		name, expr        string
		time              time.Time // instant when set
		start, end        time.Time
		step              time.Duration
		minSeries, points int
	}
	cases := []tcase{
		{name: "selector_corpus", expr: `system_cpu_time_seconds_total`, time: time.Unix(1753307960, 0), minSeries: 40, points: 40},
		{name: "sum_by_corpus", expr: `sum by (service_name) (flamethrower_gauge_0)`, time: time.Unix(1766304532, 0), minSeries: 1, points: 1},
		{name: "sum_rate", expr: `sum by (service_name) (rate(test_requests_total[5m]))`,
			start: t0.Add(5*time.Minute + 7*time.Second), end: t0.Add(59 * time.Minute), step: time.Minute, minSeries: 2, points: 2 * 54},
		{name: "increase", expr: `increase(test_requests_total[1h])`, time: t0.Add(time.Hour + 10*time.Second), minSeries: 6, points: 6},
		{name: "avg_over_time", expr: `avg_over_time(test_queue_depth[10m])`,
			start: t0.Add(3 * time.Second), end: t0.Add(70 * time.Minute), step: 5 * time.Minute, minSeries: 6, points: 6 * 14},
		{name: "histogram_quantile", expr: `histogram_quantile(0.9, sum by (le) (rate(test_latency_seconds_bucket[5m])))`,
			start: t0.Add(4 * time.Minute), end: t0.Add(65 * time.Minute), step: 37 * time.Second, minSeries: 1, points: 95},
	}
	var spec []map[string]any
	for _, c := range cases {
		if !c.time.IsZero() {
			spec = append(spec, map[string]any{"name": c.name, "time": sec(c.time)})
		} else {
			spec = append(spec, map[string]any{"name": c.name, "start": sec(c.start), "end": sec(c.end), "step": c.step.Seconds()})
		}
	}
	specJSON, _ := json.Marshal(spec)
	root, _ := corpustest.ModuleRoot()
	out, err := exec.Command(py, filepath.Join(root, "tests", "crosscheck", "prom_check.py"), "--lake", lake, "--cases", string(specJSON)).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("prom_check.py: %v\n%s", err, stderr)
	}
	var want map[string][]promSeries
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatalf("prom_check.py output: %v\n%s", err, out)
	}

	for _, c := range cases {
		args := []string{"query"}
		if !c.time.IsZero() {
			args = append(args, "instant", "-o", "json", "--time", c.time.UTC().Format(time.RFC3339), addr, c.expr)
		} else {
			args = append(args, "range", "-o", "json", "--start", c.start.UTC().Format(time.RFC3339),
				"--end", c.end.UTC().Format(time.RFC3339), "--step", c.step.String(), addr, c.expr)
		}
		cmd := exec.Command(tool, args...)
		gotJSON, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("%s: promtool %v: %v\n%s", c.name, args, err, stderr)
		}
		var got []promSeries
		if err := json.Unmarshal(gotJSON, &got); err != nil {
			t.Fatalf("%s: promtool output: %v\n%s", c.name, err, gotJSON)
		}
		compareSeries(t, c.name, got, want[c.name], c.minSeries, c.points)
	}
}

func compareSeries(t *testing.T, name string, got, want []promSeries, minSeries, minPoints int) {
	t.Helper()
	wantBy := map[string]map[int64]float64{}
	for _, s := range want {
		wantBy[seriesKey(s.Metric)] = points(t, s)
	}
	gotBy := map[string]map[int64]float64{}
	for _, s := range got {
		gotBy[seriesKey(s.Metric)] = points(t, s)
	}
	if len(gotBy) < minSeries {
		t.Errorf("%s: %d series, want at least %d (the check would be vacuous)", name, len(gotBy), minSeries)
	}
	n := 0
	for k, w := range wantBy {
		g, ok := gotBy[k]
		if !ok {
			t.Errorf("%s: series %s missing from sluice's answer", name, k)
			continue
		}
		if len(g) != len(w) {
			t.Errorf("%s: series %s has %d points, DuckDB %d", name, k, len(g), len(w))
		}
		for ts, wv := range w {
			gv, ok := g[ts]
			n++
			if !ok || math.Abs(gv-wv) > 1e-9*math.Max(1, math.Abs(wv)) {
				t.Errorf("%s: series %s at %d: sluice %v, DuckDB %v", name, k, ts, gv, wv)
			}
		}
	}
	for k := range gotBy {
		if _, ok := wantBy[k]; !ok {
			t.Errorf("%s: sluice returned series %s that DuckDB does not", name, k)
		}
	}
	if n < minPoints {
		t.Errorf("%s: compared %d points, want at least %d", name, n, minPoints)
	}
	t.Logf("%s: %d series, %d points equal", name, len(wantBy), n)
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// queryCount runs an instant query and returns the value of its single
// sample, or -1 when the answer is empty.
func queryCount(t *testing.T, base, tenant, expr string, at time.Time) float64 {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/query?"+url.Values{"query": {expr}, "time": {at.Format(time.RFC3339)}}.Encode(), nil)
	if tenant != "" {
		req.Header.Set("X-Scope-OrgID", tenant)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []promSeries `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Status != "success" {
		t.Fatalf("query %s: %d %v %s", expr, resp.StatusCode, err, body.Error)
	}
	if len(body.Data.Result) == 0 {
		return -1
	}
	return num(t, body.Data.Result[0].Value[1])
}

// TestRunServesPromQL: `sluice run` with query.addr answers PromQL over
// what it ingested, per tenant, and `sluice query-server` runs beside it on
// the same lake (it takes no lock).
func TestRunServesPromQL(t *testing.T) {
	lakeDir := t.TempDir()
	cfg := runConfig(t, lakeDir)
	qaddr := freePort(t)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte("query:\n  addr: \"\"\n"), []byte("query:\n  addr: "+qaddr+"\n"), 1)
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, cfg)

	t0 := time.Now().Add(-time.Hour).Truncate(time.Minute)
	synth := promtest.Synth{Start: t0, Interval: 15 * time.Second, Points: 20, Services: []string{"checkout"},
		Routes: []string{"/a", "/b"}, CounterStep: 1, Bounds: []float64{1}, HistStep: []int{1, 1}}
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.http+"/v1/metrics", bytes.NewReader(synth.JSON()))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Scope-OrgID", "acme")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("export: %d", resp.StatusCode)
	}
	at := t0.Add(19 * 15 * time.Second)
	base := "http://" + qaddr
	deadline := time.Now().Add(20 * time.Second)
	for queryCount(t, base, "acme", "count(test_queue_depth)", at) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("sluice run's query API never showed the 2 series\n%s", s.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if v := queryCount(t, base, "other", "count(test_queue_depth)", at); v != -1 {
		t.Errorf("tenant other sees acme's series: %v", v)
	}
	// The gauge of point i is i.
	if v := queryCount(t, base, "acme", `max(test_queue_depth)`, at); v != 19 {
		t.Errorf("max(test_queue_depth) = %v, want 19", v)
	}
	side := "http://" + startQueryServer(t, "--lake", lakeDir, "--config", cfg)
	// sluice run answers from its unflushed tail at once; a separate
	// query-server sees the series once a checkpoint commits them
	// (flush_interval 400ms here).
	for v := queryCount(t, side, "acme", "count(test_queue_depth)", at); v != 2; v = queryCount(t, side, "acme", "count(test_queue_depth)", at) {
		if time.Now().After(deadline) {
			t.Fatalf("query-server beside sluice run: count = %v, want 2", v)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The logs and traces search API is mounted on the same port.
	for _, b := range []string{base, side} {
		resp, err := http.Get(b + "/api/v1/logs/search")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s/api/v1/logs/search: %d", b, resp.StatusCode)
		}
	}
}

// TestPromtoolRollups: after `sluice rollup`, a promtool range query whose
// step is a tier reads the rollup and answers what raw points answer
// (issue 11: it used to give each window's last value, the point before
// the raw one), and a finer step reads raw points.
func TestPromtoolRollups(t *testing.T) {
	tool := promtool(t)
	lake := t.TempDir()
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	// Service "checkout" has points 7.5 s into every 15 s, as an
	// exporter's: the rollup stands for them. Service "aligned" has points
	// on whole 15 s, so each window's first point sits on its start and
	// belongs to the range before: its series is read from raw points.
	offset := map[string]time.Duration{"checkout": 7500 * time.Millisecond, "aligned": 0}
	var ins []string
	for svc, off := range offset {
		synth := promtest.Synth{Start: t0.Add(off), Interval: 15 * time.Second, Points: 240, Services: []string{svc},
			Routes: []string{"/a"}, CounterStep: 1, Bounds: []float64{1}, HistStep: []int{1, 1}}
		in := filepath.Join(t.TempDir(), svc+".json")
		if err := os.WriteFile(in, synth.JSON(), 0o644); err != nil {
			t.Fatal(err)
		}
		ins = append(ins, in)
	}
	if r := run(t, append([]string{"ingest", "--lake", lake, "--progress", "never"}, ins...)...); r.code != 0 {
		t.Fatalf("ingest exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := run(t, "rollup", "--lake", lake, "--tiers", "1m,5m,1h"); r.code != 0 {
		t.Fatalf("rollup exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	addr := "http://" + startQueryServer(t, "--lake", lake)
	query := func(step time.Duration) map[string]map[int64]float64 {
		out, err := exec.Command(tool, "query", "range", "-o", "json", "--start", t0.Add(10*time.Minute).Format(time.RFC3339),
			"--end", t0.Add(50*time.Minute).Format(time.RFC3339), "--step", step.String(), addr, "test_queue_depth").Output()
		if err != nil {
			t.Fatalf("promtool: %v", err)
		}
		var got []promSeries
		if err := json.Unmarshal(out, &got); err != nil || len(got) != 2 {
			t.Fatalf("promtool output %s: %v", out, err)
		}
		res := map[string]map[int64]float64{}
		for _, s := range got {
			res[s.Metric["service_name"]] = points(t, s)
		}
		return res
	}
	// The gauge of point i (at t0+offset+15s*i) is i: at t the answer is
	// the newest point at or before t, read from the 5m rollup or raw.
	for _, step := range []time.Duration{5 * time.Minute, 30 * time.Second} {
		for svc, pts := range query(step) {
			if want := 1 + int(40*time.Minute/step); len(pts) != want {
				t.Fatalf("step %s %s: %d points, want %d", step, svc, len(pts), want)
			}
			for ts, v := range pts {
				i := float64(time.UnixMilli(ts).Sub(t0.Add(offset[svc])) / (15 * time.Second))
				if v != i {
					t.Errorf("step %s %s at %d: %v, want the raw point %v", step, svc, ts, v, i)
				}
			}
		}
	}
}
