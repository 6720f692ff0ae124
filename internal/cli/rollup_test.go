package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/rollup"
	"github.com/sluice-dev/sluice/internal/signal"
)

// capMetrics is an hour of a gauge's points, a minute apart, of 4 series;
// series s has the point labels k=<s> and l<s>.a, l<s>.b (strings): nine
// attribute label columns in all (the resource's service.name has the
// service_name column).
func capMetrics() *signal.Metrics {
	m := new(signal.Metrics)
	c := &m.Common
	start := uint32(c.Attrs.Len())
	c.Attrs.Append(c.Keys.IDString("service.name"), signal.ValueString, uint64(c.AppendString("svc")))
	c.Resources = append(c.Resources, signal.Resource{Attrs: signal.Range{Start: start, End: uint32(c.Attrs.Len())}})
	c.Scopes = append(c.Scopes, signal.Scope{Name: c.AppendString("meter")})
	m.Descs = append(m.Descs, signal.MetricDesc{Name: c.AppendString("temp"), Type: signal.MetricGauge})
	base := capNow.Truncate(time.Hour)
	for minute := range 60 {
		for s := range 4 {
			i := m.AppendPoint(0, 0, 0)
			m.Time[i] = base.Add(time.Duration(minute)*time.Minute + time.Second).UnixNano()
			m.NumberType[i], m.Number[i] = signal.ValueInt, uint64(minute*10+s)
			start := uint32(c.Attrs.Len())
			c.Attrs.Append(c.Keys.IDString("k"), signal.ValueString, uint64(c.AppendString(fmt.Sprint(s))))
			for _, key := range []string{"a", "b"} {
				c.Attrs.Append(c.Keys.IDString(fmt.Sprintf("l%d.%s", s, key)), signal.ValueString, uint64(c.AppendString(key+fmt.Sprint(s))))
			}
			m.Attr[i] = signal.Range{Start: start, End: uint32(c.Attrs.Len())}
		}
	}
	return m
}

// rollupLake writes capMetrics as one raw file of a new lake and returns
// its root.
func rollupLake(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	ctx := context.Background()
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(root, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	w, err := lake.NewWriter(lake.Options{Root: root, Now: func() time.Time { return capNow }},
		func(s lake.Segment) error { return cat.AddSegments(ctx, s.CatalogRow()) })
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMetrics("acme", capMetrics()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return root
}

// rollupWindows reads the live metrics_rollup files of a lake with
// parquet-go: each window as "tier start metric {labels}", a label read
// from its attribute column or from an overflow column's JSON alike (the
// test's labels are all strings), and the most attribute columns of a file.
func rollupWindows(t *testing.T, root string) (windows []string, attrCols int) {
	t.Helper()
	ctx := context.Background()
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(root, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	segs, err := cat.List(ctx, catalog.Filter{Table: rollup.Table})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		raw, err := os.ReadFile(filepath.Join(root, s.Path))
		if err != nil {
			t.Fatal(err)
		}
		pf, err := parquet.OpenFile(bytes.NewReader(raw), int64(len(raw)))
		if err != nil {
			t.Fatalf("%s: %v", s.Path, err)
		}
		cols := pf.Schema().Columns()
		n := 0
		for _, p := range cols {
			if lake.IsAttributeColumn(p[0]) {
				n++
			}
		}
		attrCols = max(attrCols, n)
		for _, rg := range pf.RowGroups() {
			rows := rg.Rows()
			buf := make([]parquet.Row, 64)
			for {
				k, err := rows.ReadRows(buf)
				for _, row := range buf[:k] {
					var tier, metric, start string
					var labels []string
					for _, v := range row {
						if v.IsNull() || len(cols[v.Column()]) != 1 {
							continue
						}
						name := cols[v.Column()][0]
						switch {
						case name == "tier":
							tier = v.String()
						case name == "metric_name":
							metric = v.String()
						case name == "window_start":
							start = fmt.Sprint(v.Int64())
						case lake.IsAttributeColumn(name):
							scope, key, _ := strings.Cut(strings.SplitN(name, "#", 2)[0], ".")
							labels = append(labels, scope+":"+key+"="+v.String())
						case lake.IsOverflowColumn(name):
							var obj map[string]map[string]any
							if err := json.Unmarshal(v.ByteArray(), &obj); err != nil {
								t.Fatalf("%s: %v", name, err)
							}
							for key, any := range obj {
								labels = append(labels, strings.TrimSuffix(name, "_overflow")+":"+key+"="+fmt.Sprint(any["stringValue"]))
							}
						}
					}
					slices.Sort(labels)
					windows = append(windows, fmt.Sprintf("%s %s %s {%s}", tier, start, metric, strings.Join(labels, ",")))
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			rows.Close()
		}
	}
	slices.Sort(windows)
	return windows, attrCols
}

// TestRollupMaxAttributeColumns: `sluice rollup --max-attribute-columns 2`
// writes rollup files with at most 2 attribute label columns, and the
// same windows, every label included (the rest read from the overflow
// columns), as a rollup of the same hour under the default cap.
func TestRollupMaxAttributeColumns(t *testing.T) {
	run := func(root string, args ...string) {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := Main(append([]string{"rollup", "--lake", root}, args...), nil, &out, &errOut); code != 0 {
			t.Fatalf("rollup %v: exit %d: %s%s", args, code, out.String(), errOut.String())
		}
	}
	def := rollupLake(t)
	run(def)
	want, cols := rollupWindows(t, def)
	// 4 series × (60 1m + 12 5m + 1 1h windows).
	if len(want) != 4*73 || cols < 9 {
		t.Fatalf("default cap: %d windows, %d attribute columns", len(want), cols)
	}
	if !strings.Contains(want[0], "attr:k=") {
		t.Fatalf("window without its labels: %s", want[0])
	}

	capped := rollupLake(t)
	run(capped, "--max-attribute-columns", "2")
	got, cols := rollupWindows(t, capped)
	if cols > 2 {
		t.Errorf("--max-attribute-columns 2: %d attribute columns", cols)
	}
	if !slices.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("window %d:\n got %s\nwant %s", i, got[i], want[i])
			}
		}
		t.Fatalf("%d windows, want %d", len(got), len(want))
	}
}
