package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/internal/ingest"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/pipeline"
)

// segmentCounter totals the segments a writer committed.
type segmentCounter struct {
	n, rows, bytes int64
}

type openedLake struct {
	lock     io.Closer
	cat      *catalog.Catalog
	writer   *lake.Writer
	segments *segmentCounter
}

func (l *openedLake) closeCatalog() {
	l.cat.Close()
	l.lock.Close()
}

// openLake opens the catalog and a lake writer whose segments are committed
// to it: a catalog row is added only once its file is in place.
func openLake(ctx context.Context, lf *lakeFlags, opts lake.Options) (*openedLake, error) {
	lock, err := pipeline.LockLake(lf.root)
	if err != nil {
		return nil, err
	}
	cat, err := catalog.Open(ctx, lf.catalogDSN())
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	opts.Root = lf.root
	counter := &segmentCounter{}
	w, err := lake.NewWriter(opts, func(seg lake.Segment) error {
		if err := cat.AddSegments(ctx, seg.CatalogRow()); err != nil {
			return err
		}
		counter.n++
		counter.rows += seg.Rows
		counter.bytes += seg.Bytes
		return nil
	})
	if err != nil {
		cat.Close()
		lock.Close()
		return nil, err
	}
	return &openedLake{lock: lock, cat: cat, writer: w, segments: counter}, nil
}

func newLakeCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "lake",
		Short: "Inspect and repair the lake's catalog",
	}
	c.AddCommand(newLakeLsCmd(), newLakeRebuildCmd(), newLakeQuarantineCmd())
	return c
}

func newLakeQuarantineCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "quarantine",
		Short: "Records the lake could not write (<lake>/_quarantine)",
	}
	c.AddCommand(newLakeQuarantineLsCmd())
	return c
}

func newLakeQuarantineLsCmd() *cobra.Command {
	var (
		lf lakeFlags
		sf s3Flags
	)
	c := &cobra.Command{
		Use:   "ls",
		Short: "List quarantined records",
		Long: `List the queue records that sluice run could not write into the lake and moved to
<lake>/_quarantine/<table>/<tenant>/ instead: when, table, tenant, queue position,
records, bytes, the reason and the path of the original OTLP request (.binpb, which
sluice ingest can replay once the cause is fixed). docs/design/run.md explains when
a record is quarantined.`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			store, err := sf.store(c.Context())
			if err != nil {
				return err
			}
			if store == nil {
				if _, err := os.Stat(lf.root); err != nil {
					return fmt.Errorf("lake %q: %w", lf.root, err)
				}
				store = lake.NewLocalStore(lf.root)
			}
			entries, err := lake.ListQuarantine(store)
			if err != nil {
				return err
			}
			out := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			defer out.Flush()
			fmt.Fprintln(out, "TIME\tTABLE\tTENANT\tPOSITION\tRECORDS\tBYTES\tPATH\tREASON")
			for _, e := range entries {
				when := "-"
				if !e.Time.IsZero() {
					when = e.Time.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(out, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", when, e.Table, e.Tenant, e.Position, e.Records,
					humanBytes(int64(e.Bytes)), e.Body, e.Reason)
			}
			fmt.Fprintf(out, "%d quarantined\t\t\t\t\t\t\t\n", len(entries))
			return nil
		},
	}
	lf.register(c)
	sf.register(c)
	return c
}

func newLakeLsCmd() *cobra.Command {
	var (
		lf             lakeFlags
		table, tenant  string
		summary, all   bool
		paths          bool
		fromStr, toStr string
	)
	c := &cobra.Command{
		Use:   "ls",
		Short: "List the segments in the catalog",
		Long: `List the lake's segments: table, tenant, partition, rows, bytes and time range.
With --summary, one line per partition instead.`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			cat, err := openExistingCatalog(ctx, &lf)
			if err != nil {
				return err
			}
			defer cat.Close()
			out := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			defer out.Flush()
			if summary {
				parts, err := cat.Summary(ctx)
				if err != nil {
					return err
				}
				fmt.Fprintln(out, "TABLE\tTENANT\tPARTITION\tSEGMENTS\tROWS\tBYTES\tFROM\tTO")
				for _, p := range parts {
					if (table != "" && p.Table != table) || (tenant != "" && p.Tenant != tenant) {
						continue
					}
					fmt.Fprintf(out, "%s\t%s\tdt=%s/hour=%02d\t%d\t%d\t%s\t%s\t%s\n", p.Table, p.Tenant, p.Day, p.Hour,
						p.Segments, p.Rows, humanBytes(p.Bytes), fmtTime(p.MinTime), fmtTime(p.MaxTime))
				}
				return nil
			}
			from, to, err := parseRange(fromStr, toStr)
			if err != nil {
				return usageError{err}
			}
			segs, err := cat.List(ctx, catalog.Filter{Table: table, Tenant: tenant, From: from, To: to, IncludeReplaced: all})
			if err != nil {
				return err
			}
			if paths {
				// File paths alone, for engines reading the live files directly
				// (docs/query.md): exact even while a swap moves files or on S3.
				return printPaths(ctx, c.OutOrStdout(), cat, lf.root, segs)
			}
			printSegments(out, segs, all)
			return nil
		},
	}
	lf.register(c)
	f := c.Flags()
	f.StringVar(&table, "table", "", "only this table (logs, metrics, traces)")
	f.StringVar(&tenant, "tenant", "", "only this tenant")
	f.BoolVar(&summary, "summary", false, "one line per partition")
	f.BoolVar(&all, "all", false, "include segments replaced (by compaction, rollups or retention) and awaiting the sweeper, marked in a REPLACED column and left out of the total")
	f.BoolVar(&paths, "paths", false, "print only the segments' file paths (<lake>/<path>), one per line")
	f.StringVar(&fromStr, "from", "", "only segments overlapping this RFC 3339 time or later")
	f.StringVar(&toStr, "to", "", "only segments overlapping this RFC 3339 time or earlier")
	return c
}

func newLakeRebuildCmd() *cobra.Command {
	var lf lakeFlags
	c := &cobra.Command{
		Use:   "rebuild-catalog",
		Short: "Recreate the catalog from the lake's Parquet files",
		Long: `Recreate the catalog from the Parquet files alone, for when it was lost or damaged.
Each file's partition comes from its path and its row count, time range and
level from its footer. Files that cannot be read are reported and left out.
Files that a compaction or rollup output replaced, as its footer's lineage
(sluice.replaces) says, are catalogued as replaced, moved to _trash/ and not
counted; _staging/ and _trash/ are not read.`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			if _, err := os.Stat(lf.root); err != nil {
				return usageError{fmt.Errorf("lake root: %w", err)}
			}
			cat, err := catalog.Open(ctx, lf.catalogDSN())
			if err != nil {
				return fmt.Errorf("open catalog: %w", err)
			}
			defer cat.Close()
			bar := newProgressLine(c.ErrOrStderr(), "auto")
			progress := func(done, total int) {}
			start := time.Now()
			if bar != nil {
				progress = func(done, total int) {
					bar.update(ingest.Progress{FilesDone: done, FilesTotal: total, Elapsed: time.Since(start)})
				}
			}
			st, err := catalog.Rebuild(ctx, cat, lf.root, progress)
			if bar != nil {
				bar.clear()
			}
			if err != nil {
				return err
			}
			for _, f := range st.Failed {
				fmt.Fprintf(c.ErrOrStderr(), "sluice: skipped %s: %v\n", f.Path, f.Err)
			}
			fmt.Fprintf(c.OutOrStdout(), "catalog rebuilt from %d files: %d live segments, %d rows, %s\n",
				st.Files, st.Segments-st.Replaced, st.Rows, humanBytes(st.Bytes))
			if st.Replaced > 0 {
				// Files that a newer file's lineage names: out of the Hive
				// tree now, deleted by the sweeper after its grace period.
				moved, err := lake.ApplyMoves(ctx, cat, lake.NewLocalStore(lf.root), nil, nil)
				fmt.Fprintf(c.OutOrStdout(), "%d segments replaced by compaction or rollups (not counted; %d moved to _trash/ for the sweeper)\n", st.Replaced, moved)
				if err != nil {
					return err
				}
			}
			if st.Intended > 0 {
				fmt.Fprintf(c.OutOrStdout(), "left out %d uncommitted outputs of unfinished compactions or rollups (the next run or sweep deletes them)\n", st.Intended)
			}
			if len(st.Failed) > 0 {
				return errPartial
			}
			return nil
		},
	}
	lf.register(c)
	return c
}

// printPaths prints the file path of each segment under root. A live
// segment whose swap committed but whose file a killed run left staged
// (a pending move, done by the next run or sweep) is printed at its
// staging path while the file is there, so the list stays readable.
func printPaths(ctx context.Context, out io.Writer, cat *catalog.Catalog, root string, segs []catalog.Segment) error {
	moves, err := cat.Moves(ctx)
	if err != nil {
		return err
	}
	staged := map[string]string{}
	for _, m := range moves {
		if strings.HasPrefix(m.Src, catalog.StagingDir+"/") {
			staged[m.Dst] = m.Src
		}
	}
	local := func(p string) string { return filepath.Join(root, filepath.FromSlash(p)) }
	for _, s := range segs {
		p := local(s.Path)
		if src, ok := staged[s.Path]; ok && s.ReplacedAt.IsZero() {
			if _, err := os.Stat(p); err != nil {
				if _, err := os.Stat(local(src)); err == nil {
					p = local(src)
				}
			}
		}
		fmt.Fprintln(out, p)
	}
	return nil
}

// printSegments writes one line per segment, then the total of the live
// ones. With all, a REPLACED column gives the time each replaced segment
// was replaced ("-" for live ones), and a line before the total sums the
// replaced ones, which the total leaves out: their rows are in live
// segments too.
func printSegments(out io.Writer, segs []catalog.Segment, all bool) {
	if all {
		fmt.Fprintln(out, "TABLE\tTENANT\tPARTITION\tLEVEL\tROWS\tBYTES\tFROM\tTO\tREPLACED\tPATH")
	} else {
		fmt.Fprintln(out, "TABLE\tTENANT\tPARTITION\tLEVEL\tROWS\tBYTES\tFROM\tTO\tPATH")
	}
	var n, rows, bytes, rn, rrows, rbytes int64
	for _, s := range segs {
		replaced := "-"
		if s.ReplacedAt.IsZero() {
			n, rows, bytes = n+1, rows+s.Rows, bytes+s.Bytes
		} else {
			rn, rrows, rbytes = rn+1, rrows+s.Rows, rbytes+s.Bytes
			replaced = fmtTime(s.ReplacedAt.UnixNano())
		}
		fmt.Fprintf(out, "%s\t%s\tdt=%s/hour=%02d\t%d\t%d\t%s\t%s\t%s\t", s.Table, s.Tenant, s.Day, s.Hour,
			s.Level, s.Rows, humanBytes(s.Bytes), fmtTime(s.MinTime), fmtTime(s.MaxTime))
		if all {
			fmt.Fprintf(out, "%s\t", replaced)
		}
		fmt.Fprintln(out, s.Path)
	}
	if all {
		fmt.Fprintf(out, "%d replaced segments (not in the total)\t\t\t\t%d\t%s\t\t\t\t\n", rn, rrows, humanBytes(rbytes))
		fmt.Fprintf(out, "%d segments\t\t\t\t%d\t%s\t\t\t\t\n", n, rows, humanBytes(bytes))
		return
	}
	fmt.Fprintf(out, "%d segments\t\t\t\t%d\t%s\t\t\t\n", n, rows, humanBytes(bytes))
}

// openExistingCatalog opens the catalog of a lake that must already exist,
// so that a typo in --lake is an error rather than a new empty lake.
func openExistingCatalog(ctx context.Context, lf *lakeFlags) (*catalog.Catalog, error) {
	if lf.catalog == "" {
		if _, err := os.Stat(lf.root); err != nil {
			return nil, usageError{fmt.Errorf("lake root: %w", err)}
		}
	}
	cat, err := catalog.Open(ctx, lf.catalogDSN())
	if err != nil {
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	return cat, nil
}

func fmtTime(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return time.Unix(0, ns).UTC().Format("2006-01-02T15:04:05Z")
}

func parseRange(from, to string) (int64, int64, error) {
	var f, t int64
	if from != "" {
		tm, err := time.Parse(time.RFC3339Nano, from)
		if err != nil {
			return 0, 0, fmt.Errorf("--from: %w", err)
		}
		f = tm.UnixNano()
	}
	if to != "" {
		tm, err := time.Parse(time.RFC3339Nano, to)
		if err != nil {
			return 0, 0, fmt.Errorf("--to: %w", err)
		}
		t = tm.UnixNano()
	}
	if f != 0 && t != 0 && t < f {
		return 0, 0, fmt.Errorf("--to %s is before --from %s", to, from)
	}
	return f, t, nil
}
