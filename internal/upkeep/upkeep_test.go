package upkeep

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// now is the wall clock: the catalog stamps replaced segments with it,
// and the sweeper compares against that.
var now = time.Now().UTC()

// writeHour writes parts segments of n log records into the hour starting
// at h, with real files, and catalogs them.
func writeHour(t *testing.T, cat *catalog.Catalog, store lake.Store, h time.Time, parts, n int) {
	t.Helper()
	for p := range parts {
		ld := plog.NewLogs()
		sl := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
		for i := range n {
			r := sl.LogRecords().AppendEmpty()
			r.SetTimestamp(pcommon.NewTimestampFromTime(h.Add(time.Duration(p*n+i) * time.Second)))
			r.Body().SetStr(fmt.Sprintf("record %d/%d", p, i))
		}
		pb, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
		if err != nil {
			t.Fatal(err)
		}
		var b signal.Logs
		if err := otlp.DecodeLogs(&b, pb); err != nil {
			t.Fatal(err)
		}
		var segs []catalog.Segment
		w, err := lake.NewWriter(lake.Options{Store: store, Now: func() time.Time { return now }},
			func(s lake.Segment) error { segs = append(segs, s.CatalogRow()); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteLogs("t", &b); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := cat.AddSegments(context.Background(), segs...); err != nil {
			t.Fatal(err)
		}
	}
}

type partState struct {
	segs int
	rows int64
}

func liveByHour(t *testing.T, cat *catalog.Catalog) map[string]partState {
	t.Helper()
	segs, err := cat.List(context.Background(), catalog.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]partState{}
	for _, s := range segs {
		k := fmt.Sprintf("%s/%02d", s.Day, s.Hour)
		st := out[k]
		st.segs++
		st.rows += s.Rows
		out[k] = st
	}
	return out
}

// TestRunOnce: one pass compacts closed hours (not the one too recent),
// removes the hours past retention, and counts it all in the metrics.
func TestRunOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dsn := "sqlite:" + filepath.Join(dir, "catalog.db")
	cat, err := catalog.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	store := lake.NewLocalStore(filepath.Join(dir, "lake"))
	old := now.Add(-50 * time.Hour).Truncate(time.Hour)   // past 48h retention
	closed := now.Add(-3 * time.Hour).Truncate(time.Hour) // compactable
	recent := now.Truncate(time.Hour).Add(-time.Hour)     // ended 30m ago < min_age 1h
	for _, h := range []time.Time{old, closed, recent} {
		writeHour(t, cat, store, h, 3, 20)
	}

	cfg := config.Default()
	cfg.Upkeep.Compaction.MinAge = config.Duration(time.Hour)
	cfg.Upkeep.Retention.Logs = config.Duration(48 * time.Hour)
	cfg.Upkeep.Rollup.Enabled = false
	cfg.Upkeep.SweepGrace = 0
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	s, err := New(FromConfig(cfg), Settings{CatalogDSN: dsn, Store: store, Registerer: reg,
		Logger: slog.New(slog.DiscardHandler), Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	rep := s.RunOnce(ctx, cat)
	byTask := map[string]TaskReport{}
	for _, tr := range rep.Tasks {
		if tr.Err != nil {
			t.Fatalf("%s: %v", tr.Task, tr.Err)
		}
		byTask[tr.Task] = tr
	}
	key := func(h time.Time) string { return fmt.Sprintf("%s/%02d", h.Format(time.DateOnly), h.Hour()) }
	got := liveByHour(t, cat)
	want := map[string]partState{
		key(closed): {1, 60}, // compacted, same rows
		key(recent): {3, 60}, // too recent to compact
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("live after pass: %v, want %v", got, want)
	}
	// Compaction skipped the hour that retention removes.
	if c, r := byTask[taskCompaction], byTask[taskRetention]; c.Done != 1 || c.SegmentsReplaced != 3 || r.Done != 1 || r.SegmentsReplaced != 3 || r.Rows != 60 {
		t.Fatalf("reports: compaction %+v, retention %+v", c, r)
	}
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"sluice_upkeep_runs_total", []string{"task", "retention", "result", "ok"}, 1},
		{"sluice_upkeep_runs_total", []string{"task", "compaction", "result", "ok"}, 1},
		{"sluice_upkeep_segments_replaced_total", []string{"task", "compaction"}, 3},
		{"sluice_upkeep_segments_replaced_total", []string{"task", "retention"}, 3},
	} {
		if got := metricValue(t, reg, tc.name, tc.labels...); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	if v := metricValue(t, reg, "sluice_upkeep_last_success_timestamp_seconds", "task", "retention"); v < float64(now.Unix()) || v > float64(time.Now().Unix()+1) {
		t.Errorf("last success %v, now %v", v, now.Unix())
	}
	// The sweeper deleted every replaced file and forgot its row.
	all, err := cat.List(ctx, catalog.Filter{IncludeReplaced: true})
	if err != nil {
		t.Fatal(err)
	}
	var files, rows []string
	for _, seg := range all {
		rows = append(rows, seg.Path)
	}
	if err := store.Walk("", func(p string, _ int64) error { files = append(files, p); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(rows)
	slices.Sort(files)
	if len(rows) != 4 || !slices.Equal(files, rows) {
		t.Fatalf("after sweep: catalog %v, files %v", rows, files)
	}
	if sw := byTask[taskSweep]; sw.FilesDeleted != 6 || sw.BytesDeleted <= 0 {
		t.Fatalf("sweep report %+v", sw)
	}
	if v := metricValue(t, reg, "sluice_upkeep_bytes_deleted_total"); v != float64(byTask[taskSweep].BytesDeleted) {
		t.Errorf("bytes deleted metric %v", v)
	}
	// A second pass finds nothing to do.
	rep = s.RunOnce(ctx, cat)
	for _, tr := range rep.Tasks {
		if tr.Err != nil || tr.Done != 0 {
			t.Fatalf("second pass %s: %+v", tr.Task, tr)
		}
	}
}

// TestStartStop: the loop runs passes on its own and stops promptly.
func TestStartStop(t *testing.T) {
	dir := t.TempDir()
	dsn := "sqlite:" + filepath.Join(dir, "catalog.db")
	cfg := config.Default()
	o := FromConfig(cfg)
	o.Interval = 10 * time.Millisecond
	reg := prometheus.NewRegistry()
	s, err := New(o, Settings{CatalogDSN: dsn, Store: lake.NewLocalStore(filepath.Join(dir, "lake")), Registerer: reg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for metricValue(t, reg, "sluice_upkeep_runs_total", "task", "compaction", "result", "ok") < 3 {
		if time.Now().After(deadline) {
			t.Fatal("no passes ran")
		}
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Stop took %v", took)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

// TestConfig: the upkeep section parses, validates and becomes rules.
func TestConfig(t *testing.T) {
	c, err := config.Parse([]byte(`
upkeep:
  rollup:
    tiers: [1m, 5m, 1h]
  retention:
    logs: 168h
    metrics: 168h
    io_events: 72h
    metrics_rollup: {1m: 720h, 1h: 9600h}
    tenants:
      acme: {logs: 720h, traces: 0, io_events: 0, metrics_rollup: {1h: 0}}
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r := RetentionRules(c.Upkeep.Retention)
	day := 24 * time.Hour
	for _, tc := range []struct {
		tenant, table, tier string
		want                time.Duration
	}{
		{"x", "logs", "", 7 * day},
		{"acme", "logs", "", 30 * day},
		{"x", "metrics_rollup", "1m", 30 * day},
		{"x", "metrics_rollup", "5m", 0}, // default 0
		{"x", "metrics_rollup", "1h", 400 * day},
		{"acme", "metrics_rollup", "1h", 0},
		{"acme", "metrics_rollup", "1m", 30 * day},
		{"acme", "traces", "", 0},
		{"acme", "metrics", "", 7 * day},
		{"x", "io_events", "", 3 * day},
		{"acme", "io_events", "", 0},
	} {
		if got := r.Age(tc.tenant, tc.table, tc.tier); got != tc.want {
			t.Errorf("Age(%s, %s, %s) = %v, want %v", tc.tenant, tc.table, tc.tier, got, tc.want)
		}
	}

	// Changing the tiers alone is valid: the default keep-forever ages of
	// the tiers left out are no rules.
	if c, err := config.Parse([]byte("upkeep: {rollup: {tiers: [5m]}}"), func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	} else if err := c.Validate(); err != nil {
		t.Errorf("tiers [5m] with the default retention: %v", err)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"upkeep: {retention: {tenants: {acme: {lgos: 1h}}}}", "unknown key"},
		{"upkeep: {retention: {logs: -1h}}", "upkeep.retention.logs: must not be negative"},
		{"upkeep: {retention: {metrics_rollup: {10m: 1h}}}", "upkeep.retention.metrics_rollup.10m: not a tier"},
		{"upkeep: {retention: {tenants: {a/b: {logs: 1h}}}}", "is not a tenant name"},
		{"upkeep: {rollup: {tiers: [1m, 7m]}}", "does not divide 1h"},
		{"upkeep: {rollup: {tiers: [5m, 1m]}}", "larger multiple"},
		{"upkeep: {interval: 0s}", "upkeep.interval: must be a positive duration"},
		{"upkeep: {retention: {metrics_rollup: {1m: 24h}}}", "upkeep.retention.metrics_rollup.1m: 24h is shorter than metrics"},
		{"upkeep: {retention: {metrics: 48h, metrics_rollup: {1m: 24h}}}", "upkeep.retention.metrics_rollup.1m: 24h is shorter than metrics (48h"},
		{"upkeep: {retention: {metrics: 12h, metrics_rollup: {1m: 24h}, tenants: {acme: {metrics: 0}}}}", "upkeep.retention.tenants.acme.metrics_rollup.1m"},
		{"upkeep: {sweep_grace: -1s}", "upkeep.sweep_grace: must not be negative"},
		{"upkeep: {rollup: {tiers: [5m]}, retention: {metrics_rollup: {1m: 48h}}}", "upkeep.retention.metrics_rollup.1m: not a tier"},
	} {
		c, err := config.Parse([]byte(tc.yaml), func(string) (string, bool) { return "", false })
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// metricValue gathers reg and returns the value of the counter or gauge
// name with the given label pairs, 0 if absent.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue next
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// TestRollupThenRetention: a pass rolls the corpus metrics up into every
// tier; with rules that expire raw metrics and the 1m tier, the next pass
// removes exactly those, and later passes neither recompute the removed
// tier nor remove anything else.
func TestRollupThenRetention(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dsn := "sqlite:" + filepath.Join(dir, "catalog.db")
	cat, err := catalog.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	store := lake.NewLocalStore(filepath.Join(dir, "lake"))
	var segs []catalog.Segment
	w, err := lake.NewWriter(lake.Options{Store: store}, func(s lake.Segment) error { segs = append(segs, s.CatalogRow()); return nil })
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range corpustest.Files(t, "metrics")[:3] {
		var b signal.Metrics
		if err := otlp.DecodeMetrics(&b, corpustest.Read(t, p)); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteMetrics("t", &b); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cat.AddSegments(ctx, segs...); err != nil {
		t.Fatal(err)
	}

	cfg := config.Default()
	cfg.Upkeep.SweepGrace = 0
	newSched := func(c config.Config) *Scheduler {
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		s, err := New(FromConfig(c), Settings{CatalogDSN: dsn, Store: store, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	pass := func(s *Scheduler) map[string]TaskReport {
		out := map[string]TaskReport{}
		for _, tr := range s.RunOnce(ctx, cat).Tasks {
			if tr.Err != nil {
				t.Fatalf("%s: %v", tr.Task, tr.Err)
			}
			out[tr.Task] = tr
		}
		return out
	}
	levels := func() map[string]int { // live segments per table/level
		segs, err := cat.List(ctx, catalog.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, s := range segs {
			lvl := fmt.Sprint(s.Level)
			if s.Table == "metrics" {
				lvl = "raw"
			}
			out[s.Table+"/"+lvl]++
		}
		return out
	}
	if r := pass(newSched(cfg)); r[taskRollup].Done == 0 {
		t.Fatalf("no rollup in the first pass: %+v", r[taskRollup])
	}
	before := levels()
	for _, k := range []string{"metrics/raw", "metrics_rollup/60", "metrics_rollup/300", "metrics_rollup/3600"} {
		if before[k] == 0 {
			t.Fatalf("no live %s after the first pass: %v", k, before)
		}
	}

	cfg.Upkeep.Retention.Metrics = config.Duration(time.Hour)
	cfg.Upkeep.Retention.MetricsRollup["1m"] = config.Duration(2 * time.Hour)
	s := newSched(cfg)
	r := pass(s)
	if r[taskRetention].Done == 0 || r[taskRollup].Done != 0 {
		t.Fatalf("second pass: retention %+v, rollup %+v", r[taskRetention], r[taskRollup])
	}
	want := map[string]int{"metrics_rollup/300": before["metrics_rollup/300"], "metrics_rollup/3600": before["metrics_rollup/3600"]}
	if got := levels(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after retention: %v, want %v", got, want)
	}
	for range 2 {
		r := pass(s)
		for _, task := range []string{taskCompaction, taskRollup, taskRetention} {
			if r[task].Jobs != 0 {
				t.Fatalf("later pass: %s did %+v", task, r[task])
			}
		}
		if got := levels(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("later pass changed the lake: %v, want %v", got, want)
		}
	}
}
