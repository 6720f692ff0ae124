package retention

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// forEachCatalog runs fn against a fresh SQLite catalog and a fresh
// PostgreSQL schema.
func forEachCatalog(t *testing.T, fn func(t *testing.T, dsn string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, "sqlite:"+filepath.Join(t.TempDir(), "catalog.db")) })
	t.Run("postgres", func(t *testing.T) { fn(t, pgtest.Schema(t, pgtest.DSN(t))) })
}

func openCat(t *testing.T, dsn string) *catalog.Catalog {
	t.Helper()
	c, err := catalog.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// seg is a catalog row (no file: retention never reads files) for the hour
// starting at h, covering its first and last minute.
func seg(table, tenant string, h time.Time, name string) catalog.Segment {
	day := h.Format(time.DateOnly)
	return catalog.Segment{
		Table: table, Tenant: tenant, Day: day, Hour: h.Hour(),
		Path:    catalog.PartitionDir(table, tenant, day, h.Hour()) + "/" + name + ".parquet",
		MinTime: h.UnixNano(), MaxTime: h.Add(time.Hour - 1).UnixNano(),
		Rows: 10, Bytes: 100, SchemaHash: "x",
	}
}

func live(t *testing.T, c *catalog.Catalog) []string {
	t.Helper()
	segs, err := c.List(context.Background(), catalog.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range segs {
		out = append(out, s.Path)
	}
	return out
}

func dirs(parts []Partition) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p.String())
	}
	return out
}

var base = time.Date(2025, 3, 10, 0, 0, 0, 0, time.UTC)

// TestPlanBoundaries: a partition goes exactly when its hour's end reaches
// now-age, not a nanosecond earlier.
func TestPlanBoundaries(t *testing.T) {
	ctx := context.Background()
	c := openCat(t, "sqlite:"+filepath.Join(t.TempDir(), "catalog.db"))
	h5 := base.Add(5 * time.Hour) // hour 05, ends at 06:00
	if err := c.AddSegments(ctx, seg("logs", "a", h5, "1"), seg("logs", "a", h5, "2"), seg("logs", "a", h5.Add(time.Hour), "3")); err != nil {
		t.Fatal(err)
	}
	rules := Rules{Keep: map[string]time.Duration{"logs": 24 * time.Hour}}
	end := h5.Add(time.Hour)
	for _, tc := range []struct {
		now  time.Time
		want []string
	}{
		{end.Add(24*time.Hour - 1), nil},
		{end.Add(24 * time.Hour), []string{"logs/tenant=a/dt=2025-03-10/hour=05"}},
		{end.Add(25*time.Hour - 1), []string{"logs/tenant=a/dt=2025-03-10/hour=05"}},
		{end.Add(25 * time.Hour), []string{"logs/tenant=a/dt=2025-03-10/hour=05", "logs/tenant=a/dt=2025-03-10/hour=06"}},
	} {
		parts, err := Plan(ctx, c, rules, tc.now)
		if err != nil {
			t.Fatal(err)
		}
		if got := dirs(parts); !slices.Equal(got, tc.want) {
			t.Errorf("now %s: planned %v, want %v", tc.now.Format(time.RFC3339Nano), got, tc.want)
		}
		if len(parts) > 0 && (len(parts[0].Segments) != 2 || parts[0].Rows != 20 || parts[0].Bytes != 200 || parts[0].Age != 24*time.Hour) {
			t.Errorf("partition contents: %+v", parts[0])
		}
	}
}

// TestPlanRulesAndTenants: per-table ages, a tenant override both shorter
// and "keep forever", tables without a rule kept, and io_events (sluice
// trace --record) under its own rule like the other tables.
func TestPlanRulesAndTenants(t *testing.T) {
	ctx := context.Background()
	c := openCat(t, "sqlite:"+filepath.Join(t.TempDir(), "catalog.db"))
	old := base                         // 10 days before now
	mid := base.Add(7 * 24 * time.Hour) // 3 days before now
	now := base.Add(10 * 24 * time.Hour)
	var segs []catalog.Segment
	for _, tn := range []string{"a", "acme", "keep"} {
		for _, tb := range []string{"logs", "metrics", "traces", "io_events"} {
			segs = append(segs, seg(tb, tn, old, tb+tn+"old"), seg(tb, tn, mid, tb+tn+"mid"))
		}
	}
	if err := c.AddSegments(ctx, segs...); err != nil {
		t.Fatal(err)
	}
	var rules Rules
	if err := rules.ParseKeep("logs=7d,metrics=5d, acme:logs=2d,keep:logs=0,keep:metrics=forever,io_events=5d,acme:io_events=2d,keep:io_events=0"); err != nil {
		t.Fatal(err)
	}
	parts, err := Plan(ctx, c, rules, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"io_events/tenant=a/dt=2025-03-10/hour=00",
		"io_events/tenant=acme/dt=2025-03-10/hour=00",
		"io_events/tenant=acme/dt=2025-03-17/hour=00", // 2d override
		"logs/tenant=a/dt=2025-03-10/hour=00",
		"logs/tenant=acme/dt=2025-03-10/hour=00",
		"logs/tenant=acme/dt=2025-03-17/hour=00", // 2d override: mid is 3 days old
		"metrics/tenant=a/dt=2025-03-10/hour=00",
		"metrics/tenant=acme/dt=2025-03-10/hour=00",
	}
	if got := dirs(parts); !slices.Equal(got, want) {
		t.Fatalf("planned\n%v\nwant\n%v", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if parts[5].Age != 48*time.Hour || parts[2].Age != 48*time.Hour || parts[0].Age != 5*24*time.Hour {
		t.Errorf("ages %v %v %v, want the 2d overrides and io_events' 5d", parts[5].Age, parts[2].Age, parts[0].Age)
	}
}

// TestDryRunChangesNothing: Plan is read-only; Apply then removes exactly
// the planned partitions and the rows stay (replaced) for the sweeper.
func TestPlanIsReadOnlyApplyRemoves(t *testing.T) {
	forEachCatalog(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		c := openCat(t, dsn)
		now := base.Add(30 * 24 * time.Hour)
		keepHour := now.Add(-2 * time.Hour).Truncate(time.Hour)
		in := []catalog.Segment{seg("logs", "a", base, "1"), seg("logs", "a", base, "2"), seg("logs", "a", base.Add(time.Hour), "3"), seg("logs", "a", keepHour, "4")}
		if err := c.AddSegments(ctx, in...); err != nil {
			t.Fatal(err)
		}
		before := live(t, c)
		rules := Rules{Keep: map[string]time.Duration{"logs": 24 * time.Hour}}
		for range 3 {
			parts, err := Plan(ctx, c, rules, now)
			if err != nil || len(parts) != 2 {
				t.Fatalf("plan: %d partitions, %v", len(parts), err)
			}
		}
		if got := live(t, c); !slices.Equal(got, before) {
			t.Fatalf("Plan changed the catalog: %v", got)
		}
		all, _ := c.List(ctx, catalog.Filter{IncludeReplaced: true})
		if len(all) != len(in) {
			t.Fatalf("%d rows, want %d", len(all), len(in))
		}

		parts, _ := Plan(ctx, c, rules, now)
		var removed int64
		for _, p := range parts {
			res, err := Apply(ctx, c, p, Options{})
			if err != nil || res.Skipped {
				t.Fatalf("apply %s: %+v %v", p, res, err)
			}
			removed += res.Rows
		}
		if removed != 30 {
			t.Errorf("removed %d rows, want 30", removed)
		}
		if got := live(t, c); !slices.Equal(got, []string{in[3].Path}) {
			t.Fatalf("live after apply: %v", got)
		}
		all, _ = c.List(ctx, catalog.Filter{IncludeReplaced: true})
		if len(all) != len(in) {
			t.Fatalf("apply deleted rows instead of marking them replaced: %d rows", len(all))
		}
		for _, s := range all {
			if s.Path != in[3].Path && s.ReplacedAt.IsZero() {
				t.Errorf("%s still live", s.Path)
			}
		}
		// Nothing left to do; a stale plan applies as a no-op.
		if again, _ := Plan(ctx, c, rules, now); len(again) != 0 {
			t.Fatalf("second plan: %v", dirs(again))
		}
		if res, err := Apply(ctx, c, parts[0], Options{}); err != nil || len(res.Removed) != 0 {
			t.Fatalf("re-apply: %+v %v", res, err)
		}
	})
}

// TestApplyCatchesLateSegments: a segment that arrived after Plan in the
// planned hour goes too (the whole hour is past its age).
func TestApplyCatchesLateSegments(t *testing.T) {
	ctx := context.Background()
	c := openCat(t, "sqlite:"+filepath.Join(t.TempDir(), "catalog.db"))
	if err := c.AddSegments(ctx, seg("traces", "a", base, "1")); err != nil {
		t.Fatal(err)
	}
	rules := Rules{Keep: map[string]time.Duration{"traces": time.Hour}}
	parts, err := Plan(ctx, c, rules, base.Add(3*time.Hour))
	if err != nil || len(parts) != 1 {
		t.Fatalf("plan: %v %v", dirs(parts), err)
	}
	if err := c.AddSegments(ctx, seg("traces", "a", base, "late"), seg("traces", "b", base, "other-tenant")); err != nil {
		t.Fatal(err)
	}
	res, err := Apply(ctx, c, parts[0], Options{})
	if err != nil || len(res.Removed) != 2 {
		t.Fatalf("apply: %+v %v", res, err)
	}
	if got := live(t, c); !slices.Equal(got, []string{"traces/tenant=b/dt=2025-03-10/hour=00/other-tenant.parquet"}) {
		t.Fatalf("live: %v", got)
	}
}

// TestApplyRespectsLeases: while compaction (or rollup) holds a lease on
// the partition, Apply skips it and changes nothing.
func TestApplyRespectsLeases(t *testing.T) {
	forEachCatalog(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		c := openCat(t, dsn)
		other := openCat(t, dsn) // another process
		if err := c.AddSegments(ctx, seg("metrics", "a", base, "1")); err != nil {
			t.Fatal(err)
		}
		parts, err := Plan(ctx, c, Rules{Keep: map[string]time.Duration{"metrics": time.Hour}}, base.Add(48*time.Hour))
		if err != nil || len(parts) != 1 {
			t.Fatalf("plan: %v %v", dirs(parts), err)
		}
		p := parts[0]
		if want := []string{"compact/" + p.Dir(), "rollup/" + p.Dir()}; !slices.Equal(p.LeaseKeys(), want) {
			t.Fatalf("lease keys %v, want %v", p.LeaseKeys(), want)
		}
		for _, key := range p.LeaseKeys() {
			if ok, err := other.TryLease(ctx, key, "compactor", time.Minute); err != nil || !ok {
				t.Fatalf("lease %s: %v %v", key, ok, err)
			}
			res, err := Apply(ctx, c, p, Options{Owner: "ret"})
			if err != nil || !res.Skipped || len(res.Removed) != 0 {
				t.Fatalf("apply under %s: %+v %v", key, res, err)
			}
			if len(live(t, c)) != 1 {
				t.Fatal("apply changed a leased partition")
			}
			if err := other.ReleaseLease(ctx, key, "compactor"); err != nil {
				t.Fatal(err)
			}
		}
		// A skipped Apply released what it took: the compactor can lease.
		for _, key := range p.LeaseKeys() {
			if ok, err := other.TryLease(ctx, key, "compactor", time.Minute); err != nil || !ok {
				t.Fatalf("lease %s left behind by a skipped Apply: %v %v", key, ok, err)
			}
			_ = other.ReleaseLease(ctx, key, "compactor")
		}
		res, err := Apply(ctx, c, p, Options{Owner: "ret"})
		if err != nil || res.Skipped || len(res.Removed) != 1 {
			t.Fatalf("apply: %+v %v", res, err)
		}
		// And released them after success.
		for _, key := range p.LeaseKeys() {
			if ok, _ := other.TryLease(ctx, key, "compactor", time.Minute); !ok {
				t.Fatalf("lease %s still held after Apply", key)
			}
		}
	})
}

func TestRulesParseAndValidate(t *testing.T) {
	var r Rules
	if err := r.ParseKeep("logs=7d,metrics=36h,metrics_rollup.1h=400d,metrics_rollup=30d,acme:logs=30d,acme:traces=0"); err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	day := 24 * time.Hour
	for _, tc := range []struct {
		tenant, table, tier string
		want                time.Duration
	}{
		{"x", "logs", "", 7 * day},
		{"acme", "logs", "", 30 * day},
		{"acme", "metrics", "", 36 * time.Hour}, // inherits
		{"acme", "traces", "", 0},               // explicit forever
		{"x", "traces", "", 0},                  // no rule
		{"x", "metrics_rollup", "1h", 400 * day},
		{"x", "metrics_rollup", "1m", 30 * day}, // the table's rule covers other tiers
	} {
		if got := r.Age(tc.tenant, tc.table, tc.tier); got != tc.want {
			t.Errorf("Age(%s, %s, %s) = %v, want %v", tc.tenant, tc.table, tc.tier, got, tc.want)
		}
	}
	if got := r.String(); got != "logs=7d,metrics=36h0m0s,metrics_rollup=30d,metrics_rollup.1h=400d,acme:logs=30d,acme:traces=forever" {
		t.Errorf("String: %s", got)
	}
	var back Rules
	if err := back.ParseKeep(r.String()); err != nil || back.String() != r.String() {
		t.Errorf("round trip: %v %q", err, back.String())
	}
	for _, bad := range []string{"logs", "log=7d", "logs=7", "logs=-1h", "logs=xd", "metrics.1m=1d", "bad/tenant:logs=1d", "metrics_rollup.=1d", "io_events.1m=1d", "io_event=1d"} {
		var r Rules
		if err := r.ParseKeep(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if err := (Rules{Keep: map[string]time.Duration{"logs": -time.Hour, "spans": time.Hour}}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "negative") || !strings.Contains(err.Error(), "spans") {
		t.Errorf("Validate: %v", err)
	}
	if _, err := Plan(context.Background(), nil, Rules{Keep: map[string]time.Duration{"x": 1}}, time.Now()); err == nil {
		t.Error("Plan accepted invalid rules")
	}
	// A rollup tier may not go before the raw metrics it is made from.
	for _, bad := range []string{"metrics_rollup.1m=1d", "metrics=7d,metrics_rollup.1m=1d", "metrics=7d,metrics_rollup=30d,acme:metrics=60d", "metrics=7d,metrics_rollup=30d,acme:metrics=0"} {
		var r Rules
		if err := r.ParseKeep(bad); err != nil {
			t.Fatal(err)
		}
		if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "at least as long as metrics") {
			t.Errorf("%q: Validate %v", bad, err)
		}
	}
	if (Rules{Keep: map[string]time.Duration{"logs": 0}}).Active() {
		t.Error("all-zero rules are active")
	}
}

// TestRollupTiers: each tier of a metrics_rollup hour ages out on its own
// rule (the tier is the segment's level in seconds, as rollup writes it),
// a rule for the whole table covers tiers without their own, and Apply
// removes only the planned tier's segments.
func TestRollupTiers(t *testing.T) {
	forEachCatalog(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		c := openCat(t, dsn)
		var in []catalog.Segment
		for _, lvl := range []int{60, 300, 3600} {
			for i := range 2 {
				s := seg("metrics_rollup", "a", base, fmt.Sprintf("l%d-%d", lvl, i))
				s.Level = lvl
				in = append(in, s)
			}
		}
		raw := seg("metrics", "a", base, "raw")
		if err := c.AddSegments(ctx, append(in, raw)...); err != nil {
			t.Fatal(err)
		}
		var rules Rules
		if err := rules.ParseKeep("metrics_rollup.1m=2d,metrics_rollup=10d,metrics_rollup.1h=0,metrics=1d"); err != nil {
			t.Fatal(err)
		}
		day := 24 * time.Hour
		for _, tc := range []struct {
			now  time.Time
			want []string
		}{
			{base.Add(day), nil},
			{base.Add(2 * day), []string{"metrics/tenant=a/dt=2025-03-10/hour=00"}},
			{base.Add(3 * day), []string{"metrics/tenant=a/dt=2025-03-10/hour=00", "metrics_rollup/tenant=a/dt=2025-03-10/hour=00 tier=1m"}},
			{base.Add(11 * day), []string{"metrics/tenant=a/dt=2025-03-10/hour=00",
				"metrics_rollup/tenant=a/dt=2025-03-10/hour=00 tier=1m", "metrics_rollup/tenant=a/dt=2025-03-10/hour=00 tier=5m"}},
			{base.Add(1000 * day), []string{"metrics/tenant=a/dt=2025-03-10/hour=00",
				"metrics_rollup/tenant=a/dt=2025-03-10/hour=00 tier=1m", "metrics_rollup/tenant=a/dt=2025-03-10/hour=00 tier=5m"}},
		} {
			parts, err := Plan(ctx, c, rules, tc.now)
			if err != nil {
				t.Fatal(err)
			}
			if got := dirs(parts); !slices.Equal(got, tc.want) {
				t.Errorf("now +%v: planned %v, want %v", tc.now.Sub(base), got, tc.want)
			}
		}
		parts, _ := Plan(ctx, c, rules, base.Add(3*day))
		parts = parts[1:] // the 1m tier
		res, err := Apply(ctx, c, parts[0], Options{})
		if err != nil || len(res.Removed) != 2 {
			t.Fatalf("apply 1m tier: %+v %v", res, err)
		}
		segs, _ := c.List(ctx, catalog.Filter{Table: "metrics_rollup"})
		for _, s := range segs {
			if s.Level == 60 {
				t.Errorf("1m segment %s still live", s.Path)
			}
		}
		if len(segs) != 4 {
			t.Errorf("%d rollup segments live, want the 4 of tiers 5m and 1h", len(segs))
		}
		if k := parts[0].LeaseKeys(); !slices.Equal(k, []string{"compact/" + parts[0].Dir(), "rollup/metrics/tenant=a/dt=2025-03-10/hour=00"}) {
			t.Errorf("rollup partition lease keys %v", k)
		}
	})
}

// TestApplyMovesFilesToTrash: given the lake's store, Apply moves the
// removed partition's files out of the Hive tree into the trash right
// after its commit (no pending move left for the sweeper); kept files
// stay in place. Without a store the moves stay journaled.
func TestApplyMovesFilesToTrash(t *testing.T) {
	forEachCatalog(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		c := openCat(t, dsn)
		root := t.TempDir()
		now := base.Add(30 * 24 * time.Hour)
		in := []catalog.Segment{seg("logs", "a", base, "1"), seg("logs", "a", base, "2"),
			seg("logs", "a", base.Add(time.Hour), "3"), seg("logs", "a", now.Add(-2*time.Hour).Truncate(time.Hour), "4")}
		for _, s := range in {
			p := filepath.Join(root, filepath.FromSlash(s.Path))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(s.Path), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.AddSegments(ctx, in...); err != nil {
			t.Fatal(err)
		}
		parts, err := Plan(ctx, c, Rules{Keep: map[string]time.Duration{"logs": 24 * time.Hour}}, now)
		if err != nil || len(parts) != 2 {
			t.Fatalf("plan: %d partitions, %v", len(parts), err)
		}
		// The first partition without a store: its moves stay pending.
		if _, err := Apply(ctx, c, parts[0], Options{}); err != nil {
			t.Fatal(err)
		}
		if moves, _ := c.Moves(ctx); len(moves) != 2 {
			t.Fatalf("without a store: %d pending moves, want 2", len(moves))
		}
		// The second with the store: its file leaves the tree at once.
		if _, err := Apply(ctx, c, parts[1], Options{Store: lake.NewLocalStore(root)}); err != nil {
			t.Fatal(err)
		}
		exists := func(p string) bool {
			_, err := os.Stat(filepath.Join(root, filepath.FromSlash(p)))
			return err == nil
		}
		if exists(in[2].Path) || !exists(catalog.TrashPath(in[2].Path)) {
			t.Errorf("%s: in place %v, in trash %v; want only in the trash", in[2].Path, exists(in[2].Path), exists(catalog.TrashPath(in[2].Path)))
		}
		if !exists(in[3].Path) {
			t.Errorf("kept file %s was moved", in[3].Path)
		}
		moves, _ := c.Moves(ctx)
		for _, m := range moves {
			if m.Src == in[2].Path {
				t.Errorf("move of %s still pending after Apply with a store", m.Src)
			}
		}
	})
}
