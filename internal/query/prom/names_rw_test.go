package prom

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
)

// oddNames are metric names a remote-write client may send that the OTLP
// mapping changes: three valid classic names, and four that are not.
var oddNames = []string{"nm_trailing_", "_nm_leading", "nm__double", "nm.dot", "9nm_digit", "nm ü", "nm__"}

// oddLabels are label names the OTLP mapping changes (escaping, collapse,
// exported_ prefix).
var oddLabels = []string{"l__d", "lbl.dot", "__x", "job"}

// oddNamesJSON is one OTLP request with every odd name twice: under the
// remote-write scope (value 1) and, with otlp, under an OTLP scope (value
// 2); a point at each of ts.
func oddNamesJSON(ts time.Time, otlp bool, more ...time.Time) []byte {
	var attrs []string
	for i, k := range oddLabels {
		attrs = append(attrs, attr(k, fmt.Sprint("v", i)))
	}
	metrics := func(v int) string {
		var ms []string
		for _, n := range oddNames {
			var pts []string
			for _, at := range append([]time.Time{ts}, more...) {
				pts = append(pts, fmt.Sprintf(`{"attributes":[%s],"timeUnixNano":"%d","asDouble":%d}`, strings.Join(attrs, ","), at.UnixNano(), v))
			}
			ms = append(ms, fmt.Sprintf(`{"name":%q,"gauge":{"dataPoints":[%s]}}`, n, strings.Join(pts, ",")))
		}
		return strings.Join(ms, ",")
	}
	other := ""
	if otlp {
		other = fmt.Sprintf(`,{"scope":{"name":"otel"},"metrics":[%s]}`, metrics(2))
	}
	return fmt.Appendf(nil, `{"resourceMetrics":[{"resource":{},"scopeMetrics":[{"scope":{"name":%q},"metrics":[%s]}%s]}]}`,
		prw.ScopeName, metrics(1), other)
}

// Remote-write rows come back with exactly the names and labels sent; OTLP
// rows of the same names keep the OTLP mapping.
func TestRemoteWriteNamesExact(t *testing.T) {
	l := newTestLake(t)
	l.Write(t, "acme", 0, oddNamesJSON(synthStart, true))
	at := synthStart.Add(time.Second)
	rwLabels := func(name string) labels.Labels {
		b := labels.NewScratchBuilder(0)
		b.Add(labels.MetricName, name)
		for i, k := range oddLabels {
			b.Add(k, fmt.Sprint("v", i))
		}
		b.Sort()
		return b.Labels()
	}
	otlpLabels := func(name string) labels.Labels {
		return labels.FromStrings(labels.MetricName, name, "l_d", "v0", "lbl_dot", "v1", "_x", "v2", "job", "v3")
	}
	var want []string
	for _, n := range oddNames {
		want = append(want, rwLabels(n).String()+" 1")
	}
	// OTLP "nm ü" and "nm__" both map to "nm": one series.
	for _, n := range []string{"nm_trailing", "nm_leading", "nm_double", "nm_dot", "_9nm_digit", "nm"} {
		want = append(want, otlpLabels(n).String()+" 2")
	}
	v := instant(t, adapterOf(t, l).Queryable("acme", Limits{}), `{__name__=~".+"}`, at)
	var got []string
	for _, s := range v {
		got = append(got, fmt.Sprintf("%s %g", s.Metric, s.F))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("series:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A matcher on each exact name finds exactly its remote-write series.
	for _, n := range oddNames {
		for _, expr := range []string{fmt.Sprintf(`{%q}`, n), fmt.Sprintf(`{__name__=%q}`, n)} {
			v := instant(t, adapterOf(t, l).Queryable("acme", Limits{}), expr, at)
			if len(v) != 1 || !labels.Equal(v[0].Metric, rwLabels(n)) || v[0].F != 1 {
				t.Errorf("%s: got %v, want %s 1", expr, v, rwLabels(n))
			}
		}
	}
	// A matcher on an exact label name.
	v = instant(t, adapterOf(t, l).Queryable("acme", Limits{}), `{"lbl.dot"="v1"}`, at)
	if len(v) != len(oddNames) {
		t.Errorf(`{"lbl.dot"="v1"}: %d series, want %d`, len(v), len(oddNames))
	}
	// The label APIs see the same names.
	q, err := adapterOf(t, l).Queryable("acme", Limits{}).Querier(0, math.MaxInt64/2_000_000)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	names, _, err := q.LabelValues(context.Background(), labels.MetricName, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range oddNames {
		if !slices.Contains(names, n) {
			t.Errorf("__name__ values %q lack %q", names, n)
		}
	}
	ln, _, err := q.LabelNames(context.Background(), nil, labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "nm.dot"))
	if err != nil {
		t.Fatal(err)
	}
	if w := append([]string{labels.MetricName}, oddLabels...); !slices.Equal(ln, slices.Sorted(slices.Values(w))) {
		t.Errorf(`label names of "nm.dot": %q, want %q`, ln, slices.Sorted(slices.Values(w)))
	}
	// Metadata names the remote-write series exactly.
	md, err := adapterOf(t, l).Metadata(context.Background(), "acme", "nm.dot")
	if err != nil {
		t.Fatal(err)
	}
	if len(md) != 1 || md[0].Name != "nm.dot" {
		t.Errorf(`metadata of "nm.dot": %+v`, md)
	}
}

// The catalog's name pruning never skips a file holding a remote-write
// name: every name "may map" to itself.
func TestRemoteWriteNamePruning(t *testing.T) {
	for _, n := range append(oddNames, "a..b", "total", "x_total", "ratio_x", "__", "ü") {
		if !nameMayMap(n, n) {
			t.Errorf("nameMayMap(%q, %q) = false", n, n)
		}
	}
	l := newTestLake(t)
	l.Write(t, "acme", 0, oddNamesJSON(synthStart, true))
	other := fmt.Sprintf(`{"resourceMetrics":[{"resource":{},"scopeMetrics":[{"scope":{"name":%q},"metrics":[`+
		`{"name":"other","gauge":{"dataPoints":[{"timeUnixNano":"%d","asInt":"7"}]}}]}]}]}`, prw.ScopeName, synthStart.UnixNano())
	l.Write(t, "acme", 0, []byte(other))
	for _, n := range oddNames {
		ad := adapterOf(t, l)
		v := instant(t, ad.Queryable("acme", Limits{}), fmt.Sprintf(`{%q}`, n), synthStart.Add(time.Second))
		if len(v) != 1 {
			t.Errorf("%q: %d series, want 1", n, len(v))
		}
		if f := ad.Stats.Files.Load(); f != 1 {
			t.Errorf("%q opened %d files, want 1", n, f)
		}
	}
}

// Rollup files keep scope_name: a query the rollups serve names the
// remote-write series exactly, as the raw points do. (Remote-write rows
// only: the series id does not hash the scope, so an OTLP series of the
// same name, resource and attributes would share a rollup row.)
func TestRemoteWriteNamesFromRollups(t *testing.T) {
	l := newTestLake(t)
	// Every 15 s at 7.5 s past, for an hour.
	var ts []time.Time
	for k := range 240 {
		ts = append(ts, synthStart.Add(time.Duration(k)*15*time.Second+7500*time.Millisecond))
	}
	l.Write(t, "acme", 0, oddNamesJSON(ts[0], false, ts[1:]...))
	rollUp(t, l)
	on, err := NewAdapter(Options{Catalog: l.Catalog, Store: l.Store, Rollups: true})
	if err != nil {
		t.Fatal(err)
	}
	at := func(m int) time.Time { return synthStart.Add(time.Duration(m) * time.Minute) }
	const expr = `{"lbl.dot"="v1"}`
	want, err := runRange(adapterOf(t, l).Queryable("acme", Limits{}), expr, at(5), at(55), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got, err := runRange(on.Queryable("acme", Limits{}), expr, at(5), at(55), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if on.Stats.RollupSelects.Load() == 0 {
		t.Fatal("the rollups were not used")
	}
	compareMatrices(t, expr, want, got, 0)
	var names []string
	for _, s := range got {
		names = append(names, s.Metric.Get("__name__")+"|"+s.Metric.Get("l__d"))
	}
	slices.Sort(names)
	var w []string
	for _, n := range oddNames {
		w = append(w, n+"|v0")
	}
	slices.Sort(w)
	if !slices.Equal(names, w) {
		t.Fatalf("series from rollups %q, want %q", names, w)
	}
}

// Remote-write labels a file keeps in attr_overflow (past
// lake.max_attribute_columns) come back exactly too, OTLP ones mapped.
func TestRemoteWriteNamesFromOverflow(t *testing.T) {
	l := newTestLake(t)
	var m signal.Metrics
	if err := otlp.DecodeMetricsJSON(&m, oddNamesJSON(synthStart, true)); err != nil {
		t.Fatal(err)
	}
	w, err := lake.NewWriter(lake.Options{Root: l.Root, Store: l.Store, MaxAttributeColumns: 1, MaxFutureSkew: 100 * 365 * 24 * time.Hour},
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
	q := adapterOf(t, l).Queryable("acme", Limits{})
	at := synthStart.Add(time.Second)
	v := instant(t, q, `{"nm.dot"}`, at)
	want := `{__name__="nm.dot", __x="v2", job="v3", l__d="v0", "lbl.dot"="v1"}`
	if len(v) != 1 || v[0].Metric.String() != want {
		t.Fatalf(`{"nm.dot"}: %v, want %s`, v, want)
	}
	v = instant(t, q, `nm_dot`, at)
	want = `{__name__="nm_dot", _x="v2", job="v3", l_d="v0", lbl_dot="v1"}`
	if len(v) != 1 || v[0].Metric.String() != want {
		t.Fatalf(`nm_dot: %v, want %s`, v, want)
	}
}
