package processor

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// rawPoint is one input point as DuckDB gets it: the group label, the
// whole series, its time (ms) and value.
type rawPoint struct {
	metric, group, series string
	ms                    int64
	v                     float64
}

// duckdbOutputs recomputes per metric, group and interval (1m, stamped at
// its end) the outputs in sql (a SELECT over raw(metric, grp, series, ms,
// v) returning metric, grp, end_ms, output, value) and returns
// "metric|group|end|output" -> value.
func duckdbOutputs(t *testing.T, raw []rawPoint, sql string) map[string]float64 {
	t.Helper()
	py := os.Getenv("SLUICE_PYTHON")
	if py == "" {
		corpustest.Missing(t, "SLUICE_PYTHON (DuckDB recomputation of aggregate outputs)")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "raw.csv")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := csv.NewWriter(f)
	w.Write([]string{"metric", "grp", "series", "ms", "v"})
	for _, p := range raw {
		w.Write([]string{p.metric, p.group, p.series, strconv.FormatInt(p.ms, 10), strconv.FormatFloat(p.v, 'g', -1, 64)})
	}
	w.Flush()
	f.Close()
	script := `import duckdb, sys
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
con.execute("CREATE TABLE raw AS SELECT * FROM read_csv(?, header=true, columns={'metric':'VARCHAR','grp':'VARCHAR','series':'VARCHAR','ms':'BIGINT','v':'DOUBLE'})", [sys.argv[1]])
for r in con.execute(sys.argv[2]).fetchall():
    print("%s|%s|%d|%s\t%r" % tuple(r))
`
	out, err := exec.Command(py, "-c", script, path, sql).CombinedOutput()
	if err != nil {
		t.Fatalf("duckdb: %v\n%s", err, out)
	}
	res := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("duckdb line %q", line)
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("duckdb value %q", line)
		}
		res[k] = x
	}
	return res
}

// sluiceOutputs flushes m after every interval and returns the outputs as
// duckdbOutputs does; the group is the value of label grp.
func sluiceOutputs(t *testing.T, m *Metrics, until time.Time, grp string) map[string]float64 {
	t.Helper()
	res := map[string]float64{}
	_, err := m.Flush(until, func(_ string, b *signal.Metrics) error {
		for i, l := range labelsOf(b) {
			name := l.Get(labels.MetricName)
			metric, rest, _ := strings.Cut(name, ":")
			output := rest[strings.LastIndex(rest, "_by_"+grp+"_")+len("_by_"+grp+"_"):]
			if q := l.Get("quantile"); q != "" {
				output += q
			}
			g := l.Get(grp)
			if g == "" {
				g = "-"
			}
			res[fmt.Sprintf("%s|%s|%d|%s", metric, g, b.Time[i]/1e6, output)] = b.Value(i)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func compareOutputs(t *testing.T, got, want map[string]float64) {
	t.Helper()
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	bad := 0
	for _, k := range keys {
		g, ok := got[k]
		w := want[k]
		if !ok || math.Abs(g-w) > 1e-9*math.Max(1, math.Abs(w)) {
			if bad++; bad <= 10 {
				t.Errorf("%s: sluice %v (present %v), DuckDB %v", k, g, ok, w)
			}
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			if bad++; bad <= 10 {
				t.Errorf("%s: sluice emitted %v, DuckDB has no such output", k, got[k])
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d outputs differ", bad, len(want))
	}
	t.Logf("%d outputs equal DuckDB's", len(want))
}

// TestAggregateEqualsDuckDBOnGeneratedCounters: generated gauges and
// counters with resets, several series per group over five intervals;
// every output equals DuckDB's recomputation from the raw points
// (increase: reset-aware deltas by LAG; total: their running sum; last:
// arg_max; quantiles: quantile_cont).
func TestAggregateEqualsDuckDBOnGeneratedCounters(t *testing.T) {
	r, m := parseWith(t, `
metrics:
  - {name: g, action: aggregate, match: gen_gauge, interval: 1m, flush_delay: 0s, by: [path], outputs: [sum, count, min, max, avg, last, 'quantiles(0.5, 0.9)']}
  - {name: c, action: aggregate, match: gen_counter_total, interval: 1m, flush_delay: 0s, by: [path], outputs: [total, increase, sum, count]}
`)
	var raw []rawPoint
	s := &Scratch{Tenant: "t"}
	counter := map[string]float64{}
	for step := 0; step < 45; step++ { // 5 minutes, a point every ~6.7s
		var gpts, cpts []inPoint
		for h := 0; h < 3; h++ {
			for p := 0; p < 2; p++ {
				host, path := fmt.Sprintf("h%d", h), fmt.Sprintf("/p%d", p)
				at := time.Duration(step)*6666*time.Millisecond + time.Duration(h*2+p)*time.Millisecond // unique per group
				x := mix(uint64(step*10 + h*2 + p))
				gv := float64(x%1000) / 7
				key := host + path
				if x%11 == 0 {
					counter[key] = float64(x % 5) // a reset
				} else {
					counter[key] += float64(x % 17)
				}
				attrs := map[string]string{"host": host, "path": path}
				gpts = append(gpts, inPoint{attrs, at, gv})
				cpts = append(cpts, inPoint{attrs, at, counter[key]})
				ms := t0.Add(at).UnixMilli()
				raw = append(raw, rawPoint{"gen_gauge", path, key, ms, gv}, rawPoint{"gen_counter_total", path, key, ms, counter[key]})
			}
		}
		r.ProcessMetrics(metricBatch(t, "gen_gauge", "gauge", gpts...), s)
		r.ProcessMetrics(metricBatch(t, "gen.counter", "counter", cpts...), s)
	}
	got := sluiceOutputs(t, m, t0.Add(10*time.Minute), "path")
	want := duckdbOutputs(t, raw, `
WITH g AS (SELECT *, (ms // 60000 + 1) * 60000 AS e FROM raw WHERE metric = 'gen_gauge'),
c AS (SELECT *, (ms // 60000 + 1) * 60000 AS e,
        lag(v) OVER (PARTITION BY series ORDER BY ms) AS pv FROM raw WHERE metric = 'gen_counter_total'),
ci AS (SELECT metric, grp, e, v, CASE WHEN pv IS NULL THEN 0 WHEN v >= pv THEN v - pv ELSE v END AS d FROM c),
cg AS (SELECT metric, grp, e, sum(d) AS inc, sum(v) AS s, count(*) AS n FROM ci GROUP BY ALL)
SELECT metric, grp, e, 'sum', sum(v) FROM g GROUP BY ALL
UNION ALL SELECT metric, grp, e, 'count', count(*) FROM g GROUP BY ALL
UNION ALL SELECT metric, grp, e, 'min', min(v) FROM g GROUP BY ALL
UNION ALL SELECT metric, grp, e, 'max', max(v) FROM g GROUP BY ALL
UNION ALL SELECT metric, grp, e, 'avg', avg(v) FROM g GROUP BY ALL
UNION ALL SELECT metric, grp, e, 'last', arg_max(v, ms) FROM g GROUP BY ALL
UNION ALL SELECT metric, grp, e, 'quantiles0.5', quantile_cont(v, 0.5) FROM g GROUP BY ALL
UNION ALL SELECT metric, grp, e, 'quantiles0.9', quantile_cont(v, 0.9) FROM g GROUP BY ALL
UNION ALL SELECT metric, grp, e, 'increase', inc FROM cg
UNION ALL SELECT metric, grp, e, 'total', sum(inc) OVER (PARTITION BY metric, grp ORDER BY e) FROM cg
UNION ALL SELECT metric, grp, e, 'sum', s FROM cg
UNION ALL SELECT metric, grp, e, 'count', n FROM cg`)
	if len(want) != 5*2*8+5*2*4 {
		t.Fatalf("DuckDB gave %d outputs, want %d", len(want), 5*2*8+5*2*4)
	}
	compareOutputs(t, got, want)
}

// TestAggregateEqualsDuckDBOnCorpus: the corpus' gauge and sum points
// aggregated by job per minute; sum, count, min, max and avg equal
// DuckDB's.
func TestAggregateEqualsDuckDBOnCorpus(t *testing.T) {
	r, m := parseWith(t, `
metrics:
  - {name: g, action: aggregate, interval: 1m, flush_delay: 0s, by: [job], outputs: [sum, count, min, max, avg], keep_input: true}
`)
	var raw []rawPoint
	s := &Scratch{Tenant: "t"}
	var last int64
	nonFinite := map[string]bool{} // metrics with NaN or infinite values: not compared
	for _, f := range corpustest.Files(t, "metrics") {
		b := new(signal.Metrics)
		if err := otlp.DecodeMetrics(b, corpustest.Read(t, f)); err != nil {
			t.Fatal(err)
		}
		ls := labelsOf(b)
		for i := range b.Len() {
			if typ := b.Descs[b.Desc[i]].Type; typ != signal.MetricGauge && typ != signal.MetricSum {
				continue // what aggregate takes
			}
			v := b.Value(i)
			name := ls[i].Get(labels.MetricName)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				nonFinite[name] = true
				continue
			}
			job := ls[i].Get("job")
			if job == "" {
				job = "-"
			}
			raw = append(raw, rawPoint{name, job, ls[i].String(), b.Time[i] / 1e6, v})
			last = max(last, b.Time[i])
		}
		r.ProcessMetrics(b, s)
	}
	if len(raw) < 1000 {
		t.Fatalf("only %d corpus gauge and sum points", len(raw))
	}
	got := sluiceOutputs(t, m, time.Unix(0, last).Add(2*time.Minute), "job")
	kept := raw[:0]
	for _, p := range raw {
		if !nonFinite[p.metric] {
			kept = append(kept, p)
		}
	}
	raw = kept
	for k := range got {
		if metric, _, _ := strings.Cut(k, "|"); nonFinite[metric] {
			delete(got, k)
		}
	}
	want := duckdbOutputs(t, raw, `
WITH g AS (SELECT *, (ms // 60000 + 1) * 60000 AS e FROM raw)
SELECT metric, grp, e, 'sum', sum(v) FROM g GROUP BY ALL
UNION ALL SELECT metric, grp, e, 'count', count(*) FROM g GROUP BY ALL
UNION ALL SELECT metric, grp, e, 'min', min(v) FROM g GROUP BY ALL
UNION ALL SELECT metric, grp, e, 'max', max(v) FROM g GROUP BY ALL
UNION ALL SELECT metric, grp, e, 'avg', avg(v) FROM g GROUP BY ALL`)
	compareOutputs(t, got, want)
}

// TestAggregateHistogramEqualsDuckDB: generated cumulative histograms
// (bounds 0.1, 1, 10; 3 paths × 15 hosts, a point every 7 s over four
// intervals, arriving in batches of 50 points); the output histogram's
// bucket counts, count and sum per path and interval equal DuckDB's sum
// over the path's series of each series' last point of the interval
// (arg_max by time).
func TestAggregateHistogramEqualsDuckDB(t *testing.T) {
	r, m := parseWith(t, `
metrics:
  - {name: h, action: aggregate, match: gen_lat, interval: 1m, flush_delay: 0s, by: [path], outputs: [histogram]}
`)
	type series struct {
		path, host string
		counts     [4]uint64
		sum        float64
	}
	var ss []*series
	for p := range 3 {
		for h := range 15 {
			ss = append(ss, &series{path: fmt.Sprintf("/p%d", p), host: fmt.Sprintf("h%02d", h)})
		}
	}
	var raw []rawPoint
	var pts []string
	rng := uint64(42)
	next := func() uint64 { rng = mix(rng + 1); return rng }
	s := &Scratch{Tenant: "t1"}
	send := func() {
		if len(pts) == 0 {
			return
		}
		js := `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"gen_lat","histogram":{"aggregationTemporality":2,"dataPoints":[` +
			strings.Join(pts, ",") + `]}}]}]}]}`
		var b signal.Metrics
		if err := otlp.DecodeMetricsJSON(&b, []byte(js)); err != nil {
			t.Fatal(err)
		}
		b.ComputeSeriesIDs()
		if _, kept := r.ProcessMetrics(&b, s); kept != 0 {
			t.Fatalf("%d histogram points not taken", kept)
		}
		pts = pts[:0]
	}
	for at := time.Duration(0); at < 4*time.Minute; at += 7 * time.Second {
		for i, se := range ss {
			ms := t0.Add(at+time.Duration(i)*10*time.Millisecond).UnixNano() / 1e6
			var count uint64
			for k := range se.counts {
				se.counts[k] += next() % 5
				count += se.counts[k]
			}
			se.sum += float64(next()%1000) / 8
			id := se.path + "," + se.host
			for k, c := range se.counts {
				raw = append(raw, rawPoint{metric: fmt.Sprintf("b%d", k), group: se.path, series: id, ms: ms, v: float64(c)})
			}
			raw = append(raw, rawPoint{metric: "count", group: se.path, series: id, ms: ms, v: float64(count)},
				rawPoint{metric: "sum", group: se.path, series: id, ms: ms, v: se.sum})
			pts = append(pts, fmt.Sprintf(`{"timeUnixNano":"%d","count":"%d","sum":%v,"bucketCounts":["%d","%d","%d","%d"],"explicitBounds":[0.1,1,10],"attributes":[{"key":"host","value":{"stringValue":%q}},{"key":"path","value":{"stringValue":%q}}]}`,
				ms*1e6, count, se.sum, se.counts[0], se.counts[1], se.counts[2], se.counts[3], se.host, se.path))
			if len(pts) == 50 {
				send()
			}
		}
	}
	send()
	want := duckdbOutputs(t, raw, `WITH last AS (
  SELECT metric, grp, series, (ms // 60000) * 60000 + 60000 AS end_ms, arg_max(v, ms) AS v FROM raw GROUP BY ALL)
SELECT metric, grp, end_ms, 'histogram', sum(v) FROM last GROUP BY metric, grp, end_ms`)
	got := map[string]float64{}
	if _, err := m.Flush(t0.Add(5*time.Minute), func(_ string, b *signal.Metrics) error {
		for i, l := range labelsOf(b) {
			key := func(component string) string {
				return fmt.Sprintf("%s|%s|%d|histogram", component, l.Get("path"), b.Time[i]/1e6)
			}
			for k, c := range b.U64[b.BucketCounts[i].Start:b.BucketCounts[i].End] {
				got[key(fmt.Sprintf("b%d", k))] = float64(c)
			}
			got[key("count")] = float64(b.Count[i])
			got[key("sum")] = b.Sum[i]
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(want) != 3*4*6 {
		t.Fatalf("DuckDB gave %d outputs, want 3 paths × 4 intervals × 6 components", len(want))
	}
	compareOutputs(t, got, want)
}
