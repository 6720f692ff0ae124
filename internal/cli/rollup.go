package cli

import (
	"fmt"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/rollup"
	"github.com/sluice-dev/sluice/internal/progress"
)

func newRollupCmd() *cobra.Command {
	var (
		lf       lakeFlags
		s3f      s3Flags
		uc       upkeepConfig
		tiers    string
		tenant   string
		dryRun   bool
		minAge   time.Duration
		leaseTTL time.Duration
		maxCols  int
	)
	c := &cobra.Command{
		Use:   "rollup",
		Short: "Roll raw metric points up into the metrics_rollup table (1m, 5m, 1h windows)",
		Long: `Aggregate each tenant's raw metrics hour into the metrics_rollup table: per
series and UTC-aligned window of each tier, count, sum, min, max, first, last,
a reset-aware increase for counters, summed histogram buckets and a merged
DDSketch (docs/schema.md, "metrics_rollup").

Hours are planned from the catalog: hours with raw data and no rollup, and
hours that got new raw rows since they were rolled up (late data), which are
recomputed and replace their old rollup in one catalog transaction. Each hour
is taken under a catalog lease, so this is safe while 'sluice run' ingests and
while other upkeep works on the lake: an hour leased elsewhere is skipped.

--config takes the lake, catalog, S3 bucket and settings of a 'sluice run'
config: upkeep.rollup.tiers and min_age, upkeep.lease_ttl and
lake.max_attribute_columns; flags given win.

--dry-run prints the plan and changes nothing. The exit code is 1 if any hour
failed.`,
		Example: `  sluice rollup --lake ./data
  sluice rollup --lake ./data --tiers 1m,5m,1h --tenant acme --dry-run
  sluice rollup --lake ./data --catalog postgres://sluice@db/sluice
  sluice rollup --config sluice.yaml --dry-run`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			out, errOut := c.OutOrStdout(), c.ErrOrStderr()
			cfg, err := uc.load(c, &lf)
			if err != nil {
				return err
			}
			ts, err := rollup.ParseTiers(tiers)
			if err != nil {
				return usageError{fmt.Errorf("--tiers: %w", err)}
			}
			if cfg != nil {
				unlessSet(c, "tiers", func() {
					ts = ts[:0]
					for _, t := range cfg.Upkeep.Rollup.Tiers {
						ts = append(ts, t.D())
					}
				})
				unlessSet(c, "min-age", func() { minAge = cfg.Upkeep.Rollup.MinAge.D() })
				unlessSet(c, "lease-ttl", func() { leaseTTL = cfg.Upkeep.LeaseTTL.D() })
				unlessSet(c, "max-attribute-columns", func() { maxCols = cfg.Lake.MaxAttributeColumns })
			}
			if err := checkMaxAttrColumns(maxCols); err != nil {
				return err
			}
			store, err := upkeepStore(ctx, &s3f, &lf, cfg)
			if err != nil {
				return err
			}
			// No lake lock: leases and Replace keep upkeep and writers apart.
			cat, err := openExistingCatalog(ctx, &lf)
			if err != nil {
				return err
			}
			defer cat.Close()
			log := slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
			opts := rollup.Options{Tiers: ts, Tenant: tenant, MinAge: minAge, Store: store, LeaseTTL: leaseTTL, Logger: log,
				MaxAttributeColumns: maxCols}
			if !dryRun {
				// A rollup killed between its swap and its moves left its
				// outputs staged: the catalog lists them, but a glob over
				// the Hive tree misses them until the moves are done.
				// Planning skips such an hour (it is rolled up), so do them
				// here, as compaction's sweep and sluice run's upkeep do.
				if n, err := lake.ApplyMoves(ctx, cat, store, nil, log); err != nil {
					fmt.Fprintf(errOut, "sluice: finishing the file moves of interrupted swaps: %v\n", err)
				} else if n > 0 {
					fmt.Fprintf(out, "finished %d file moves of interrupted swaps\n", n)
				}
			}
			jobs, err := rollup.Plan(ctx, cat, opts)
			if err != nil {
				return err
			}
			var planFiles, planBytes, planRows int64
			for _, j := range jobs {
				planFiles += int64(len(j.Raw))
				planBytes += j.RawBytes
				planRows += j.RawRows
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			if len(jobs) > 0 {
				fmt.Fprintln(tw, "TENANT\tHOUR\tRAW FILES\tRAW ROWS\tBYTES\tREASON\tRESULT")
			}
			var bar *progress.Bar
			if !dryRun {
				bar = progress.New(errOut, "rollup", planFiles, planBytes)
				opts.Progress = bar.Add
			}
			var done, skipped, failed int
			var points, windows, bytesOut int64
			for _, j := range jobs {
				result := "would roll up"
				if !dryRun {
					res, err := rollup.Run(ctx, cat, store, j, opts)
					switch {
					case err != nil:
						failed++
						result = "failed"
						fmt.Fprintf(errOut, "sluice: %v\n", err)
					case res.Skipped:
						skipped++
						result = "skipped (leased by another process)"
					default:
						done++
						points += res.PointsOut
						bytesOut += res.BytesOut
						var rows int64
						for _, s := range res.Outputs {
							rows += s.Rows
						}
						windows += rows
						result = fmt.Sprintf("%d series, %d windows, %s", res.Series, rows, humanBytes(res.BytesOut))
						if res.Untimed > 0 {
							result += fmt.Sprintf(", %d points without a timestamp in the hour", res.Untimed)
						}
					}
					if ctx.Err() != nil {
						break
					}
				}
				fmt.Fprintf(tw, "%s\tdt=%s/hour=%02d\t%d\t%d\t%s\t%s\t%s\n", j.Tenant, j.Day, j.Hour,
					len(j.Raw), j.RawRows, humanBytes(j.RawBytes), j.Reason, result)
			}
			bar.Done()
			tw.Flush()
			if dryRun {
				fmt.Fprintf(out, "plan: %d hours, %d raw segments, %d rows, %s; tiers %s\n", len(jobs), planFiles, planRows, humanBytes(planBytes), rollup.FormatTiers(ts))
			} else {
				fmt.Fprintf(out, "rolled up %d hours: %d points into %d windows (%s), tiers %s", done, points, windows, humanBytes(bytesOut), rollup.FormatTiers(ts))
				if skipped > 0 {
					fmt.Fprintf(out, "; %d skipped (leased)", skipped)
				}
				if failed > 0 {
					fmt.Fprintf(out, "; %d failed", failed)
				}
				fmt.Fprintln(out)
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
	uc.register(c, "upkeep.rollup, lease_ttl, lake.max_attribute_columns")
	f := c.Flags()
	f.StringVar(&tiers, "tiers", rollup.FormatTiers(rollup.DefaultTiers), "rollup tiers, finest first; each a multiple of the one before and dividing 1h")
	f.StringVar(&tenant, "tenant", "", "only this tenant")
	f.BoolVar(&dryRun, "dry-run", false, "print the plan and change nothing")
	f.DurationVar(&minAge, "min-age", 0, "skip hours that ended less than this long ago (0: roll up the current hour too)")
	registerMaxAttrColumns(c, &maxCols)
	f.DurationVar(&leaseTTL, "lease-ttl", rollup.DefaultLeaseTTL, "hour lease, renewed while an hour is rolled up; a killed run blocks its hours (and the deletion of its files) this long")
	return c
}
