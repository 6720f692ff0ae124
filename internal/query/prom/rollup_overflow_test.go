package prom

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/rollup"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// TestRollupOverflowLabels: an hour whose raw files together carry more
// distinct attribute keys than lake.max_attribute_columns rolls up into
// files with at most that many attribute columns (issue 11: the union of
// the raw files' columns could pass parquet-go's column limit), and every
// series keeps all its labels: the ones past the cap go to the overflow
// columns, merged with the overflow the raw files already had.
func TestRollupOverflowLabels(t *testing.T) {
	const rawCap, rollupCap, files, perFile = 5, 3, 3, 3
	l := newTestLake(t)
	start := synthStart.Add(7500 * time.Millisecond)
	var resKeys []string
	for f := range files {
		var res []string
		for r := range 2 { // two resources per file, each with its own key
			key := fmt.Sprintf("res_%d_%d", f, r)
			resKeys = append(resKeys, key)
			var pts []string
			for s := range perFile / 2 * (r + 1) { // series with their own point keys
				id := fmt.Sprintf("%d_%d_%d", f, r, s)
				for p := range 240 {
					pts = append(pts, fmt.Sprintf(`{"timeUnixNano":"%d","asDouble":%d,"attributes":[
						{"key":"host","value":{"stringValue":"h%s"}},
						{"key":"k_%s","value":{"stringValue":"v%s"}},
						{"key":"n_%s","value":{"intValue":"%d"}},
						{"key":"d_%s","value":{"doubleValue":%d.5}},
						{"key":"b_%s","value":{"boolValue":true}}]}`,
						start.Add(time.Duration(p)*15*time.Second).UnixNano(), p%17, id, id, id, id, f, id, s, id))
				}
			}
			res = append(res, fmt.Sprintf(`{"resource":{"attributes":[
				{"key":"service.name","value":{"stringValue":"svc"}},{"key":"%s","value":{"stringValue":"x"}}]},
				"scopeMetrics":[{"metrics":[{"name":"temp","gauge":{"dataPoints":[%s]}}]}]}`, key, strings.Join(pts, ",")))
		}
		var m signal.Metrics
		if err := otlp.DecodeMetricsJSON(&m, []byte(`{"resourceMetrics":[`+strings.Join(res, ",")+`]}`)); err != nil {
			t.Fatal(err)
		}
		w, err := lake.NewWriter(lake.Options{Root: l.Root, Store: l.Store, MaxAttributeColumns: rawCap, MaxFutureSkew: 100 * 365 * 24 * time.Hour},
			func(seg lake.Segment) error { return l.Catalog.AddSegments(context.Background(), seg.CatalogRow()) })
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteMetrics("acme", &m); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}

	opts := rollup.Options{Tiers: []time.Duration{time.Minute, 5 * time.Minute, time.Hour}, Store: l.Store,
		MaxAttributeColumns: rollupCap}
	jobs, err := rollup.Plan(context.Background(), l.Catalog, opts)
	if err != nil || len(jobs) != 1 || len(jobs[0].Raw) != files {
		t.Fatalf("plan: %+v %v", jobs, err)
	}
	if _, err := rollup.Run(context.Background(), l.Catalog, l.Store, jobs[0], opts); err != nil {
		t.Fatal(err)
	}

	// Each rollup file: at most the cap of attribute columns, the rest in
	// the overflow columns, resource keys included.
	segs, err := l.Catalog.List(context.Background(), catalog.Filter{Table: rollup.Table})
	if err != nil || len(segs) != 3 {
		t.Fatalf("rollup segments %v %v", segs, err)
	}
	for _, s := range segs {
		r, err := l.Store.Open(s.Path)
		if err != nil {
			t.Fatal(err)
		}
		pf, err := parquet.OpenFile(r, r.Size())
		if err != nil {
			t.Fatal(err)
		}
		var attrCols int
		seen := map[string]bool{}
		for _, c := range pf.Schema().Columns() {
			if lake.IsAttributeColumn(c[0]) {
				attrCols++
				seen[c[0]] = true
			}
		}
		if attrCols != rollupCap {
			t.Errorf("%s: %d attribute columns, want the cap %d (columns %v)", s.Path, attrCols, rollupCap, pf.Schema().Columns())
		}
		leaf, ok := pf.Schema().Lookup(lake.OverflowColumn("resource"))
		if !ok {
			t.Fatalf("%s: no resource_overflow column", s.Path)
		}
		var ovf strings.Builder
		for _, rg := range pf.RowGroups() {
			pages := rg.ColumnChunks()[leaf.ColumnIndex].Pages()
			for {
				p, err := pages.ReadPage()
				if err != nil {
					break
				}
				vals := make([]parquet.Value, p.NumValues())
				n, _ := p.Values().ReadValues(vals)
				for _, v := range vals[:n] {
					ovf.Write(v.ByteArray())
				}
			}
			pages.Close()
		}
		for _, k := range resKeys {
			if !seen["resource."+k] && !strings.Contains(ovf.String(), `"`+k+`":{"stringValue":"x"}`) {
				t.Errorf("%s: resource attribute %s is in neither a column nor resource_overflow", s.Path, k)
			}
		}
		r.Close()
	}

	// PromQL: the same series, with all their labels, from the rollups as
	// from the raw points.
	on, err := NewAdapter(Options{Catalog: l.Catalog, Store: l.Store, Rollups: true})
	if err != nil {
		t.Fatal(err)
	}
	qOn, qOff := on.Queryable("acme", Limits{}), adapterOf(t, l).Queryable("acme", Limits{})
	from, to := synthStart.Add(5*time.Minute), synthStart.Add(50*time.Minute)
	want, err := runRange(qOff, `temp`, from, to, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got, err := runRange(qOn, `temp`, from, to, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if on.Stats.RollupSelects.Load() == 0 {
		t.Fatal("the query did not read the rollups")
	}
	if n := files * 3; len(want) != n { // 1 + 2 series per file
		t.Fatalf("%d raw series, want %d", len(want), n)
	}
	for _, s := range want {
		if s.Metric.Len() != 8 { // __name__, job, service_name, host, k_, n_, d_, b_
			t.Fatalf("raw series %s: want 8 labels", s.Metric)
		}
	}
	compareMatrices(t, "temp", want, got, 0)
}
