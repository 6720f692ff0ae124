package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/prompb"
)

// TestFwdDeadEndpointOthersFlow: a forward-only sluice with three remote
// write endpoints (sluice runs), sharded or replicated. One is killed
// (kill -9); while it is down, every round written reaches the others
// (sharded: their series; replicated: everything), its breaker opens and
// its lag grows; once it is started again its share arrives with every
// sample. Before each endpoint had its cursor, a dead endpoint held back
// every other endpoint of its exporter after the batch in flight.
func TestFwdDeadEndpointOthersFlow(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for _, mode := range []string{"shard", "replicate"} {
		t.Run(mode, func(t *testing.T) { fwdDeadEndpoint(t, mode) })
	}
}

func fwdDeadEndpoint(t *testing.T, mode string) {
	const n, series, rounds = 3, 90, 4
	var (
		qaddrs, cfgs, urls []string
		downs              []*server
	)
	for range n {
		q := freePort(t)
		cfg := freshConfig(t, t.TempDir(), q)
		qaddrs, cfgs = append(qaddrs, q), append(cfgs, cfg)
		downs = append(downs, startServer(t, cfg))
		urls = append(urls, "http://"+q+"/api/v1/write")
	}
	name := "prometheus_remote_write/" + mode
	up := audRelay(t, fmt.Sprintf("  %s: {endpoints: [%s], mode: %s, batch_delay: 20ms, retry_initial_backoff: 10ms, retry_max_backoff: 100ms, breaker_failures: 2, breaker_cooldown: 200ms}",
		name, strings.Join(urls, ", "), mode), name)
	api, err := remoteapi.NewAPI("http://"+up.prw, remoteapi.WithAPIPath("api/v1/write"))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(-10 * time.Minute).Truncate(time.Second).UnixMilli()
	write := func(round int) {
		t.Helper()
		req := &prompb.WriteRequest{}
		for s := range series {
			req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
				Labels:  []prompb.Label{{Name: "__name__", Value: "fwd_dead"}, {Name: "job", Value: "fwd"}, {Name: "s", Value: fmt.Sprint(s)}},
				Samples: []prompb.Sample{{Value: float64(round), Timestamp: t0 + int64(round)*15000}}})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := api.Write(ctx, remoteapi.WriteV1MessageType, req); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	end := time.UnixMilli(t0 + int64(rounds+1)*15000)
	// samples: per downstream, series -> samples it holds.
	samples := func(i int) map[string]int {
		out := map[string]int{}
		for _, s := range promMatrix(t, "http://"+qaddrs[i], `fwd_dead[1h]`, end) {
			out[s.Metric["s"]] = len(s.Values)
		}
		return out
	}
	write(0)
	want := make([]int, n) // series per downstream
	if !waitFor(60*time.Second, func() bool {
		total := 0
		for i := range n {
			m := samples(i)
			want[i] = len(m)
			total += len(m)
		}
		if mode == "shard" {
			return total == series
		}
		return total == n*series
	}) {
		t.Fatalf("round 0 did not arrive: series per downstream %v", want)
	}
	victim := 1
	if want[victim] == 0 {
		t.Fatalf("no series on the victim: %v", want)
	}
	downs[victim].cmd.Process.Kill()
	downs[victim].wait(t, 30*time.Second)
	for r := 1; r < rounds; r++ {
		write(r)
		time.Sleep(100 * time.Millisecond) // separate batches
	}
	// Every round reaches the live endpoints while the victim is down.
	for i := range n {
		if i == victim {
			continue
		}
		var got map[string]int
		if !waitFor(60*time.Second, func() bool {
			got = samples(i)
			if len(got) != want[i] {
				return false
			}
			for _, c := range got {
				if c != rounds {
					return false
				}
			}
			return true
		}) {
			t.Fatalf("downstream %d got %v of its %d series while %d was down; want %d samples each (held back by the dead endpoint)\n%s",
				i, got, want[i], victim, rounds, scrapeMetrics(t, up.admin))
		}
	}
	state := fmt.Sprintf(`sluice_exporter_breaker_state{endpoint=%q,exporter=%q}`, urls[victim], name)
	if !waitFor(30*time.Second, func() bool { return metricValue(t, up.admin, state) == 2 }) {
		t.Fatalf("the dead endpoint's breaker never opened:\n%s", scrapeMetrics(t, up.admin))
	}
	if lag := metricValue(t, up.admin, fmt.Sprintf(`sluice_exporter_queue_lag_bytes{exporter=%q}`, name)); lag <= 0 {
		t.Errorf("exporter lag %v while an endpoint is down, want > 0", lag)
	}
	downs[victim] = startServer(t, cfgs[victim])
	var got map[string]int
	if !waitFor(60*time.Second, func() bool {
		got = samples(victim)
		if len(got) != want[victim] {
			return false
		}
		for _, c := range got {
			if c != rounds {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("after its restart downstream %d holds %v, want its %d series with %d samples each", victim, got, want[victim], rounds)
	}
	if !waitFor(30*time.Second, func() bool { return metricValue(t, up.admin, state) == 0 }) {
		t.Fatalf("the breaker did not close:\n%s", scrapeMetrics(t, up.admin))
	}
	t.Logf("%s: series per downstream %v", mode, want)
}
