package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/internal/query/sqlq"
	"github.com/sluice-dev/sluice/internal/tenant"
)

func newSQLCmd() *cobra.Command {
	var (
		lf             lakeFlags
		s3f            s3Flags
		maxFetch       int64
		tenantName     string
		format         string
		fromStr, toStr string
		maxRows        int
		timeout        time.Duration
		memoryLimit    string
		threads        int
	)
	c := &cobra.Command{
		Use:   "sql [flags] QUERY|-",
		Short: "Run SQL over one tenant's lake with embedded DuckDB",
		Long: `Run one SQL query (DuckDB's dialect) over the lake of one tenant and print the result.

The views logs, metrics, metrics_rollup and traces read exactly the tenant's live
files as listed in the catalog (read_parquet with union_by_name and Hive
partition columns tenant, dt and hour). Column names with dots or '#' need
double quotes: "attr.http.route", "attr.http.response.status_code#int".
--from/--to only choose which files the views read (segments overlapping the
range); filter on the time columns for exact bounds. A table without files is
an empty view with its fixed columns.

The query cannot read any other file (file access is disabled and the
configuration locked once the views exist), runs at most --timeout, and
prints at most --max-rows rows (saying so when it cut more). QUERY "-" reads
the query from standard input. sluice sql only reads: it runs beside
'sluice run' and needs no lock. For a lake whose files are in S3 (--s3-bucket,
with the catalog under --lake as for ingest), the selected files are first
copied to a private temporary directory, at most --s3-max-fetch MiB: DuckDB's
httpfs extension is not linked in and is never downloaded.

Exit codes: 0 success, 1 the query failed (DuckDB's message is printed), 2 bad usage.`,
		Example: `  sluice sql "SELECT service_name, count(*) FROM logs GROUP BY 1 ORDER BY 2 DESC"
  sluice sql --tenant acme --from 2025-06-01T00:00:00Z --format csv \
    "SELECT metric_name, avg(value) FROM metrics WHERE metric_type = 'gauge' GROUP BY 1"
  echo "SELECT count(*) FROM traces WHERE status_code = 2" | sluice sql -`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if !slices.Contains(sqlq.Formats, format) {
				return usageError{fmt.Errorf("--format %q: want one of %s", format, strings.Join(sqlq.Formats, ", "))}
			}
			if maxRows < 0 || threads < 0 || timeout < 0 || maxFetch < 0 {
				return usageError{errors.New("--max-rows, --threads, --timeout and --s3-max-fetch must not be negative")}
			}
			if !tenant.Valid(tenantName) {
				return usageError{fmt.Errorf("--tenant %q: want 1-64 of A-Z a-z 0-9 . _ -", tenantName)}
			}
			from, to, err := parseRange(fromStr, toStr)
			if err != nil {
				return usageError{err}
			}
			query := args[0]
			if query == "-" {
				b, err := io.ReadAll(io.LimitReader(c.InOrStdin(), 16<<20))
				if err != nil {
					return fmt.Errorf("read query from stdin: %w", err)
				}
				query = string(b)
			}
			if strings.TrimSpace(strings.TrimRight(strings.TrimSpace(query), ";")) == "" {
				return usageError{errors.New("empty query")}
			}

			ctx := c.Context()
			cat, err := openExistingCatalog(ctx, &lf)
			if err != nil {
				return err
			}
			store, err := s3f.store(ctx)
			if err != nil {
				cat.Close()
				return err
			}
			eng, err := sqlq.Open(ctx, cat, sqlq.Options{
				Root: lf.root, Tenant: tenantName, From: from, To: to,
				MemoryLimit: memoryLimit, Threads: threads,
				Store: store, MaxFetchBytes: maxFetch << 20,
			})
			cat.Close() // the views hold the file list; the catalog is not needed any more
			if errors.Is(err, sqlq.ErrInvalidOption) {
				return usageError{fmt.Errorf("--memory-limit: %w", err)}
			}
			if err != nil {
				return err
			}
			defer eng.Close()

			qctx := ctx
			if timeout > 0 {
				var cancel context.CancelFunc
				qctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			rows, err := eng.Query(qctx, query, maxRows)
			if err == nil {
				err = printRows(c, rows, format)
			}
			switch {
			case err == nil:
				return nil
			case errors.Is(err, context.DeadlineExceeded):
				return fmt.Errorf("query timed out after %s (--timeout); DuckDB stopped it", timeout)
			case errors.Is(err, context.Canceled):
				return errors.New("query canceled")
			}
			return err
		},
	}
	lf.register(c)
	s3f.register(c)
	f := c.Flags()
	f.Int64Var(&maxFetch, "s3-max-fetch", sqlq.DefaultMaxFetchBytes>>20, "with --s3-bucket: the most MiB of files a query may copy from S3")
	f.StringVar(&tenantName, "tenant", "default", "the tenant whose data the query sees")
	f.StringVar(&format, "format", "table", "output format: table, csv, json (one array) or jsonl (one object per line)")
	f.StringVar(&fromStr, "from", "", "only files with data at or after this RFC 3339 time")
	f.StringVar(&toStr, "to", "", "only files with data at or before this RFC 3339 time")
	f.IntVar(&maxRows, "max-rows", 10000, "print at most this many rows, saying so when more were cut; 0 for no limit")
	f.DurationVar(&timeout, "timeout", time.Minute, "stop the query after this long; 0 for no limit")
	f.StringVar(&memoryLimit, "memory-limit", "2GB", "DuckDB's memory limit (e.g. 512MB, 4GB); beyond it a query spills to a temporary directory or fails")
	f.IntVar(&threads, "threads", 0, "DuckDB worker threads; 0 for one per core")
	return c
}

func printRows(c *cobra.Command, rows *sqlq.Rows, format string) error {
	defer rows.Close()
	w, err := sqlq.NewResultWriter(c.OutOrStdout(), format, rows.Columns)
	if err != nil {
		return usageError{err}
	}
	for rows.Next() {
		if err := w.Row(rows.Values()); err != nil {
			return fmt.Errorf("write result: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if err := w.Close(rows.Truncated()); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	if rows.Truncated() && format != "table" {
		fmt.Fprintf(c.ErrOrStderr(), "sluice: output cut at %d rows (--max-rows)\n", rows.Count())
	}
	return nil
}
