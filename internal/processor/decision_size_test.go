package processor

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// heapAfterGC is the live heap, measured after two collections.
func heapAfterGC() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestDecisionBytesMatchHeap: decision.bytes, which bounds the cache
// (maxDecisionBytes), is within 10% of the heap the unshared decisions of
// each kind hold, measured as the heap freed when the cache lets them go.
// An overcount makes the cache start over early (recomputation), an
// undercount lets it hold more memory than the bound says.
func TestDecisionBytesMatchHeap(t *testing.T) {
	for _, c := range []struct{ name, rules string }{
		{"relabel", `
metrics:
  - name: tidy
    action: relabel
    relabel:
      - {action: replace, target_label: env, replacement: prod}
      - {action: labeldrop, regex: pod}
`},
		{"downsample", `
metrics:
  - {name: down, action: downsample, interval: 1m, flush_delay: 0s, outputs: [avg]}
`},
		{"per-label limit", `
metrics:
  - {name: users, action: limit, per: label, label: user_id, max_values: 1000000}
`},
		{"every kind", `
metrics:
  - {name: users, action: limit, per: label, label: user_id, max_values: 1000000}
  - {name: cap, action: limit, per: metric, max_series: 1000000}
  - {name: need, action: require, labels: [user_id]}
  - name: tidy
    action: relabel
    relabel:
      - {action: replace, target_label: env, replacement: prod}
  - {name: down, action: downsample, interval: 1m, flush_delay: 0s, outputs: [avg, max]}
`},
		{"hostile benchmark's", `
metrics:
  - {name: drop, action: drop, match: '{user_id="u-1"}'}
  - {name: keep, action: keep, match: '{__name__=~"http_.*"}'}
  - {name: rl, action: relabel, relabel: [{action: replace, source_labels: [user_id], regex: 'user-(.)(.*)', target_label: shard, replacement: '$1'}]}
  - {name: require, action: require, labels: [user_id]}
  - {name: cap, action: limit, per: metric, max_series: 100000, window: 1h}
  - {name: strip, action: limit, per: label, label: user_id, max_values: 1000, window: 1h, exceed_action: strip_label}
  - {name: sample, action: sample, one_in: 2}
  - {name: agg, action: aggregate, interval: 1m, flush_delay: 0s, by: [shard], outputs: [sum, total, 'quantiles(0.5)', histogram_bucket], keep_input: true}
  - {name: down, action: downsample, interval: 1m, flush_delay: 0s, outputs: [avg]}
`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _ := parseWith(t, c.rules)
			s := &Scratch{Tenant: "t", Now: t0}
			const series = 40000
			for first := 0; first < series; first += 1000 {
				var pts []string
				for i := first; i < first+1000; i++ {
					pts = append(pts, fmt.Sprintf(`{"timeUnixNano":"%d","asDouble":1,"attributes":[`+
						`{"key":"user_id","value":{"stringValue":"user-%07d"}},{"key":"pod","value":{"stringValue":"checkout-7d9f8c-%05d"}},`+
						`{"key":"http_route","value":{"stringValue":"/api/v1/orders"}}]}`, t0.UnixNano(), i, i%50000))
				}
				var b signal.Metrics
				if err := otlp.DecodeMetricsJSON(&b, []byte(`{"resourceMetrics":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"checkout"}}]},`+
					`"scopeMetrics":[{"metrics":[{"name":"http_server_request_count","gauge":{"dataPoints":[`+strings.Join(pts, ",")+`]}}]}]}]}`)); err != nil {
					t.Fatal(err)
				}
				r.ProcessMetrics(&b, s)
			}
			flushedAt(t, r, time.Minute) // the downsample's open groups let go of their targets
			seen := map[*decision]bool{}
			var est int64
			for i := range r.cache.shards {
				for _, e := range r.cache.shards[i].slots {
					if e.d != nil && !seen[e.d] {
						seen[e.d] = true
						est += e.d.bytes()
					}
				}
			}
			if len(seen) < series/2 {
				t.Fatalf("%d decisions cached of %d series: the cache started over", len(seen), series)
			}
			clear(seen)
			before := heapAfterGC()
			r.cache.clearShards()
			r.cache.internMu.Lock()
			clear(r.cache.interned)
			r.cache.internMu.Unlock()
			held := before - heapAfterGC()
			ratio := float64(est) / float64(held)
			t.Logf("%s: %d decisions, estimated %d bytes, heap freed %d bytes (%.0f and %.0f per decision), estimate/heap %.2f",
				c.name, series, est, held, float64(est)/series, float64(held)/series, ratio)
			if ratio < 0.9 || ratio > 1.1 {
				t.Errorf("decision.bytes is %.2f times the heap the decisions hold", ratio)
			}
			runtime.KeepAlive(r)
		})
	}
}
