package catalog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

type logRow struct {
	Timestamp   int64  `parquet:"timestamp,timestamp(nanosecond)"`
	ServiceName string `parquet:"service_name,dict"`
	Body        string `parquet:"body"`
}

type metricRow struct {
	Timestamp  int64   `parquet:"timestamp,timestamp(nanosecond)"`
	MetricName string  `parquet:"metric_name,dict"`
	Value      float64 `parquet:"value"`
}

type spanRow struct {
	StartTimestamp int64  `parquet:"start_timestamp,timestamp(nanosecond)"`
	Name           string `parquet:"name"`
	ServiceName    string `parquet:"service_name"` // plain: names stay unknown
	Attrs          struct {
		HTTPMethod string `parquet:"http_method"`
	} `parquet:"attrs"`
}

// writeParquet writes rows to root/rel with the given footer metadata.
func writeParquet[T any](t *testing.T, root, rel string, rows []T, meta map[string]string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	var opts []parquet.WriterOption
	for k, v := range meta {
		opts = append(opts, parquet.KeyValueMetadata(k, v))
	}
	w := parquet.NewGenericWriter[T](f, opts...)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func logRows(h time.Time, minutes ...int) []logRow {
	rows := make([]logRow, len(minutes))
	for i, m := range minutes {
		rows[i] = logRow{Timestamp: h.Add(time.Duration(m) * time.Minute).UnixNano(), ServiceName: []string{"web", "api"}[i%2], Body: "hello"}
	}
	return rows
}

func footer(table, tenant string, level int, minT, maxT int64) map[string]string {
	m := map[string]string{MetaTable: table, MetaTenant: tenant, MetaSchemaVersion: "1", MetaLevel: strconv.Itoa(level)}
	if minT != 0 || maxT != 0 {
		m[MetaMinTime] = strconv.FormatInt(minT, 10)
		m[MetaMaxTime] = strconv.FormatInt(maxT, 10)
	}
	return m
}

func TestRebuild(t *testing.T) {
	forEachDialect(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		root := t.TempDir()
		h3, h4 := hour3, hour3.Add(time.Hour)
		logSchema := parquet.SchemaOf(logRow{})

		var want []Segment
		// The hash must be the one a writer computes from its in-memory schema.
		expect := func(rel string, rows int64, level int, minT, maxT int64, schema *parquet.Schema, services, metrics []string) {
			pt, err := parsePath(rel)
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, Segment{
				Table: pt.table, Tenant: pt.tenant, Day: pt.day, Hour: pt.hour, Path: rel,
				MinTime: minT, MaxTime: maxT, Rows: rows, Bytes: fi.Size(), Level: level,
				SchemaHash: ParquetSchemaHash(schema), Created: fi.ModTime().UTC(), Services: services, MetricNames: metrics,
			})
		}

		// Footer keys present. The footer's min/max win over the data.
		l1 := "logs/tenant=a/dt=2024-05-01/hour=03/0001.parquet"
		writeParquet(t, root, l1, logRows(h3, 1, 2, 3), footer("logs", "a", 0, h3.UnixNano(), h3.Add(10*time.Minute).UnixNano()))
		expect(l1, 3, 0, h3.UnixNano(), h3.Add(10*time.Minute).UnixNano(), logSchema, []string{"api", "web"}, nil)

		l2 := "logs/tenant=a/dt=2024-05-01/hour=04/0002.parquet"
		writeParquet(t, root, l2, logRows(h4, 5, 59), footer("logs", "a", 1, h4.Add(5*time.Minute).UnixNano(), h4.Add(59*time.Minute).UnixNano()))
		expect(l2, 2, 1, h4.Add(5*time.Minute).UnixNano(), h4.Add(59*time.Minute).UnixNano(), logSchema, []string{"api", "web"}, nil)

		mt := "metrics/tenant=a/dt=2024-05-01/hour=03/0010.parquet"
		writeParquet(t, root, mt, []metricRow{{h3.UnixNano(), "cpu", 1}, {h3.UnixNano() + 1, "mem", 2}, {h3.UnixNano() + 2, "cpu", 3}},
			footer("metrics", "a", 0, h3.UnixNano(), h3.UnixNano()+2))
		expect(mt, 3, 0, h3.UnixNano(), h3.UnixNano()+2, parquet.SchemaOf(metricRow{}), nil, []string{"cpu", "mem"})

		// No time keys: min/max come from start_timestamp statistics.
		tr := "traces/tenant=b/dt=2024-05-01/hour=03/0003.parquet"
		spans := []spanRow{{StartTimestamp: h3.Add(30 * time.Minute).UnixNano(), Name: "b"}, {StartTimestamp: h3.Add(7 * time.Minute).UnixNano(), Name: "a"}}
		writeParquet(t, root, tr, spans, footer("traces", "b", 0, 0, 0))
		expect(tr, 2, 0, h3.Add(7*time.Minute).UnixNano(), h3.Add(30*time.Minute).UnixNano(), parquet.SchemaOf(spanRow{}), nil, nil)

		// Files Rebuild must report, naming the file.
		badPath := "logs/tenant=a/dt=2024-05-01/0004.parquet"
		writeParquet(t, root, badPath, logRows(h3, 1), footer("logs", "a", 0, 0, 0))
		mismatch := "logs/tenant=b/dt=2024-05-01/hour=03/0005.parquet"
		writeParquet(t, root, mismatch, logRows(h3, 1), footer("logs", "a", 0, 0, 0))
		wrongHour := "logs/tenant=a/dt=2024-05-01/hour=05/0006.parquet"
		writeParquet(t, root, wrongHour, logRows(h3, 1), footer("logs", "a", 0, 0, 0))
		corrupt := "logs/tenant=a/dt=2024-05-01/hour=03/0007.parquet"
		if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(corrupt)), []byte("PAR1 not really"), 0o644); err != nil {
			t.Fatal(err)
		}
		wantFailed := []string{badPath, wrongHour, corrupt, mismatch}
		slices.Sort(wantFailed)

		// Temporary files are ignored, not failed.
		writeParquet(t, root, "logs/tenant=a/dt=2024-05-01/hour=03/.tmp-0008.parquet", logRows(h3, 1), nil)
		writeParquet(t, root, "_tmp/0009.parquet", logRows(h3, 1), nil)
		if err := os.WriteFile(filepath.Join(root, "logs", "README"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}

		c := tg.open(t)
		// Rows that must not survive: one for a file that is gone; and l2 was
		// already replaced by compaction, which must stay recorded.
		gone := seg("logs", "z", 3, "gone", 0, 1)
		l2row := seg("logs", "a", 4, "0002", 5, 59)
		if err := c.AddSegmentsWithQueue(ctx, QueueCommit{"q", 7}, gone, l2row); err != nil {
			t.Fatal(err)
		}
		if err := c.Replace(ctx, []int64{idOf(t, c, l2row.Path)}, nil); err != nil {
			t.Fatal(err)
		}
		replacedAt := mustList(t, c, Filter{IncludeReplaced: true, Tenant: "a"})[0].ReplacedAt
		if replacedAt.IsZero() {
			t.Fatal("setup: l2 not replaced")
		}
		want[1].ReplacedAt = replacedAt

		var calls, lastTotal int
		st, err := Rebuild(ctx, c, root, func(done, total int) { calls++; lastTotal = total })
		if err != nil {
			t.Fatal(err)
		}
		if st.Files != 8 || st.Segments != 4 || st.Skipped != 2 || calls != 8 || lastTotal != 8 {
			t.Fatalf("stats %+v, progress calls %d total %d", st, calls, lastTotal)
		}
		var failed []string
		for _, f := range st.Failed {
			failed = append(failed, f.Path)
			if f.Err == nil || !strings.Contains(f.Err.Error(), f.Path) {
				t.Errorf("failure for %q does not name the file: %v", f.Path, f.Err)
			}
		}
		for _, f := range st.Failed {
			t.Log(f.Err)
		}
		if !slices.Equal(failed, wantFailed) {
			t.Fatalf("failed %v, want %v", failed, wantFailed)
		}
		// Rows and bytes of the live segments: the replaced one's rows
		// are in live ones too.
		var liveRows, liveBytes int64
		for _, w := range want {
			if w.ReplacedAt.IsZero() {
				liveRows += w.Rows
				liveBytes += w.Bytes
			}
		}
		if st.Rows != liveRows || st.Bytes != liveBytes || st.Replaced != 1 || liveRows == 10 {
			t.Fatalf("stats rows/bytes %+v, want %d live rows, %d bytes", st, liveRows, liveBytes)
		}

		check := func() {
			t.Helper()
			got := mustList(t, c, Filter{IncludeReplaced: true})
			if len(got) != len(want) {
				t.Fatalf("got %d segments, want %d: %v", len(got), len(want), paths(got))
			}
			for i := range got {
				g := got[i]
				g.ID = 0
				if g.Path != want[i].Path || g.MinTime != want[i].MinTime || g.MaxTime != want[i].MaxTime ||
					g.Rows != want[i].Rows || g.Bytes != want[i].Bytes || g.Level != want[i].Level ||
					g.SchemaHash != want[i].SchemaHash || !g.Created.Equal(want[i].Created) ||
					!g.ReplacedAt.Equal(want[i].ReplacedAt) || g.Table != want[i].Table || g.Tenant != want[i].Tenant ||
					g.Day != want[i].Day || g.Hour != want[i].Hour ||
					!slices.Equal(g.Services, want[i].Services) || !slices.Equal(g.MetricNames, want[i].MetricNames) {
					t.Errorf("segment %d:\n got %+v\nwant %+v", i, g, want[i])
				}
			}
		}
		check()
		if pos, _ := c.QueuePosition(ctx, "q"); pos != 7 {
			t.Fatalf("queue position lost by rebuild: %d", pos)
		}

		// Idempotent.
		st2, err := Rebuild(ctx, c, root, nil)
		if err != nil {
			t.Fatal(err)
		}
		if st2.Segments != st.Segments || len(st2.Failed) != len(st.Failed) {
			t.Fatalf("second rebuild: %+v", st2)
		}
		check()
	})
}

func TestRebuildMissingRoot(t *testing.T) {
	forEachDialect(t, func(t *testing.T, tg target) {
		c := tg.open(t)
		_, err := Rebuild(context.Background(), c, filepath.Join(t.TempDir(), "nope"), nil)
		if !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("got %v, want ErrNotExist", err)
		}
	})
}

// TestRebuildLineage: a rebuild over a lake whose replaced files were not
// swept yet counts each row once: files named by the lineage
// (MetaReplaces) of a catalogued file, transitively, are catalogued as
// replaced with a move to the trash; a lineage naming a file from an
// uncommitted output (an intent) does not count; _trash/ and _staging/
// are not read.
func TestRebuildLineage(t *testing.T) {
	forEachDialect(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		c := tg.open(t)
		root := t.TempDir()
		dir := PartitionDir("logs", "t", "2024-05-01", 3)
		base := time.Date(2024, 5, 1, 3, 0, 0, 0, time.UTC).UnixNano()
		rows := func(n int) []logRow {
			out := make([]logRow, n)
			for i := range out {
				out[i] = logRow{Timestamp: base + int64(i), ServiceName: "s", Body: "b"}
			}
			return out
		}
		meta := func(replaces string) map[string]string {
			m := map[string]string{MetaTable: "logs", MetaTenant: "t"}
			if replaces != "" {
				m[MetaReplaces] = replaces
			}
			return m
		}
		// a and b compacted into c, c and x into d; e is live on its own;
		// f, an uncommitted output, names e.
		writeParquet(t, root, dir+"/a.parquet", rows(3), meta(""))
		writeParquet(t, root, dir+"/b.parquet", rows(4), meta(""))
		writeParquet(t, root, dir+"/c.parquet", rows(7), meta("a b"))
		writeParquet(t, root, dir+"/x.parquet", rows(1), meta(""))
		writeParquet(t, root, dir+"/d.parquet", rows(8), meta("c x"))
		writeParquet(t, root, dir+"/e.parquet", rows(2), meta(""))
		writeParquet(t, root, dir+"/f.parquet", rows(2), meta("e"))
		writeParquet(t, root, TrashPath(dir+"/old.parquet"), rows(5), meta(""))
		writeParquet(t, root, StagingPath(dir+"/new.parquet"), rows(5), meta("d"))
		key := "compact/" + dir
		if ok, err := c.TryLease(ctx, key, "killed", time.Minute); err != nil || !ok {
			t.Fatalf("lease: %v %v", ok, err)
		}
		if err := c.AddIntent(ctx, key, "killed", dir+"/f.parquet"); err != nil {
			t.Fatal(err)
		}
		st, err := Rebuild(ctx, c, root, nil)
		if err != nil || len(st.Failed) != 0 {
			t.Fatalf("rebuild: %+v, %v", st, err)
		}
		if st.Rows != 10 || st.Replaced != 4 || st.Intended != 1 || st.Segments != 6 {
			t.Fatalf("rebuild: %+v; want 10 live rows (d, e), 4 replaced (a, b, c, x), 1 intended (f)", st)
		}
		var live []string
		for _, s := range mustList(t, c, Filter{}) {
			live = append(live, FileID(s.Path))
		}
		if !slices.Equal(live, []string{"d", "e"}) {
			t.Fatalf("live after rebuild: %v, want d and e", live)
		}
		moves, err := c.Moves(ctx)
		if err != nil || len(moves) != 4 {
			t.Fatalf("moves: %+v, %v", moves, err)
		}
		for _, m := range moves {
			if id := FileID(m.Src); !strings.Contains("abcx", id) || m.Dst != TrashPath(m.Src) {
				t.Fatalf("move %+v", m)
			}
		}
		// Idempotent: the old catalog's marks carry over.
		if st2, err := Rebuild(ctx, c, root, nil); err != nil || st2.Rows != 10 || st2.Replaced != 4 {
			t.Fatalf("second rebuild: %+v, %v", st2, err)
		}
	})
}
