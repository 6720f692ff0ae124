package prwexporter

import (
	"encoding/json"
	"fmt"
	"math"
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

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/exporter/sending"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/waittest"
)

// testMetrics: a gauge and a monotonic counter over 3 series each, and a
// histogram, n points per series one second apart, ending at end.
func testMetrics(t testing.TB, end time.Time, n int) []byte {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "svc")
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
			p.SetDoubleValue(float64(s*1000+i) + 0.5)
			p.Attributes().PutStr("room", fmt.Sprintf("r%d", s))
			q := sum.DataPoints().AppendEmpty()
			q.SetTimestamp(ts)
			q.SetIntValue(int64(s*100 + i))
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
	b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func startPrometheus(t *testing.T) string {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		corpustest.Missing(t, "prometheus (Debian package prometheus)")
	}
	dir := t.TempDir()
	cfg := dir + "/prometheus.yml"
	os.WriteFile(cfg, []byte("global: {}\n"), 0o644)
	addr := freePort(t)
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

type promResult struct {
	Metric map[string]string `json:"metric"`
	Values [][2]any          `json:"values"`
	Value  [2]any            `json:"value"`
}

func promQuery(t *testing.T, addr, q string, at time.Time) []promResult {
	t.Helper()
	v := url.Values{"query": {q}, "time": {fmt.Sprint(float64(at.UnixMilli()) / 1000)}}
	resp, err := http.Get("http://" + addr + "/api/v1/query?" + v.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Status string
		Error  string
		Data   struct{ Result []promResult }
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Status != "success" {
		t.Fatalf("query %s: %v %s", q, err, out.Error)
	}
	return out.Data.Result
}

// Real Prometheus receives the 1.0 exporter: every sample arrives under the
// OpenTelemetry specification's names and labels, values exact.
func TestRemoteWriteIntoPrometheus(t *testing.T) {
	addr := startPrometheus(t)
	end := time.Now().Truncate(time.Second)
	const n = 30
	exp, err := New(Config{Endpoints: []string{"http://" + addr + "/api/v1/write"}, Policy: sending.Policy{InitialBackoff: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	body := testMetrics(t, end, n)
	if err := exp.Send(waittest.Context(t), []exporter.Record{{Kind: signal.KindMetrics, Tenant: "default", Body: body}}); err != nil {
		t.Fatal(err)
	}
	if ep := exp.Endpoints()[0]; ep.Stats.Dropped.Load() != 0 || ep.Stats.Sent.Load() == 0 {
		t.Fatalf("endpoint stats: sent %d dropped %d", ep.Stats.Sent.Load(), ep.Stats.Dropped.Load())
	}
	at := end.Add(time.Second)
	counts := map[string]float64{}
	for _, r := range promQuery(t, addr, `{job="svc"}[5m]`, at) {
		keys := make([]string, 0, len(r.Metric))
		for k, v := range r.Metric {
			keys = append(keys, k+"="+v)
		}
		sort.Strings(keys)
		counts[strings.Join(keys, ",")] = float64(len(r.Values))
	}
	// 3 gauge + 3 counter + (3 buckets + sum + count) histogram series,
	// and target_info (one sample per batch).
	if len(counts) != 12 || counts["__name__=target_info,host_name=h1,instance=i-1,job=svc"] != 1 {
		t.Fatalf("prometheus has %d series, want 12: %v", len(counts), counts)
	}
	for s, c := range counts {
		if c != n && !strings.Contains(s, "target_info") {
			t.Errorf("series %s has %v samples, want %d", s, c, n)
		}
	}
	for _, want := range []string{
		"__name__=room_temperature_celsius,instance=i-1,job=svc,room=r2",
		"__name__=http_requests_total,code=201,instance=i-1,job=svc",
		"__name__=latency_seconds_bucket,instance=i-1,job=svc,le=+Inf",
	} {
		if _, ok := counts[want]; !ok {
			t.Errorf("no series %s in %v", want, counts)
		}
	}
	check := func(q string, want float64) {
		t.Helper()
		r := promQuery(t, addr, q, end)
		if len(r) != 1 {
			t.Fatalf("%s: %d results", q, len(r))
		}
		var f float64
		fmt.Sscan(r[0].Value[1].(string), &f)
		if math.Abs(f-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", q, f, want)
		}
	}
	check(`room_temperature_celsius{room="r2"}`, 2000+n-1+0.5)
	check(`http_requests_total{code="201"}`, 100+n-1)
	check(`latency_seconds_bucket{le="1"}`, n-1+1)
	check(`latency_seconds_bucket{le="+Inf"}`, n-1+3)
	check(`latency_seconds_count`, n-1+3)
	check(`target_info{host_name="h1"}`, 1)
}
