package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/compact"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/waittest"
)

var quiet = slog.New(slog.DiscardHandler)

// writeHour writes parts segments of perPart log records each into the
// hour starting at h for tenant "a", with real files, and catalogs them.
func writeHour(t *testing.T, cat *catalog.Catalog, store lake.Store, h time.Time, parts, perPart int) {
	t.Helper()
	for p := range parts {
		ld := plog.NewLogs()
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr("service.name", "svc")
		sl := rl.ScopeLogs().AppendEmpty()
		for i := range perPart {
			r := sl.LogRecords().AppendEmpty()
			r.SetTimestamp(pcommon.NewTimestampFromTime(h.Add(time.Duration(p*perPart+i) * time.Second)))
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
		w, err := lake.NewWriter(lake.Options{Store: store, Now: func() time.Time { return h.Add(2 * time.Hour) }},
			func(s lake.Segment) error { segs = append(segs, s.CatalogRow()); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteLogs("a", &b); err != nil {
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

func storeFiles(t *testing.T, store lake.Store) []string {
	t.Helper()
	var out []string
	if err := store.Walk("", func(p string, _ int64) error {
		if strings.HasSuffix(p, ".parquet") {
			out = append(out, p)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// partitionState returns the live rows of the partition of hour h and
// checks that every file in the store is catalogued (live or replaced):
// nothing orphaned, nothing catalogued without its file.
func partitionState(t *testing.T, cat *catalog.Catalog, store lake.Store, h time.Time) (liveRows int64, liveSegs int) {
	t.Helper()
	all, err := cat.List(context.Background(), catalog.Filter{IncludeReplaced: true})
	if err != nil {
		t.Fatal(err)
	}
	var known []string
	for _, s := range all {
		known = append(known, s.Path)
		if s.ReplacedAt.IsZero() && s.Day == h.Format(time.DateOnly) && s.Hour == h.Hour() {
			liveRows += s.Rows
			liveSegs++
		}
	}
	slices.Sort(known)
	files := storeFiles(t, store)
	for i, f := range files {
		// A compaction's swap moved its replaced inputs to the trash.
		files[i] = strings.TrimPrefix(f, catalog.TrashDir+"/")
	}
	slices.Sort(files)
	if !slices.Equal(files, known) {
		t.Fatalf("files and catalog differ:\nfiles   %v\ncatalog %v", files, known)
	}
	return liveRows, liveSegs
}

// TestCompactionAfterRetentionIsStale: retention removes a partition
// between compaction's plan and its swap; compaction's Replace fails with
// ErrStale, its output files are gone, and nothing is resurrected.
func TestCompactionAfterRetentionIsStale(t *testing.T) {
	forEachCatalog(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		cat := openCat(t, dsn)
		store := lake.NewLocalStore(filepath.Join(t.TempDir(), "lake"))
		writeHour(t, cat, store, base, 3, 50)
		jobs, err := compact.Plan(ctx, cat, compact.Options{})
		if err != nil || len(jobs) != 1 || len(jobs[0].Inputs) != 3 {
			t.Fatalf("compaction plan: %+v %v", jobs, err)
		}
		parts, err := Plan(ctx, cat, Rules{Keep: map[string]time.Duration{"logs": time.Hour}}, base.Add(3*time.Hour))
		if err != nil || len(parts) != 1 {
			t.Fatalf("retention plan: %v %v", dirs(parts), err)
		}
		if res, err := Apply(ctx, cat, parts[0], Options{}); err != nil || len(res.Removed) != 3 || res.Rows != 150 {
			t.Fatalf("apply: %+v %v", res, err)
		}
		res, err := compact.Run(ctx, cat, store, jobs[0], compact.Options{Logger: quiet})
		if !errors.Is(err, catalog.ErrStale) {
			t.Fatalf("compaction after retention: %+v, err %v; want ErrStale", res, err)
		}
		if rows, segs := partitionState(t, cat, store, base); rows != 0 || segs != 0 {
			t.Fatalf("%d live rows in %d segments after retention", rows, segs)
		}
	})
}

// TestRetentionRacesCompaction runs compaction and retention of the same
// partition at once, from two catalog handles (two processes), many times.
// Exactly one of them decides the partition's fate: it ends either empty
// (retention won, or ran after compaction) or with exactly its rows
// (retention skipped); never duplicated, never partly removed, and every
// file on disk is catalogued.
func TestRetentionRacesCompaction(t *testing.T) {
	forEachCatalog(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		c1, c2 := openCat(t, dsn), openCat(t, dsn)
		store := lake.NewLocalStore(filepath.Join(t.TempDir(), "lake"))
		const rounds, perPart, nParts = 12, 40, 3
		outcomes := map[string]int{}
		for r := range rounds {
			h := base.Add(time.Duration(r) * time.Hour)
			writeHour(t, c1, store, h, nParts, perPart)
			jobs, err := compact.Plan(ctx, c1, compact.Options{})
			if err != nil || len(jobs) != 1 {
				t.Fatalf("round %d: compaction plan %d jobs, %v", r, len(jobs), err)
			}
			parts, err := Plan(ctx, c2, Rules{Keep: map[string]time.Duration{"logs": time.Hour}}, h.Add(3*time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(parts, func(p Partition) bool { return p.Hour == h.Hour() })
			if i < 0 {
				t.Fatalf("round %d: hour not planned: %v", r, dirs(parts))
			}
			var (
				wg     sync.WaitGroup
				cres   compact.Result
				cerr   error
				rres   Result
				rerr   error
				cstart = make(chan struct{})
			)
			wg.Go(func() {
				<-cstart
				cres, cerr = compact.Run(ctx, c1, store, jobs[0], compact.Options{Owner: "compactor", Logger: quiet})
			})
			wg.Go(func() {
				<-cstart
				if r%2 == 1 {
					time.Sleep(time.Duration(r) * time.Millisecond) // vary who gets there first
				}
				rres, rerr = Apply(ctx, c2, parts[i], Options{Owner: "retention"})
			})
			close(cstart)
			waittest.Wait(t, &wg, "retention and compaction")
			if rerr != nil {
				t.Fatalf("round %d: retention: %v", r, rerr)
			}
			if cerr != nil && !errors.Is(cerr, catalog.ErrStale) {
				t.Fatalf("round %d: compaction: %v", r, cerr)
			}
			rows, segs := partitionState(t, c1, store, h)
			switch {
			case rres.Skipped:
				// Compaction held the lease: it committed; retention did nothing.
				if cerr != nil || cres.Skipped || rows != nParts*perPart || segs != len(cres.Outputs) {
					t.Fatalf("round %d: retention skipped but partition has %d rows in %d segments (compaction %+v, %v)", r, rows, segs, cres, cerr)
				}
				outcomes["compaction only"]++
			case cerr != nil:
				// Retention swapped first; compaction's Replace was stale.
				if rows != 0 || len(rres.Removed) != nParts {
					t.Fatalf("round %d: stale compaction but %d rows live, retention removed %d", r, rows, len(rres.Removed))
				}
				outcomes["retention, compaction stale"]++
			case cres.Skipped:
				if rows != 0 || rres.Rows != nParts*perPart {
					t.Fatalf("round %d: compaction skipped but %d rows live, retention removed %d rows", r, rows, rres.Rows)
				}
				outcomes["retention only"]++
			default:
				// Both ran, one after the other: compaction first, then
				// retention removed its output.
				if rows != 0 || rres.Rows != nParts*perPart || len(rres.Removed) != len(cres.Outputs) {
					t.Fatalf("round %d: both ran, %d rows live, retention removed %+v, compaction %+v", r, rows, rres, cres)
				}
				outcomes["compaction then retention"]++
			}
		}
		t.Logf("outcomes: %v", outcomes)
	})
}
