package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

// TestGovLimitRefusalAnswers: what a sender hears when a limit or a
// require rule of a real `sluice run` refuses its series. An OTLP sender
// gets 200 with a partial success naming the refused points and the rule
// (as the OTLP specification asks of a server that takes part of a
// request, so the Collector logs it and does not retry); the admitted
// series are stored; a request within the limits gets a plain success. A
// remote-write sender gets 204, as Prometheus's protocol has no partial
// success and a 4xx would make it drop the whole batch; the counters say
// what was refused.
func TestGovLimitRefusalAnswers(t *testing.T) {
	lakeDir, qaddr := t.TempDir(), freePort(t)
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte(`
metrics:
  - {name: cap, action: limit, match: gov_lim, per: metric, max_series: 2}
  - {name: need-team, action: require, match: gov_req, labels: [team]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgPath := freshConfig(t, lakeDir, qaddr)
	cfg, _ := os.ReadFile(cfgPath)
	cfg = append(cfg, fmt.Sprintf("processors:\n  rules_file: %s\n", rules)...)
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, cfgPath)
	now := time.Now().Add(-time.Minute).Truncate(time.Second)

	export := func(pts ...[3]string) (int, string) { t.Helper(); return govExport(t, s.http, now, pts...) }

	if n, msg := export([3]string{"gov_lim", "a", "x"}, [3]string{"gov_lim", "b", "x"}, [3]string{"gov_lim", "c", "x"},
		[3]string{"gov_lim", "d", "x"}, [3]string{"gov_req", "a", ""}); n != 3 || !strings.Contains(msg, `"cap"`) {
		t.Fatalf("partial success: %d rejected, %q; want 3 (two over the limit, one without team) naming rule cap", n, msg)
	}
	// The admitted series keep flowing; a new one is refused.
	if n, _ := export([3]string{"gov_lim", "a", "x"}, [3]string{"gov_lim", "b", "x"}, [3]string{"gov_lim", "e", "x"}); n != 1 {
		t.Fatalf("second request: %d rejected, want 1", n)
	}
	if n, msg := export([3]string{"gov_lim", "b", "x"}, [3]string{"gov_req", "b", "y"}); n != 0 || msg != "" {
		t.Fatalf("a request within the limits: partial success %d %q", n, msg)
	}

	// Remote write: a new series over the limit, one admitted.
	wr := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: []prompb.Label{{Name: "__name__", Value: "gov_lim"}, {Name: "pod", Value: "f"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: now.UnixMilli()}}},
	}}
	pb, err := wr.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if code, body, _ := postRW(t, "http://"+qaddr, "application/x-protobuf", pb); code != 204 {
		t.Fatalf("remote write over the limit: %d %s, want 204", code, body)
	}
	if got := metricValue(t, s.admin, `sluice_processor_limit_exceeded_total{rule="cap"}`); got != 4 {
		t.Errorf("limit_exceeded_total %v, want 4 (c, d, e, f)", got)
	}
	if got := metricValue(t, s.admin, `sluice_processor_rule_dropped_total{rule="need-team"}`); got != 1 {
		t.Errorf("need-team dropped %v, want 1", got)
	}
	// Remote write 2.0: the written counts leave the refused sample out
	// (a series with the required label, one without it).
	st := writev2.NewSymbolTable()
	v2 := &writev2.Request{Timeseries: []writev2.TimeSeries{
		{LabelsRefs: st.SymbolizeLabels(labels.FromStrings("__name__", "gov_req", "pod", "a", "team", "x"), nil), Samples: []writev2.Sample{{Value: 2, Timestamp: now.UnixMilli()}}},
		{LabelsRefs: st.SymbolizeLabels(labels.FromStrings("__name__", "gov_req", "pod", "g"), nil), Samples: []writev2.Sample{{Value: 3, Timestamp: now.UnixMilli()}}},
	}}
	v2.Symbols = st.Symbols()
	if pb, err = v2.Marshal(); err != nil {
		t.Fatal(err)
	}
	code, body, hdr := postRW(t, "http://"+qaddr, "application/x-protobuf;proto=io.prometheus.write.v2.Request", pb,
		"X-Prometheus-Remote-Write-Version", "2.0.0")
	if code != 204 || hdr.Get("X-Prometheus-Remote-Write-Samples-Written") != "1" {
		t.Fatalf("remote write 2.0, one of two series without the required label: %d %s, Samples-Written %q; want 204 and 1",
			code, body, hdr.Get("X-Prometheus-Remote-Write-Samples-Written"))
	}

	// Stored: a and b only.
	base := "http://" + qaddr
	for start := time.Now(); ; time.Sleep(300 * time.Millisecond) {
		got := promMatrix(t, base, `gov_lim[5m]`, time.Now())
		var pods []string
		for _, m := range got {
			pods = append(pods, m.Metric["pod"])
		}
		if len(pods) == 2 && (pods[0] == "a" && pods[1] == "b" || pods[0] == "b" && pods[1] == "a") {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("stored pods %v, want a and b", pods)
		}
	}
}

// govExport posts to an OTLP/HTTP receiver at addr one gauge point at now
// per (name, pod, team; no team label when empty) and returns the partial
// success (zero when the answer has none).
func govExport(t *testing.T, addr string, now time.Time, pts ...[3]string) (rejected int, msg string) {
	t.Helper()
	byName := map[string][]string{}
	var names []string
	for i, p := range pts {
		attrs := fmt.Sprintf(`{"key":"pod","value":{"stringValue":%q}}`, p[1])
		if p[2] != "" {
			attrs += fmt.Sprintf(`,{"key":"team","value":{"stringValue":%q}}`, p[2])
		}
		if byName[p[0]] == nil {
			names = append(names, p[0])
		}
		byName[p[0]] = append(byName[p[0]], fmt.Sprintf(`{"timeUnixNano":"%d","asDouble":%d,"attributes":[%s]}`, now.UnixNano(), i, attrs))
	}
	var ms []string
	for _, n := range names {
		ms = append(ms, fmt.Sprintf(`{"name":%q,"gauge":{"dataPoints":[%s]}}`, n, strings.Join(byName[n], ",")))
	}
	body := `{"resourceMetrics":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"gov"}}]},"scopeMetrics":[{"metrics":[` +
		strings.Join(ms, ",") + `]}]}]}`
	resp, err := http.Post("http://"+addr+"/v1/metrics", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("export: %d %s", resp.StatusCode, b)
	}
	var ans struct {
		PartialSuccess struct {
			RejectedDataPoints json.Number `json:"rejectedDataPoints"`
			ErrorMessage       string      `json:"errorMessage"`
		} `json:"partialSuccess"`
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	n, _ := ans.PartialSuccess.RejectedDataPoints.Int64()
	return int(n), ans.PartialSuccess.ErrorMessage
}
