package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/prompb"
)

// TestAudoutShardThreeSluices: a forward-only sluice shards remote write
// over three downstream sluice runs. Each series lands on exactly one of
// them with all its samples, also across an outage: one downstream is
// killed (kill -9), its breaker opens (state 2 on /metrics), and once it
// is started again on the same address and lake the breaker closes
// (state 0) and the samples held for it arrive.
func TestAudoutShardThreeSluices(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	const n = 3
	var (
		qaddrs, cfgs []string
		downs        []*server
	)
	for range n {
		q := freePort(t)
		cfg := freshConfig(t, t.TempDir(), q)
		qaddrs, cfgs = append(qaddrs, q), append(cfgs, cfg)
		downs = append(downs, startServer(t, cfg))
	}
	var urls []string
	for _, q := range qaddrs {
		urls = append(urls, "http://"+q+"/api/v1/write")
	}
	name := "prometheus_remote_write/shard"
	up := audRelay(t, fmt.Sprintf("  %s: {endpoints: [%s], mode: shard, batch_delay: 20ms, retry_initial_backoff: 10ms, retry_max_backoff: 100ms, breaker_failures: 2, breaker_cooldown: 200ms}",
		name, strings.Join(urls, ", ")), name)
	api, err := remoteapi.NewAPI("http://"+up.prw, remoteapi.WithAPIPath("api/v1/write"))
	if err != nil {
		t.Fatal(err)
	}
	const series = 300
	t0 := time.Now().Add(-10 * time.Minute).Truncate(time.Second).UnixMilli()
	write := func(round int) {
		t.Helper()
		req := &prompb.WriteRequest{}
		for s := range series {
			req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
				Labels:  []prompb.Label{{Name: "__name__", Value: "aud_shard"}, {Name: "job", Value: "audout"}, {Name: "s", Value: fmt.Sprint(s)}},
				Samples: []prompb.Sample{{Value: float64(round), Timestamp: t0 + int64(round)*15000}}})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := api.Write(ctx, remoteapi.WriteV1MessageType, req); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	end := time.UnixMilli(t0 + 60000)
	// where: series -> the downstreams holding it, with its sample count.
	where := func() map[string][]string {
		out := map[string][]string{}
		for i, q := range qaddrs {
			for _, s := range promMatrix(t, "http://"+q, `aud_shard[1h]`, end) {
				out[s.Metric["s"]] = append(out[s.Metric["s"]], fmt.Sprintf("%d:%d", i, len(s.Values)))
			}
		}
		return out
	}
	settled := func(samples int) (map[string][]string, bool) {
		w := where()
		if len(w) != series {
			return w, false
		}
		for _, at := range w {
			if len(at) != 1 || !strings.HasSuffix(at[0], fmt.Sprintf(":%d", samples)) {
				return w, false
			}
		}
		return w, true
	}
	write(0)
	var w map[string][]string
	if !waitFor(60*time.Second, func() (ok bool) { w, ok = settled(1); return ok }) {
		t.Fatalf("after round 0 (series -> downstream:samples): %v", w)
	}
	per := map[string]int{}
	for _, at := range w {
		per[at[0][:1]]++
	}
	if len(per) != n {
		t.Fatalf("the series went to %d of %d endpoints: %v", len(per), n, per)
	}
	first := w

	// Downstream 1 dies; a round for every series; its breaker opens.
	victim := 1
	downs[victim].cmd.Process.Kill()
	downs[victim].wait(t, 30*time.Second)
	write(1)
	state := fmt.Sprintf(`sluice_exporter_breaker_state{endpoint=%q,exporter=%q}`, urls[victim], name)
	if !waitFor(30*time.Second, func() bool { return metricValue(t, up.admin, state) == 2 }) {
		t.Fatalf("the dead endpoint's breaker never opened:\n%s", scrapeMetrics(t, up.admin))
	}
	downs[victim] = startServer(t, cfgs[victim])
	if !waitFor(60*time.Second, func() bool { return metricValue(t, up.admin, state) == 0 }) {
		t.Fatalf("the breaker did not close after the endpoint came back:\n%s", scrapeMetrics(t, up.admin))
	}
	if !waitFor(60*time.Second, func() (ok bool) { w, ok = settled(2); return ok }) {
		t.Fatalf("after the outage (series -> downstream:samples): %v", w)
	}
	var moved []string
	for s, at := range w {
		if at[0][:1] != first[s][0][:1] {
			moved = append(moved, s)
		}
	}
	sort.Strings(moved)
	if len(moved) > 0 {
		t.Fatalf("series changed endpoint across the outage: %v", moved)
	}
	t.Logf("series per endpoint %v; %d on the killed one arrived after its restart", per, per[fmt.Sprint(victim)])
}
