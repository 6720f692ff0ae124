package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

func lsSegment(name string, rows int64) catalog.Segment {
	start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	return catalog.Segment{
		Table: "logs", Tenant: "acme", Day: "2025-06-01", Hour: 12,
		Path:    catalog.PartitionDir("logs", "acme", "2025-06-01", 12) + "/" + name + ".parquet",
		MinTime: start.UnixNano(), MaxTime: start.Add(time.Minute).UnixNano(),
		Rows: rows, Bytes: 1000, SchemaHash: "x",
	}
}

// TestLakeLsAllMarksReplaced: `lake ls --all` marks replaced segments
// (REPLACED column with the time) and totals only the live ones, with the
// replaced ones summed on a line of their own; without --all the listing
// and its total are the live segments.
func TestLakeLsAllMarksReplaced(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.AddSegments(ctx, lsSegment("a", 100), lsSegment("b", 150)); err != nil {
		t.Fatal(err)
	}
	segs, err := cat.List(ctx, catalog.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	// A compaction: a and b replaced by c with their 250 rows.
	if err := cat.Replace(ctx, []int64{segs[0].ID, segs[1].ID}, []catalog.Segment{lsSegment("c", 250)}); err != nil {
		t.Fatal(err)
	}
	cat.Close()

	ls := func(args ...string) []string {
		var out, errOut bytes.Buffer
		if code := Main(append([]string{"lake", "ls", "--lake", dir}, args...), nil, &out, &errOut); code != 0 {
			t.Fatalf("lake ls %v: exit %d: %s", args, code, errOut.String())
		}
		return strings.Split(strings.TrimSpace(out.String()), "\n")
	}
	all := ls("--all")
	if len(all) != 6 || !strings.Contains(all[0], "REPLACED") {
		t.Fatalf("lake ls --all:\n%s", strings.Join(all, "\n"))
	}
	for _, line := range all[1:4] {
		f := strings.Fields(line)
		mark := f[len(f)-2] // the REPLACED column
		replaced := mark != "-"
		if wantReplaced := !strings.HasSuffix(line, "/c.parquet"); replaced != wantReplaced {
			t.Fatalf("replaced mark wrong (%v) on %q", replaced, line)
		}
		if replaced {
			if _, err := time.Parse(time.RFC3339, mark); err != nil {
				t.Fatalf("REPLACED is not a time on %q", line)
			}
		}
	}
	if f := strings.Fields(all[4]); f[0] != "2" || f[1] != "replaced" || !strings.Contains(all[4], " 250 ") {
		t.Fatalf("replaced total line %q", all[4])
	}
	if f := strings.Fields(all[5]); f[0] != "1" || f[1] != "segments" || f[2] != "250" {
		t.Fatalf("total line %q: want 1 live segment of 250 rows", all[5])
	}
	live := ls()
	if len(live) != 3 || strings.Contains(live[0], "REPLACED") {
		t.Fatalf("lake ls:\n%s", strings.Join(live, "\n"))
	}
	if f := strings.Fields(live[2]); f[0] != "1" || f[2] != "250" {
		t.Fatalf("total line %q", live[2])
	}
}
