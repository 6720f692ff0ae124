package cli

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/compact"
	"github.com/sluice-dev/sluice/internal/progress"
)

func newCompactCmd() *cobra.Command {
	var (
		lf            lakeFlags
		s3f           s3Flags
		uc            upkeepConfig
		table, tenant string
		targetSize    int64
		maxInputs     int
		maxAttrCols   int
		dryRun        bool
		sweep         bool
		grace         time.Duration
		leaseTTL      time.Duration
		minAge        time.Duration
		pauseBefore   time.Duration
		pauseAfter    time.Duration
	)
	c := &cobra.Command{
		Use:   "compact",
		Short: "Merge the small segments of each lake partition into large sorted files",
		Long: `Merge the small segments of each hour partition into files of about
--target-file-size, sorted by the table's sort key, then sweep the files of
segments replaced more than --grace ago.

Each partition's inputs are swapped for the outputs in one catalog transaction:
queries see either the old files or the new ones. Replaced files stay on disk
until the sweep, so queries already reading them finish. Partitions are taken
under catalog leases, so this is safe while 'sluice run' ingests into the lake
and while other upkeep (another 'sluice compact', 'sluice run' background
upkeep on a shared catalog) works on it: a partition leased by someone else is
skipped.

--min-age leaves partitions whose hour ended less than that long ago (the hour
'sluice run' is still filling) for a later run.

--config takes the lake, catalog, S3 bucket and settings of a 'sluice run'
config: upkeep.compaction.target_file_bytes and min_age, upkeep.sweep_grace,
upkeep.lease_ttl and lake.max_attribute_columns; flags given win.

--dry-run prints the plan (partitions, inputs, rows, bytes) and changes nothing.
The exit code is 1 if any partition failed.`,
		Example: `  sluice compact --lake ./data
  sluice compact --lake ./data --table logs --tenant acme --dry-run
  sluice compact --lake ./data --catalog postgres://sluice@db/sluice --grace 0
  sluice compact --config sluice.yaml --dry-run
  sluice compact --lake ./state --s3-bucket my-lake --s3-prefix prod`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			out, errOut := c.OutOrStdout(), c.ErrOrStderr()
			cfg, err := uc.load(c, &lf)
			if err != nil {
				return err
			}
			if cfg != nil {
				unlessSet(c, "target-file-size", func() {
					if !c.Flags().Changed("target-size") {
						targetSize = int64(cfg.Upkeep.Compaction.TargetFileBytes)
					}
				})
				unlessSet(c, "min-age", func() { minAge = cfg.Upkeep.Compaction.MinAge.D() })
				unlessSet(c, "grace", func() { grace = cfg.Upkeep.SweepGrace.D() })
				unlessSet(c, "lease-ttl", func() { leaseTTL = cfg.Upkeep.LeaseTTL.D() })
				unlessSet(c, "max-attribute-columns", func() { maxAttrCols = cfg.Lake.MaxAttributeColumns })
			}
			switch table {
			case "", lake.TableLogs, lake.TableMetrics, lake.TableTraces, lake.TableIOEvents:
			default:
				return usageError{fmt.Errorf("--table %q: want logs, metrics, traces or io_events", table)}
			}
			if targetSize <= 0 {
				return usageError{fmt.Errorf("--target-file-size %d: want a positive number of bytes", targetSize)}
			}
			if err := checkMaxAttrColumns(maxAttrCols); err != nil {
				return err
			}
			store, err := upkeepStore(ctx, &s3f, &lf, cfg)
			if err != nil {
				return err
			}
			// No lake lock: 'sluice run' may be ingesting; leases and
			// Replace keep upkeep and writers apart.
			cat, err := openExistingCatalog(ctx, &lf)
			if err != nil {
				return err
			}
			defer cat.Close()

			log := slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
			opts := compact.Options{
				TargetBytes: targetSize, MaxInputs: maxInputs, Table: table, Tenant: tenant,
				LeaseTTL: leaseTTL, Logger: log, MaxAttributeColumns: maxAttrCols,
			}
			// Most of the heap is a job's inputs (compressed row groups,
			// sort keys); a soft limit near them keeps the collector's
			// headroom (as much again) off the peak. GOMEMLIMIT wins.
			if os.Getenv("GOMEMLIMIT") == "" {
				debug.SetMemoryLimit(compact.SoftMemoryLimit(opts))
			}
			if pauseBefore > 0 {
				opts.BeforeReplace = func(ctx context.Context, j compact.Job) error {
					fmt.Fprintf(errOut, "sluice: pausing %s before replacing %s\n", pauseBefore, j.Dir())
					select {
					case <-time.After(pauseBefore):
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				}
			}
			if pauseAfter > 0 {
				opts.AfterReplace = func(ctx context.Context, j compact.Job) {
					fmt.Fprintf(errOut, "sluice: pausing %s after replacing %s\n", pauseAfter, j.Dir())
					select {
					case <-time.After(pauseAfter):
					case <-ctx.Done():
					}
				}
			}
			// The bar's totals are every small segment; later passes also
			// re-read earlier outputs, so it may finish before the work.
			if minAge < 0 {
				return usageError{fmt.Errorf("--min-age %s: want 0 or more", minAge)}
			}
			cutoff := time.Now().Add(-minAge)
			young := func(j compact.Job) bool {
				return minAge > 0 && catalog.PartitionStart(j.Day, j.Hour).Add(time.Hour).After(cutoff)
			}
			all, err := compact.Plan(ctx, cat, withMaxInputs(opts, math.MaxInt32))
			if err != nil {
				return err
			}
			all = slices.DeleteFunc(all, young)
			var allFiles, allBytes int64
			for _, j := range all {
				for _, s := range j.Inputs {
					allFiles++
					allBytes += s.Bytes
				}
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			header := false
			if !dryRun {
				opts.Progress = progress.New(errOut, "compact", allFiles, allBytes)
			}
			var jobsDone, skipped, failed int
			// What the run replaced and what stands now: a later pass may
			// merge an earlier pass's outputs again.
			var filesIn int
			var bytesIn int64
			live := map[string]catalog.Segment{} // this run's outputs not merged again
			var planJobs int
			var planFiles, planBytes, planRows int64
			parts := map[string]bool{}
			stuck := map[string]bool{} // partitions a job did not shrink: not retried
			// A job takes at most --max-inputs segments, so a partition with
			// more needs several passes; each pass re-plans.
			passes := 0
			for pass := 0; pass < maxPasses && ctx.Err() == nil; pass++ {
				passes = pass + 1
				jobs, err := compact.Plan(ctx, cat, opts)
				if err != nil {
					return err
				}
				jobs = slices.DeleteFunc(jobs, func(j compact.Job) bool { return stuck[j.Dir()] || young(j) })
				progressed := false
				for _, j := range jobs {
					var jobRows, jobBytes int64
					for _, s := range j.Inputs {
						jobRows += s.Rows
						jobBytes += s.Bytes
					}
					result := "would compact"
					if dryRun {
						planJobs++
						planFiles += int64(len(j.Inputs))
						planBytes += jobBytes
						planRows += jobRows
					} else {
						res, err := compact.Run(ctx, cat, store, j, opts)
						switch {
						case err != nil:
							failed++
							stuck[j.Dir()] = true
							result = "failed"
							fmt.Fprintf(errOut, "sluice: %v\n", err)
						case res.Skipped:
							skipped++
							stuck[j.Dir()] = true
							result = "skipped (leased by another process)"
						default:
							jobsDone++
							progressed = true
							parts[j.Dir()] = true
							if len(res.Outputs) >= len(j.Inputs) {
								stuck[j.Dir()] = true
							}
							for _, in := range j.Inputs {
								if _, ours := live[in.Path]; ours {
									delete(live, in.Path)
								} else {
									filesIn++
									bytesIn += in.Bytes
								}
							}
							for _, o := range res.Outputs {
								live[o.Path] = o
							}
							result = fmt.Sprintf("%d files, %s", len(res.Outputs), humanBytes(res.BytesOut))
						}
					}
					if !header {
						header = true
						fmt.Fprintln(tw, "TABLE\tTENANT\tPARTITION\tINPUTS\tROWS\tBYTES\tRESULT")
					}
					fmt.Fprintf(tw, "%s\t%s\tdt=%s/hour=%02d\t%d\t%d\t%s\t%s\n", j.Table, j.Tenant, j.Day, j.Hour,
						len(j.Inputs), jobRows, humanBytes(jobBytes), result)
					if ctx.Err() != nil {
						break
					}
				}
				if dryRun || !progressed {
					break
				}
			}
			opts.Progress.Done()
			tw.Flush()
			if dryRun {
				fmt.Fprintf(out, "plan: %d partitions, %d segments, %d rows, %s (first pass; a partition with more than --max-inputs small segments takes more)\n",
					planJobs, planFiles, planRows, humanBytes(planBytes))
			} else {
				var rows, bytesOut int64
				for _, o := range live {
					rows += o.Rows
					bytesOut += o.Bytes
				}
				fmt.Fprintf(out, "compacted %d partitions: %d files, %s into %d files, %s (%d rows; %d jobs in %d passes)",
					len(parts), filesIn, humanBytes(bytesIn), len(live), humanBytes(bytesOut), rows, jobsDone, passes)
				if skipped > 0 {
					fmt.Fprintf(out, "; %d skipped (leased)", skipped)
				}
				if failed > 0 {
					fmt.Fprintf(out, "; %d failed", failed)
				}
				fmt.Fprintln(out)
			}
			if sweep && ctx.Err() == nil {
				sr, err := compact.Sweep(ctx, cat, store, compact.SweepOptions{
					Grace: graceOrNone(grace), Table: table, Tenant: tenant, DryRun: dryRun, Logger: log,
				})
				if err != nil {
					fmt.Fprintf(errOut, "sluice: %v\n", err)
					failed++
				} else {
					verb := "swept"
					if dryRun {
						verb = "would sweep"
					}
					fmt.Fprintf(out, "%s %d replaced files, %s; %d replaced less than %s ago kept", verb, sr.Files, humanBytes(sr.Bytes), sr.Waiting, grace)
					switch {
					case sr.Uncommitted > 0 && dryRun:
						fmt.Fprintf(out, "; %d uncommitted files of unfinished runs (deleted once no one holds their lease)", sr.Uncommitted)
					case sr.Uncommitted > 0:
						fmt.Fprintf(out, "; deleted %d uncommitted files of killed runs", sr.Uncommitted)
					}
					if sr.UncommittedLeased > 0 {
						fmt.Fprintf(out, "; %d uncommitted files under a held lease kept", sr.UncommittedLeased)
					}
					if sr.Moved > 0 {
						fmt.Fprintf(out, "; finished %d file moves of interrupted swaps", sr.Moved)
					}
					if sr.Staged > 0 {
						fmt.Fprintf(out, "; deleted %d staged files no run will swap in", sr.Staged)
					}
					fmt.Fprintln(out)
				}
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if failed > 0 {
				return errPartial
			}
			return nil
		},
	}
	lf.register(c)
	s3f.register(c)
	uc.register(c, "upkeep.compaction, sweep_grace, lease_ttl, lake.max_attribute_columns")
	f := c.Flags()
	f.StringVar(&table, "table", "", "only this table (logs, metrics, traces, io_events)")
	f.StringVar(&tenant, "tenant", "", "only this tenant")
	f.Int64Var(&targetSize, "target-file-size", compact.DefaultTargetBytes, "segments this big are left alone; outputs roll at about this many bytes")
	f.Int64Var(&targetSize, "target-size", compact.DefaultTargetBytes, "alias of --target-file-size")
	_ = f.MarkHidden("target-size")
	f.IntVar(&maxInputs, "max-inputs", compact.DefaultMaxInputs, "most segments merged into one partition's output per run (bounds memory: one row group per input)")
	registerMaxAttrColumns(c, &maxAttrCols)
	f.DurationVar(&minAge, "min-age", 0, "only partitions whose hour ended at least this long ago (0: every hour, the current one too)")
	f.BoolVar(&dryRun, "dry-run", false, "print the plan and change nothing")
	f.BoolVar(&sweep, "sweep", true, "after compacting, delete the files of segments replaced more than --grace ago")
	f.DurationVar(&grace, "grace", compact.DefaultGrace, "keep replaced files this long for queries in flight (0: delete at once)")
	f.DurationVar(&leaseTTL, "lease-ttl", compact.DefaultLeaseTTL, "partition lease, renewed while a partition is merged; a killed run blocks its partitions (and the deletion of its files) this long")
	// For crash tests: hold each job between its merge and its Replace.
	f.DurationVar(&pauseBefore, "debug-pause-before-replace", 0, "")
	_ = f.MarkHidden("debug-pause-before-replace")
	// For crash tests: hold each job between its Replace and its file moves.
	f.DurationVar(&pauseAfter, "debug-pause-after-replace", 0, "")
	_ = f.MarkHidden("debug-pause-after-replace")
	return c
}

// registerMaxAttrColumns adds --max-attribute-columns (compact, rollup):
// the cap on an output file's attribute columns that 'sluice run' takes
// from lake.max_attribute_columns.
func registerMaxAttrColumns(c *cobra.Command, p *int) {
	c.Flags().IntVar(p, "max-attribute-columns", lake.DefaultMaxAttributeColumns,
		fmt.Sprintf("most attribute columns per output file, 1 to %d; the least used attributes past it go to the overflow columns (as lake.max_attribute_columns)", config.MaxAttributeColumnsLimit))
}

func checkMaxAttrColumns(n int) error {
	if n < 1 || n > config.MaxAttributeColumnsLimit {
		return usageError{fmt.Errorf("--max-attribute-columns %d: want 1 to %d (as lake.max_attribute_columns)", n, config.MaxAttributeColumnsLimit)}
	}
	return nil
}

// maxPasses bounds the re-planning of one command run.
const maxPasses = 64

func withMaxInputs(o compact.Options, n int) compact.Options {
	o.MaxInputs = n
	return o
}

// graceOrNone maps the flag's 0 ("at once") to Sweep's "no grace".
func graceOrNone(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
