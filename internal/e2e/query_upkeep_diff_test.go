package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
)

// TestDiffAfterCompactAndRollup: the differential data of
// TestDiffAPIAgainstPrometheus goes to Debian's Prometheus 2.42 and to
// `sluice run` in many small checkpoints (several raw segments per hour);
// then `sluice compact` merges them and `sluice rollup` writes the 1m, 5m
// and 1h tiers, and `sluice query-server` answers over the upkept lake,
// with rollups on and off. Range queries on the tiers' grids (where a
// selector may read rollups: rate, increase, the *_over_time functions
// the rollups hold, instant selectors, histogram_quantile over bucket
// rates) and off them must answer as Prometheus does, and as sluice did
// over the raw segments before upkeep. docs/query.md, "Rollups never
// change an answer".
func TestDiffAfterCompactAndRollup(t *testing.T) {
	pbase, pstderr := startPrometheus(t, freePort(t), "global: {}\n", "--web.enable-remote-write-receiver")
	lakeDir := t.TempDir()
	qaddr := freePort(t)
	cfg := freshConfig(t, lakeDir, qaddr)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A checkpoint a second: each request below lands in its own segment.
	b = regexp.MustCompile(`(?m)^lake:\n`).ReplaceAll(b, []byte("lake:\n  flush_interval: 1s\n"))
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, cfg)
	sbase := "http://" + qaddr

	// 150 minutes of data ending 10 minutes ago: three or four hours.
	t0 := time.Now().Add(-160 * time.Minute).Truncate(time.Minute)
	d := genDiffData(t0, 600)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, base := range []string{pbase, sbase} {
		api, err := remoteapi.NewAPI(base, remoteapi.WithAPIPath("api/v1/write"))
		if err != nil {
			t.Fatal(err)
		}
		reqs := d.requests()
		// Half the requests (the older ones) in halves of their own, so
		// that the hours hold several segments each.
		for i, req := range reqs {
			parts := []int{len(req.Timeseries)}
			if base == sbase && i%2 == 0 {
				parts = []int{len(req.Timeseries) / 2, len(req.Timeseries)}
			}
			from := 0
			for _, to := range parts {
				part := *req
				part.Timeseries = req.Timeseries[from:to]
				from = to
				if _, err := api.Write(ctx, remoteapi.WriteV1MessageType, &part); err != nil {
					t.Fatalf("write to %s: %v\n%s", base, err, pstderr)
				}
				if base == sbase {
					time.Sleep(1100 * time.Millisecond)
				}
			}
		}
	}

	// Minutes after t0 as Unix seconds; the hour after t0 starts at h.
	at := func(m float64) string {
		return strconv.FormatFloat(float64(t0.UnixMilli())/1000+m*60, 'f', -1, 64)
	}
	h := float64(t0.Truncate(time.Hour).Add(time.Hour).Sub(t0)) / float64(time.Minute)
	var calls []diffCall
	rangeQuery := func(q string, from, to float64, step string) {
		calls = append(calls, diffCall{"/api/v1/query_range", url.Values{"query": {q}, "start": {at(from)}, "end": {at(to)}, "step": {step}}, true})
	}
	for _, c := range []struct {
		q    string
		step string
	}{
		{`rate(diffapi_http_requests_total[5m])`, "5m"},
		{`rate(diffapi_http_requests_total[1m])`, "1m"},
		{`increase(diffapi_http_requests_total{method="PUT"}[1h])`, "1h"},
		{`sum by (code) (rate(diffapi_http_requests_total[5m]))`, "5m"},
		{`sum by (code) (increase(diffapi_http_requests_total[10m]))`, "10m"},
		{`histogram_quantile(0.9, sum by (le) (rate(diffapi_request_duration_seconds_bucket[5m])))`, "5m"},
		{`rate(diffapi_request_duration_seconds_sum[5m]) / rate(diffapi_request_duration_seconds_count[5m])`, "5m"},
		{`max_over_time(diffapi_temperature_celsius[5m])`, "5m"},
		{`min_over_time(diffapi_temperature_celsius[1h])`, "1h"},
		{`avg_over_time(diffapi_queue_depth[5m])`, "5m"},
		{`sum_over_time(diffapi_queue_depth[1m])`, "1m"},
		{`last_over_time(diffapi_queue_depth[5m])`, "5m"},
		{`present_over_time(diffapi_http_requests_total{code="500"}[5m])`, "5m"},
		{`absent_over_time(diffapi_temperature_celsius{room="r03"}[5m])`, "5m"},
		{`diffapi_queue_depth`, "5m"},
		{`diffapi_temperature_celsius`, "1h"},
		{`max_over_time(diffapi_temperature_celsius[5m] offset 10m)`, "5m"},
		{`topk(3, max_over_time(diffapi_queue_depth[5m]))`, "5m"},
		// What rollups cannot answer: raw points, after compaction.
		{`count_over_time(diffapi_queue_depth[5m])`, "5m"},
		{`irate(diffapi_http_requests_total{code="404"}[5m])`, "5m"},
		{`resets(diffapi_http_requests_total[1h])`, "1h"},
		{`quantile_over_time(0.5, diffapi_temperature_celsius[1h])`, "1h"},
	} {
		rangeQuery(c.q, h-60, h+60+30, c.step)         // on the tiers' grid
		rangeQuery(c.q, h-60+17.0/60, h+60+30, c.step) // off it, 17 s later
	}
	calls = append(calls,
		diffCall{"/api/v1/query", url.Values{"query": {`sum(rate(diffapi_http_requests_total[5m]))`}, "time": {at(h + 30)}}, false},
		diffCall{"/api/v1/query", url.Values{"query": {`max_over_time(diffapi_temperature_celsius[1h])`}, "time": {at(h + 60)}}, true},
		diffCall{"/api/v1/series", url.Values{"match[]": {`{__name__=~"diffapi_.+"}`}}, false},
		diffCall{"/api/v1/labels", nil, false},
		diffCall{"/api/v1/label/__name__/values", nil, false},
	)

	// Before upkeep: sluice run over its raw segments.
	before := map[int]diffAnswer{}
	for i, c := range calls {
		before[i] = diffDo(t, sbase, c)
	}
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, _ := srv.wait(t, time.Minute); code != 0 {
		t.Fatalf("sluice run exit %d:\n%s", code, srv.stderr)
	}
	r := run(t, "compact", "--lake", lakeDir, "--grace", "0")
	if r.code != 0 || !regexp.MustCompile(`compacted [1-9]\d* partitions`).MatchString(r.stdout) {
		t.Fatalf("compact: exit %d, want partitions compacted:\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = run(t, "rollup", "--lake", lakeDir, "--tiers", "1m,5m,1h")
	if r.code != 0 || !regexp.MustCompile(`rolled up [1-9]\d* hours`).MatchString(r.stdout) {
		t.Fatalf("rollup: exit %d, want hours rolled up:\n%s%s", r.code, r.stdout, r.stderr)
	}
	off := filepath.Join(t.TempDir(), "rollups-off.yaml")
	if err := os.WriteFile(off, []byte(fmt.Sprintf("lake:\n  root: %s\nquery:\n  rollups: false\n", lakeDir)), 0o644); err != nil {
		t.Fatal(err)
	}
	servers := map[string]string{
		"rollups on":  "http://" + startQueryServer(t, "--lake", lakeDir),
		"rollups off": "http://" + startQueryServer(t, "--config", off),
	}

	diffs := 0
	for i, c := range calls {
		pa := diffDo(t, pbase, c)
		ph, pd := diffNormalise(t, c, pa)
		answers := map[string]diffAnswer{"sluice run before upkeep": before[i]}
		for name, base := range servers {
			answers[name] = diffDo(t, base, c)
		}
		for name, a := range answers {
			sh, sd := diffNormalise(t, c, a)
			switch {
			case ph != sh:
				diffs++
				t.Errorf("%s, %s:\nprometheus %s %.300s\nsluice     %s %.300s", c, name, ph, pa.body, sh, a.body)
			case !diffSameValues(pd, sd):
				diffs++
				t.Errorf("%s, %s: %s\n%s", c, name, ph, diffFirst(pd, sd))
			}
		}
	}
	t.Logf("%d calls against 3 sluice servers, %d differ", len(calls), diffs)
}
