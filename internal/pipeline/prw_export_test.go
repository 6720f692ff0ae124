package pipeline

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/corpustest"
)

// relayMetrics: a gauge, a counter and a histogram over a few series, n
// points one second apart ending at end, for two services.
func relayMetrics(t testing.TB, end time.Time, n int) []byte {
	md := pmetric.NewMetrics()
	for svc := range 2 {
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", fmt.Sprintf("svc%d", svc))
		rm.Resource().Attributes().PutStr("service.instance.id", "i-1")
		rm.Resource().Attributes().PutStr("host.name", "h1")
		sm := rm.ScopeMetrics().AppendEmpty()
		g := sm.Metrics().AppendEmpty()
		g.SetName("room.temperature")
		g.SetUnit("Cel")
		c := sm.Metrics().AppendEmpty()
		c.SetName("http.requests")
		sum := c.SetEmptySum()
		sum.SetIsMonotonic(true)
		sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		h := sm.Metrics().AppendEmpty()
		h.SetName("latency")
		h.SetUnit("s")
		hist := h.SetEmptyHistogram()
		hist.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		gp := g.SetEmptyGauge().DataPoints()
		for s := range 3 {
			for i := range n {
				ts := pcommon.NewTimestampFromTime(end.Add(-time.Duration(n-1-i) * time.Second))
				p := gp.AppendEmpty()
				p.SetTimestamp(ts)
				p.SetDoubleValue(float64(svc*10000+s*1000+i) + 0.25)
				p.Attributes().PutStr("room", fmt.Sprintf("r%d", s))
				q := sum.DataPoints().AppendEmpty()
				q.SetTimestamp(ts)
				q.SetIntValue(int64(s*100 + i*(svc+1)))
				q.Attributes().PutStr("code", fmt.Sprintf("%d", 200+s))
				if s == 0 {
					hp := hist.DataPoints().AppendEmpty()
					hp.SetTimestamp(ts)
					hp.ExplicitBounds().FromRaw([]float64{0.1, 1})
					hp.BucketCounts().FromRaw([]uint64{uint64(i), 1, 2})
					hp.SetCount(uint64(i + 3))
					hp.SetSum(float64(i))
				}
			}
		}
	}
	b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func startPrometheusRW(t *testing.T) string {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		corpustest.Missing(t, "prometheus (Debian package prometheus)")
	}
	dir := t.TempDir()
	cfg := dir + "/prometheus.yml"
	os.WriteFile(cfg, []byte("global: {}\n"), 0o644)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+dir+"/data", "--web.listen-address="+addr,
		"--web.enable-remote-write-receiver", "--log.level=warn")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for range 200 {
		if resp, err := http.Get("http://" + addr + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return addr
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("prometheus did not become ready")
	return ""
}

// instantQuery returns "labels => value" lines, sorted.
func instantQuery(t *testing.T, base, q string, at time.Time) []string {
	t.Helper()
	v := url.Values{"query": {q}, "time": {fmt.Sprint(float64(at.UnixMilli()) / 1000)}}
	resp, err := http.Get(base + "/api/v1/query?" + v.Encode())
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
		t.Fatalf("%s: query %s: %v %s", base, q, err, out.Error)
	}
	var lines []string
	for _, r := range out.Data.Result {
		var kv []string
		for k, v := range r.Metric {
			kv = append(kv, k+"="+v)
		}
		sort.Strings(kv)
		var f float64
		fmt.Sscan(r.Value[1].(string), &f)
		lines = append(lines, fmt.Sprintf("{%s} => %.6g", strings.Join(kv, ","), f))
	}
	sort.Strings(lines)
	return lines
}

// sluice -> real Prometheus over remote write 1.0 through the queue and a
// cursor: the same PromQL queries agree series by series between
// Prometheus and sluice's own query API.
func TestPipelineRemoteWriteIntoPrometheusAgrees(t *testing.T) {
	prom := startPrometheusRW(t)
	cfg := testConfig(t)
	cfg.Query.Addr = "127.0.0.1:0"
	cfg.Exporters = map[string]config.Exporter{
		"prometheus_remote_write": {Endpoints: []string{"http://" + prom + "/api/v1/write"}, BatchDelay: config.Duration(20 * time.Millisecond)},
	}
	cfg.Pipelines = map[string]config.Pipeline{
		"metrics": {Receivers: []string{"otlp"}, Exporters: []string{"lake", "prometheus_remote_write"}},
		"logs":    {Receivers: []string{"otlp"}, Exporters: []string{"lake"}},
	}
	p := start(t, cfg)
	end := time.Now().Truncate(time.Second).Add(-time.Minute)
	const n = 30
	if resp := post(t, p, "/v1/metrics", "", relayMetrics(t, end, n)); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	if resp := post(t, p, "/v1/logs", "", logsRequest(t, 0, 5)); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	waitCaughtUp(t, p, 60*time.Second)
	sluice := "http://" + p.Addrs().Query.String()
	at := end.Add(time.Second)
	for _, q := range []string{
		`sum by (job, instance, room) (room_temperature_celsius)`,
		`sum by (job, instance, code) (http_requests_total)`,
		`sum by (job, instance, code) (rate(http_requests_total[1m]))`,
		`sum by (job, le) (latency_seconds_bucket)`,
		`histogram_quantile(0.9, sum by (job, le) (latency_seconds_bucket))`,
		// Not compared: rate() of a bucket whose first sample is small.
		// Prometheus 2.42 (the Debian package) applies the extrapolation
		// "to zero" before the threshold rule, the engine in go.mod after
		// it, so le="1" differs by design (0.5167 vs 0.5083) on identical
		// samples; the samples themselves are compared above and below.
		`sum by (job) (count_over_time(room_temperature_celsius[5m]))`,
		`sum by (job) (latency_seconds_count)`,
	} {
		a, b := instantQuery(t, "http://"+prom, q, at), instantQuery(t, sluice, q, at)
		if len(a) == 0 || strings.Join(a, "\n") != strings.Join(b, "\n") {
			t.Errorf("%s\nprometheus:\n  %s\nsluice:\n  %s", q, strings.Join(a, "\n  "), strings.Join(b, "\n  "))
		}
	}
	if got := instantQuery(t, "http://"+prom, `count(target_info{host_name="h1"})`, at); len(got) != 1 || !strings.HasSuffix(got[0], "=> 2") {
		t.Errorf("target_info: %v", got)
	}
	_, metrics := get(t, p, "/metrics")
	for _, want := range []string{
		`sluice_exporter_sent_records_total{exporter="prometheus_remote_write"} 1`,
		`sluice_exporter_skipped_records_total{exporter="prometheus_remote_write"} 1`,
		`sluice_exporter_dropped_points_total{exporter="prometheus_remote_write",reason="unsupported"} 0`,
		`sluice_exporter_exemplars_trimmed_total{exporter="prometheus_remote_write"} 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grep(metrics, "sluice_exporter_"))
		}
	}
}
