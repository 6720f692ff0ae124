package cli

import (
	"fmt"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/internal/lake/retention"
	"github.com/sluice-dev/sluice/internal/progress"
	"github.com/sluice-dev/sluice/internal/upkeep"
)

func newRetentionCmd() *cobra.Command {
	var (
		lf            lakeFlags
		s3f           s3Flags
		uc            upkeepConfig
		keep          []string
		table, tenant string
		dryRun        bool
	)
	c := &cobra.Command{
		Use:   "retention",
		Short: "Delete lake partitions older than their retention age",
		Long: `Delete whole hour partitions whose hour ended longer ago than their age, per
table, rollup tier and tenant. Rules come from the upkeep.retention section of
--config (as 'sluice run' reads it) and from --keep, which overrides it:

  --keep logs=7d,metrics=30d,metrics_rollup.1h=400d,acme:logs=30d

Each item is [TENANT:]TABLE[.TIER]=AGE; AGE is days (7d) or a duration (36h),
0 or forever keeps. "metrics_rollup" alone covers every tier without a rule.

Partitions are removed from the catalog at once (queries stop seeing them), in
one transaction each, under the same leases as compaction and rollups, so this
is safe while 'sluice run' or another upkeep command works on the lake. Their
files then leave the Hive tree for _trash/ (so a glob over the lake no longer
reads them; with --s3-bucket or the config's lake.s3, in the bucket) and are
deleted by the sweeper once upkeep.sweep_grace has passed (the background
upkeep of 'sluice run', or 'sluice compact'), so queries already reading them
finish. --dry-run prints the plan and changes nothing.`,
		Example: `  sluice retention --lake ./data --keep logs=7d,traces=7d,metrics=30d --dry-run
  sluice retention --config sluice.yaml
  sluice retention --lake ./data --catalog postgres://... --keep metrics=14d --tenant acme`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			out, errOut := c.OutOrStdout(), c.ErrOrStderr()
			rules := retention.Rules{}
			leaseTTL := time.Duration(0)
			cfg, err := uc.load(c, &lf)
			if err != nil {
				return err
			}
			if cfg != nil {
				rules = upkeep.RetentionRules(cfg.Upkeep.Retention)
				leaseTTL = cfg.Upkeep.LeaseTTL.D()
			}
			switch table {
			case "", retention.TableLogs, retention.TableMetrics, retention.TableTraces, retention.TableIOEvents, retention.TableRollup:
			default:
				return usageError{fmt.Errorf("--table %q: want logs, metrics, traces, io_events or metrics_rollup", table)}
			}
			for _, k := range keep {
				if err := rules.ParseKeep(k); err != nil {
					return usageError{fmt.Errorf("--keep: %w", err)}
				}
			}
			if !rules.Active() {
				return usageError{fmt.Errorf("no retention rule deletes anything (everything is kept forever): give --keep or a --config with upkeep.retention (see '%s --help')", c.CommandPath())}
			}
			// The lake's store (as 'sluice run' or 'sluice compact' would
			// open it): the removed files leave the Hive tree at once.
			store, err := upkeepStore(ctx, &s3f, &lf, cfg)
			if err != nil {
				return err
			}
			cat, err := openExistingCatalog(ctx, &lf)
			if err != nil {
				return err
			}
			defer cat.Close()

			now := time.Now()
			plan, err := retention.Plan(ctx, cat, rules, now)
			if err != nil {
				return err
			}
			kept := plan[:0]
			for _, p := range plan {
				if (table == "" || p.Table == table) && (tenant == "" || p.Tenant == tenant) {
					kept = append(kept, p)
				}
			}
			plan = kept

			fmt.Fprintf(out, "rules: %s\n", rules)
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			if len(plan) > 0 {
				fmt.Fprintln(tw, "TABLE\tTENANT\tPARTITION\tTIER\tAGE\tSEGMENTS\tROWS\tBYTES\tRESULT")
			}
			var parts, segs int
			var rows, bytes int64
			var failed, skipped int
			opts := retention.Options{LeaseTTL: leaseTTL, Store: store, Logger: slog.New(slog.NewTextHandler(errOut, nil))}
			var bar *progress.Bar
			if !dryRun {
				var planSegs, planBytes int64
				for _, p := range plan {
					planSegs += int64(len(p.Segments))
					planBytes += p.Bytes
				}
				bar = progress.New(errOut, "retention", planSegs, planBytes)
			}
			for _, p := range plan {
				result := "would remove"
				n, r, b := len(p.Segments), p.Rows, p.Bytes
				if !dryRun {
					res, err := retention.Apply(ctx, cat, p, opts)
					n, r, b = len(res.Removed), res.Rows, res.Bytes
					switch {
					case err != nil:
						failed++
						result = "failed"
						fmt.Fprintf(errOut, "sluice: %v\n", err)
					case res.Skipped:
						skipped++
						result = "skipped: leased by another upkeep run"
					case len(res.Removed) == 0:
						result = "already gone" // another run got there first
					default:
						result = "removed"
					}
				}
				if !dryRun {
					bar.Add(int64(n), b, r)
				}
				if result == "removed" || result == "would remove" {
					parts++
					segs += n
					rows += r
					bytes += b
				}
				tier := p.Tier
				if tier == "" {
					tier = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\tdt=%s/hour=%02d\t%s\t%s\t%d\t%d\t%s\t%s\n", p.Table, p.Tenant, p.Day, p.Hour,
					tier, retention.FormatAge(p.Age), n, r, humanBytes(b), result)
			}
			if bar != nil {
				bar.Done()
			}
			tw.Flush()
			switch {
			case dryRun:
				fmt.Fprintf(out, "dry run: %d partitions (%d segments, %d rows, %s) would be removed\n", parts, segs, rows, humanBytes(bytes))
			default:
				fmt.Fprintf(out, "retention: removed %d partitions (%d segments, %d rows, %s) from the catalog", parts, segs, rows, humanBytes(bytes))
				if skipped > 0 {
					fmt.Fprintf(out, "; %d skipped (busy, retried next run)", skipped)
				}
				if failed > 0 {
					fmt.Fprintf(out, "; %d failed", failed)
				}
				fmt.Fprintln(out, "\nfiles were moved to _trash/ and are deleted by the sweeper after the grace period (sluice run's upkeep or sluice compact)")
			}
			if failed > 0 {
				return errPartial
			}
			return nil
		},
	}
	lf.register(c)
	s3f.register(c)
	f := c.Flags()
	uc.register(c, "rules (upkeep.retention), lease_ttl")
	f.StringArrayVar(&keep, "keep", nil, "rules [TENANT:]TABLE[.TIER]=AGE, comma-separated or repeated; override --config (e.g. logs=7d,acme:logs=30d)")
	f.StringVar(&table, "table", "", "only this table (logs, metrics, traces, io_events, metrics_rollup)")
	f.StringVar(&tenant, "tenant", "", "only this tenant")
	f.BoolVar(&dryRun, "dry-run", false, "print the plan and change nothing")
	return c
}
