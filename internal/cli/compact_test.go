package cli

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/signal"
)

var capNow = time.Date(2025, 6, 1, 12, 30, 0, 0, time.UTC)

// capLogs is one batch of 30 records of one hour, each with the record
// attributes k (int) and b<b>.a..b<b>.c (strings, one double): four
// attribute columns per file, seven over two batches.
func capLogs(b int) *signal.Logs {
	l := new(signal.Logs)
	c := &l.Common
	start := uint32(c.Attrs.Len())
	c.Attrs.Append(c.Keys.IDString("service.name"), signal.ValueString, uint64(c.AppendString("svc")))
	c.Resources = append(c.Resources, signal.Resource{Attrs: signal.Range{Start: start, End: uint32(c.Attrs.Len())}})
	c.Scopes = append(c.Scopes, signal.Scope{Name: c.AppendString("lib")})
	base := capNow.Truncate(time.Hour).UnixNano()
	for i := range 30 {
		j := l.AppendRecord(0, 0)
		l.Time[j] = base + int64(i*10+b)
		l.BodyType[j] = signal.ValueString
		l.Body[j] = uint64(c.AppendString(fmt.Sprintf("b%d r%d", b, i)))
		start := uint32(c.Attrs.Len())
		c.Attrs.Append(c.Keys.IDString("k"), signal.ValueInt, uint64(i))
		for _, key := range []string{"a", "b"} {
			c.Attrs.Append(c.Keys.IDString(fmt.Sprintf("b%d.%s", b, key)), signal.ValueString, uint64(c.AppendString(fmt.Sprint(key, i))))
		}
		c.Attrs.Append(c.Keys.IDString(fmt.Sprintf("b%d.c", b)), signal.ValueDouble, uint64(i*3))
		l.Attr[j] = signal.Range{Start: start, End: uint32(c.Attrs.Len())}
	}
	return l
}

// liveLogs reads the live logs files of the lake's catalog: each record
// rendered with its attributes sorted (so an attribute reads the same from
// its column or from an overflow column), the most attribute columns of a
// file, and whether a file has the record overflow column.
func liveLogs(t *testing.T, root string) (rows []string, files, attrCols int, overflow bool) {
	t.Helper()
	ctx := context.Background()
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(root, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	segs, err := cat.List(ctx, catalog.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	store := lake.NewLocalStore(root)
	for _, s := range segs {
		f, err := lake.OpenObject(store, s.Path)
		if err != nil {
			t.Fatal(err)
		}
		files++
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
		for i := range l.Len() {
			var kv []string
			for a := l.Attr[i].Start; a < l.Attr[i].End; a++ {
				v := fmt.Sprint(c.Attrs.Val[a])
				if c.Attrs.Type[a] == signal.ValueString {
					v = c.String(signal.Str(c.Attrs.Val[a]))
				}
				kv = append(kv, fmt.Sprintf("%s=%d:%s", c.Keys.Name(c.Attrs.Key[a]), c.Attrs.Type[a], v))
			}
			slices.Sort(kv)
			rows = append(rows, fmt.Sprintf("%d %s {%s}", l.Time[i], c.String(signal.Str(l.Body[i])), strings.Join(kv, ",")))
		}
	}
	slices.Sort(rows)
	return rows, files, attrCols, overflow
}

// capLake is a lake with two logs files of capLogs(0) and capLogs(1).
func capLake(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	ctx := context.Background()
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(root, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	for b := range 2 {
		w, err := lake.NewWriter(lake.Options{Root: root, Now: func() time.Time { return capNow }},
			func(s lake.Segment) error { return cat.AddSegments(ctx, s.CatalogRow()) })
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteLogs("acme", capLogs(b)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestCompactMaxAttributeColumns: `sluice compact --max-attribute-columns 2`
// merges two files of four attribute columns each (six in all, under the
// default cap of 1000) into one file with at most 2 attribute columns and
// the rest in the overflow column, every record keeping every attribute.
// Out-of-range values are usage errors naming the flag, in compact and in
// rollup, and change nothing.
func TestCompactMaxAttributeColumns(t *testing.T) {
	root := capLake(t)
	want, files, cols, ovf := liveLogs(t, root)
	if files != 2 || cols != 4 || ovf || len(want) != 60 {
		t.Fatalf("inputs: %d files, %d attribute columns, overflow %v, %d rows", files, cols, ovf, len(want))
	}

	run := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := Main(args, nil, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	for _, cmd := range []string{"compact", "rollup"} {
		for _, n := range []string{"0", "10001"} {
			code, msg := run(cmd, "--lake", root, "--max-attribute-columns", n)
			if code != 2 || !strings.Contains(msg, "--max-attribute-columns "+n+": want 1 to 10000") {
				t.Fatalf("%s --max-attribute-columns %s: exit %d: %s", cmd, n, code, msg)
			}
		}
	}
	if _, files, _, _ := liveLogs(t, root); files != 2 {
		t.Fatalf("a refused run changed the lake: %d files", files)
	}

	if code, msg := run("compact", "--lake", root, "--max-attribute-columns", "2", "--grace", "0"); code != 0 {
		t.Fatalf("compact: exit %d: %s", code, msg)
	}
	got, files, cols, ovf := liveLogs(t, root)
	if files != 1 || cols > 2 || !ovf {
		t.Fatalf("compacted: %d files, %d attribute columns, overflow %v; want 1 file, at most 2 columns, overflow", files, cols, ovf)
	}
	if !slices.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("row %d:\n got %s\nwant %s", i, got[i], want[i])
			}
		}
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
}
