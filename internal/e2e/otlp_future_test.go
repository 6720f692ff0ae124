package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestOTLPFutureDataPointsPartialSuccess: a metrics request into the lake
// whose points are partly further ahead than lake.max_future_skew (one
// host of a gateway's batch with its clock two days ahead) is answered with
// a partial success naming them, and the other points are stored; a
// request with only such points is refused (400). Refusing the whole batch
// lost every other host's points with it.
func TestOTLPFutureDataPointsPartialSuccess(t *testing.T) {
	lakeDir, qaddr := t.TempDir(), freePort(t)
	s := startServer(t, freshConfig(t, lakeDir, qaddr))
	now := time.Now().Add(-time.Minute).Truncate(time.Second)
	post := func(times ...time.Time) (int, []byte) {
		var pts []string
		for i, ts := range times {
			pts = append(pts, fmt.Sprintf(`{"timeUnixNano":"%d","asDouble":%d,"attributes":[{"key":"host","value":{"stringValue":"h%d"}}]}`, ts.UnixNano(), i, i))
		}
		body := `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"skew_g","gauge":{"dataPoints":[` + strings.Join(pts, ",") + `]}}]}]}]}`
		resp, err := http.Post("http://"+s.http+"/v1/metrics", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	code, b := post(now, now.Add(48*time.Hour), now)
	var ans struct {
		PartialSuccess struct {
			RejectedDataPoints json.Number `json:"rejectedDataPoints"`
			ErrorMessage       string      `json:"errorMessage"`
		} `json:"partialSuccess"`
	}
	if err := json.Unmarshal(b, &ans); code != 200 || err != nil {
		t.Fatalf("mixed request: %d %s (%v), want 200 with a partial success", code, b, err)
	}
	if n, _ := ans.PartialSuccess.RejectedDataPoints.Int64(); n != 1 || !strings.Contains(ans.PartialSuccess.ErrorMessage, `data point 1 of metric "skew_g"`) ||
		!strings.Contains(ans.PartialSuccess.ErrorMessage, "lake.max_future_skew") {
		t.Fatalf("partial success %s, want 1 rejected naming data point 1 of skew_g and lake.max_future_skew", b)
	}
	if code, b := post(now.Add(48 * time.Hour)); code != 400 || !strings.Contains(string(b), "lake.max_future_skew") {
		t.Fatalf("only future points: %d %s, want 400 naming lake.max_future_skew", code, b)
	}
	if got := metricValue(t, s.admin, `sluice_pipeline_rejected_records_total{reason="timestamp",signal="metrics",tenant="default"}`); got != 2 {
		t.Errorf("rejected_records_total{reason=timestamp} %v, want 2", got)
	}
	// Stored: h0 and h2, at their own times.
	for start := time.Now(); ; time.Sleep(300 * time.Millisecond) {
		got := promMatrix(t, "http://"+qaddr, `skew_g[5m]`, time.Now())
		var hosts []string
		for _, m := range got {
			hosts = append(hosts, m.Metric["host"])
		}
		if len(hosts) == 2 && hosts[0] == "h0" && hosts[1] == "h2" {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("stored hosts %v, want h0 and h2", hosts)
		}
	}
}
