package sqlq

import (
	"context"
	"testing"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/rollup"
)

// TestRollupView rolls up the metrics corpus with internal/lake/rollup and
// checks the metrics_rollup view: every rollup row is there, and the empty
// view of a tenant without rollups has the types DuckDB reads from files.
func TestRollupView(t *testing.T) {
	ctx := context.Background()
	l := newTestLake(t)
	l.ingest(t, "default", corpustest.Files(t, "metrics")[:2]...)
	store := lake.NewLocalStore(l.root)
	opts := rollup.Options{Store: store}
	jobs, err := rollup.Plan(ctx, l.cat, opts)
	if err != nil || len(jobs) == 0 {
		t.Fatalf("plan: %d jobs, %v", len(jobs), err)
	}
	var rows int64
	for _, j := range jobs {
		res, err := rollup.Run(ctx, l.cat, store, j, opts)
		if err != nil {
			t.Fatalf("rollup %s: %v", j.Dir(), err)
		}
		for _, s := range res.Outputs {
			rows += s.Rows
		}
	}
	full := l.open(t, Options{})
	if got := count(t, full, "SELECT count(*) FROM metrics_rollup"); got != rows || rows == 0 {
		t.Errorf("metrics_rollup has %d rows, rollups wrote %d", got, rows)
	}
	_, byTier, _ := queryAll(t, full, "SELECT tier, count(*) FROM metrics_rollup GROUP BY 1 ORDER BY 1", 0)
	if len(byTier) != len(rollup.DefaultTiers) {
		t.Errorf("tiers: %v", byTier)
	}

	empty := l.open(t, Options{Tenant: "nobody"})
	types := func(e *Engine) map[string]string {
		_, rows, _ := queryAll(t, e, "DESCRIBE metrics_rollup", 0)
		m := map[string]string{}
		for _, r := range rows {
			m[r[0].(string)] = r[1].(string)
		}
		return m
	}
	want, got := types(full), types(empty)
	for name, typ := range got {
		if want[name] != typ {
			t.Errorf("metrics_rollup.%s: empty view has %q, files have %q", name, typ, want[name])
		}
	}
	for _, c := range fixedColumns[TableRollup] {
		if _, ok := want[c.name]; !ok {
			t.Errorf("metrics_rollup.%s: not in the rollup files", c.name)
		}
	}
}
