package compact

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/signal"
)

// overflowLogs is one batch whose records use keys of batch b, so that
// inputs overflow different keys: with a cap of 3 every input has
// overflow columns, and their union of columns passes the cap.
func overflowLogs(b int) *signal.Logs {
	l := new(signal.Logs)
	c := &l.Common
	start := uint32(c.Attrs.Len())
	c.Attrs.Append(c.Keys.IDString("service.name"), signal.ValueString, uint64(c.AppendString("svc")))
	c.Attrs.Append(c.Keys.IDString(fmt.Sprintf("res.b%d", b)), signal.ValueInt, uint64(b))
	c.Attrs.Append(c.Keys.IDString("res.shared"), signal.ValueString, uint64(c.AppendString("r")))
	c.Resources = append(c.Resources, signal.Resource{Attrs: signal.Range{Start: start, End: uint32(c.Attrs.Len())}})
	c.Scopes = append(c.Scopes, signal.Scope{Name: c.AppendString("lib")})
	base := ingestNow.Truncate(time.Hour).UnixNano()
	for i := range 40 {
		j := l.AppendRecord(0, 0)
		l.Time[j] = base + int64(i*7+b)
		l.BodyType[j] = signal.ValueString
		l.Body[j] = uint64(c.AppendString(fmt.Sprintf("b%d r%d", b, i)))
		start := uint32(c.Attrs.Len())
		c.Attrs.Append(c.Keys.IDString("k"), signal.ValueInt, uint64(i))
		for k := range 1 + i%4 {
			key := fmt.Sprintf("b%d.k%d", b, k)
			if k%2 == 0 {
				c.Attrs.Append(c.Keys.IDString(key), signal.ValueString, uint64(c.AppendString(fmt.Sprint("v", i))))
			} else {
				c.Attrs.Append(c.Keys.IDString(key), signal.ValueDouble, math.Float64bits(float64(i)/4))
			}
		}
		l.Attr[j] = signal.Range{Start: start, End: uint32(c.Attrs.Len())}
	}
	return l
}

// decodedRows reads files through the lake reader and renders each record
// with its resource, scope and record attributes sorted, so that an
// attribute reads the same from a column or from an overflow column.
func decodedRows(t *testing.T, e *lakeEnv, files []lake.Segment) (rows []string, attrCols int, overflow bool) {
	t.Helper()
	for _, s := range files {
		f, err := lake.OpenObject(e.store, s.Path)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range f.Parquet().Schema().Columns() {
			if lake.IsAttributeColumn(p[0]) {
				n++
			}
			overflow = overflow || p[0] == lake.OverflowColumn("attr")
		}
		attrCols = max(attrCols, n)
		l := new(signal.Logs)
		if err := f.ReadLogs(l); err != nil {
			t.Fatal(err)
		}
		f.Close()
		c := &l.Common
		set := func(r signal.Range) string {
			var kv []string
			for i := r.Start; i < r.End; i++ {
				v := fmt.Sprint(c.Attrs.Val[i])
				if c.Attrs.Type[i] == signal.ValueString {
					v = c.String(signal.Str(c.Attrs.Val[i]))
				}
				kv = append(kv, fmt.Sprintf("%s=%d:%s", c.Keys.Name(c.Attrs.Key[i]), c.Attrs.Type[i], v))
			}
			slices.Sort(kv)
			return strings.Join(kv, ",")
		}
		for i := range l.Len() {
			rows = append(rows, fmt.Sprintf("%d %s res{%s} sc{%s} {%s}", l.Time[i], c.String(signal.Str(l.Body[i])),
				set(c.Resources[l.Resource[i]].Attrs), set(c.Scopes[l.Scope[i]].Attrs), set(l.Attr[i])))
		}
	}
	slices.Sort(rows)
	return rows, attrCols, overflow
}

// TestMergeOverflowColumns compacts inputs that have overflow columns: the
// column merge copies them (every attribute still reads back), and when
// the inputs' columns together pass the cap, merge falls back to the row
// merge, whose output keeps the cap.
func TestMergeOverflowColumns(t *testing.T) {
	e := newEnv(t)
	var inputs []lake.Segment
	for b := range 4 {
		w, err := lake.NewWriter(lake.Options{Store: e.store, Now: func() time.Time { return ingestNow }, MaxAttributeColumns: 3},
			func(s lake.Segment) error {
				inputs = append(inputs, s)
				return e.cat.AddSegments(context.Background(), s.CatalogRow())
			})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteLogs("acme", overflowLogs(b)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	want, inCols, inOverflow := decodedRows(t, e, inputs)
	if inCols > 3 || !inOverflow {
		t.Fatalf("inputs: %d attribute columns, overflow %v", inCols, inOverflow)
	}
	jobs, err := Plan(context.Background(), e.cat, Options{Table: lake.TableLogs})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("plan: %d jobs, %v", len(jobs), err)
	}
	job := jobs[0]

	// A cap above the union: the column merge copies the overflow columns.
	opts := Options{MaxAttributeColumns: 100}.withDefaults()
	_, cw, err := columnMerge(context.Background(), e.store, job, opts)
	if err != nil {
		t.Fatalf("column merge: %v", err)
	}
	got, _, ovf := decodedRows(t, e, cw)
	if !ovf {
		t.Error("column merge output lost the overflow column")
	}
	if !slices.Equal(got, want) {
		t.Errorf("column merge: %d rows differ from the inputs' %d", len(got), len(want))
	}

	// The ingest cap: the union passes it; the row merge keeps it.
	opts = Options{MaxAttributeColumns: 3}.withDefaults()
	if _, _, err := columnMerge(context.Background(), e.store, job, opts); !errors.Is(err, errColumnMerge) {
		t.Fatalf("column merge past the cap: %v, want errColumnMerge", err)
	}
	_, rw, err := merge(context.Background(), e.store, job, opts)
	if err != nil {
		t.Fatalf("merge: %v", err)
	}
	got, cols, ovf := decodedRows(t, e, rw)
	if cols > 3 || !ovf {
		t.Errorf("row merge output: %d attribute columns, overflow %v", cols, ovf)
	}
	if !slices.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("row merge row %d:\n got %s\nwant %s", i, got[i], want[i])
			}
		}
		t.Fatalf("row merge: %d rows, want %d", len(got), len(want))
	}
}
