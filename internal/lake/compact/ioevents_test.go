package compact

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/signal"
)

// ioRows returns every row of the live io_events files of e, each as
// "column=value ..." over all the file's columns, sorted, and the files.
func ioRows(t *testing.T, e *lakeEnv) ([]string, []catalog.Segment) {
	t.Helper()
	segs, err := e.cat.List(context.Background(), catalog.Filter{Table: lake.TableIOEvents})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range segs {
		f, err := lake.OpenObject(e.store, s.Path)
		if err != nil {
			t.Fatal(err)
		}
		pf := f.Parquet()
		cols := pf.Schema().Columns()
		if len(cols) != 16 {
			t.Errorf("%s: %d columns, want io_events' 16", s.Path, len(cols))
		}
		for _, rg := range pf.RowGroups() {
			rr := rg.Rows()
			buf := make([]parquet.Row, 64)
			for {
				n, err := rr.ReadRows(buf)
				for _, row := range buf[:n] {
					var b strings.Builder
					for _, v := range row {
						fmt.Fprintf(&b, "%s=", strings.Join(cols[v.Column()], "."))
						if v.IsNull() {
							b.WriteString("null ")
						} else {
							fmt.Fprintf(&b, "%s ", v.String())
						}
					}
					out = append(out, b.String())
				}
				if err != nil {
					break
				}
			}
			_ = rr.Close()
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(out)
	return out, segs
}

// TestCompactIOEvents: io_events files of one hour (sluice trace --record
// flushing every so often) are planned like the raw tables and merged by
// columns into one file with exactly the same rows and every column,
// in time order, with io_events' footer. The tracer writes rows in the
// order it saw them (time order per CPU only): with inputs not in time
// order every row is still kept exactly once.
func TestCompactIOEvents(t *testing.T) {
	t.Run("sorted", func(t *testing.T) { testCompactIOEvents(t, false) })
	t.Run("unsorted", func(t *testing.T) { testCompactIOEvents(t, true) })
}

func testCompactIOEvents(t *testing.T, unsorted bool) {
	ctx := context.Background()
	e := newEnv(t)
	var segs []lake.Segment
	w, err := lake.NewIOWriter(lake.Options{Store: e.store}, "box", func(s lake.Segment) error {
		segs = append(segs, s)
		return e.cat.AddSegments(ctx, s.CatalogRow())
	})
	if err != nil {
		t.Fatal(err)
	}
	h := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	for file := range 3 {
		b := &signal.IOEvents{SyscallNames: []string{"", "read", "rename", "openat"}}
		for k := range 50 {
			i := k
			if unsorted && k%10 < 5 {
				i = k + 4 - 2*(k%10) // rows 0..4 of every ten backwards
			}
			ev := signal.IOEvent{
				// Files interleave in time, so the merge must order them.
				Time: h + int64(i*3+file)*int64(time.Millisecond), Duration: int64(1000 + i), Gap: int64(file * i),
				PID: uint32(100 + file), TID: uint32(200 + i%4), Comm: b.AppendString(fmt.Sprintf("app%d", file)),
				Syscall: uint16(1 + i%3), FD: int32(i%5 - 1), Ret: int64(i - 2), Bytes: int64(i * 4096),
				Flags: uint64(i), Cgroup: uint64(9000 + file),
			}
			if i < 2 {
				ev.Errno = int32(2 - i)
			}
			if i%4 != 0 { // some rows without a path
				ev.Path = b.AppendString(fmt.Sprintf("/data/f%d", i%7))
			}
			if i%3 == 1 {
				ev.OldPath = b.AppendString("/data/old")
			}
			b.Append(&ev)
		}
		if err := w.Write("acme", b); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if len(segs) != 3 {
		t.Fatalf("%d io_events files written, want 3", len(segs))
	}
	before, _ := ioRows(t, e)
	if len(before) != 150 {
		t.Fatalf("%d rows before, want 150", len(before))
	}

	jobs, err := Plan(ctx, e.cat, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].Table != lake.TableIOEvents || len(jobs[0].Inputs) != 3 {
		t.Fatalf("jobs %+v, want one io_events job of 3 inputs", jobs)
	}
	res, err := Run(ctx, e.cat, e.store, jobs[0], Options{})
	if err != nil || res.Skipped {
		t.Fatalf("run: %+v %v", res, err)
	}
	after, live := ioRows(t, e)
	if len(live) != 1 {
		t.Fatalf("%d live io_events files after compaction, want 1", len(live))
	}
	if !slices.Equal(before, after) {
		t.Fatalf("rows differ after compaction:\nbefore %d rows, e.g. %q\nafter %d rows, e.g. %q", len(before), before[0], len(after), after[0])
	}
	out := live[0]
	if out.Rows != 150 || out.Level != 1 || out.MinTime != h || out.MaxTime != h+int64(149*time.Millisecond) {
		t.Errorf("output segment %+v", out)
	}
	f, err := lake.OpenObject(e.store, out.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pf := f.Parquet()
	if v, _ := pf.Lookup(lake.MetaSort); v != lake.IOSortKey {
		t.Errorf("footer sort %q, want %q", v, lake.IOSortKey)
	}
	if v, _ := pf.Lookup(lake.MetaTable); v != lake.TableIOEvents {
		t.Errorf("footer table %q", v)
	}
	// The output is in time order: the inputs were merged, not appended.
	var times []int64
	tc, _ := pf.Schema().Lookup("time")
	for _, rg := range pf.RowGroups() {
		rr := rg.Rows()
		buf := make([]parquet.Row, 64)
		for {
			n, err := rr.ReadRows(buf)
			for _, row := range buf[:n] {
				times = append(times, row[tc.ColumnIndex].Int64())
			}
			if err != nil {
				break
			}
		}
		_ = rr.Close()
	}
	if len(times) != 150 || !unsorted && !slices.IsSorted(times) {
		t.Errorf("compacted io_events not in time order: %v", times[:10])
	}
	// Nothing left to do.
	if jobs, err := Plan(ctx, e.cat, Options{}); err != nil || len(jobs) != 0 {
		t.Errorf("plan after compaction: %+v %v", jobs, err)
	}
}
