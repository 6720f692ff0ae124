package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sluice-dev/sluice/internal/ingest"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/s3store"
	"github.com/sluice-dev/sluice/internal/tenant"
)

// lakeFlags are the flags every command that opens a lake shares.
type lakeFlags struct {
	root    string
	catalog string
}

func (f *lakeFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.root, "lake", "./data", "lake root directory")
	c.Flags().StringVar(&f.catalog, "catalog", "", "catalog DSN: sqlite:PATH or postgres://user:pass@host:port/db (default: SQLite file <lake>/catalog.db)")
}

// s3Flags put the lake files of a command in S3; credentials come from
// the standard AWS environment (AWS_ACCESS_KEY_ID, AWS_PROFILE, ...).
type s3Flags struct {
	bucket, prefix, endpoint, region string
	maxRetries                       int
}

func (f *s3Flags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.bucket, "s3-bucket", "", "write lake files to this S3 bucket instead of under --lake (which keeps the catalog)")
	c.Flags().StringVar(&f.prefix, "s3-prefix", "", "key prefix of the lake in the bucket")
	c.Flags().StringVar(&f.endpoint, "s3-endpoint", "", "URL of an S3-compatible server (path-style addressing); default AWS S3")
	c.Flags().StringVar(&f.region, "s3-region", "", "AWS region (default: from the AWS environment)")
	c.Flags().IntVar(&f.maxRetries, "s3-max-retries", s3store.DefaultMaxRetries, "attempts per S3 request, with jittered exponential backoff (lake.s3.max_retries)")
}

// store returns the S3 store of the flags, or nil without --s3-bucket.
func (f *s3Flags) store(ctx context.Context) (lake.Store, error) {
	if f.bucket == "" {
		if f.prefix != "" || f.endpoint != "" || f.region != "" {
			return nil, usageError{errors.New("--s3-prefix, --s3-endpoint and --s3-region need --s3-bucket")}
		}
		return nil, nil
	}
	if f.maxRetries < 1 {
		return nil, usageError{fmt.Errorf("--s3-max-retries %d: want 1 or more", f.maxRetries)}
	}
	st, err := s3store.New(ctx, s3store.Config{
		Bucket: f.bucket, Prefix: f.prefix, Endpoint: f.endpoint, Region: f.region,
		ForcePathStyle: f.endpoint != "", MaxRetries: f.maxRetries,
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

func (f *lakeFlags) catalogDSN() string {
	if f.catalog != "" {
		return f.catalog
	}
	return "sqlite:" + filepath.Join(f.root, "catalog.db")
}

func newIngestCmd() *cobra.Command {
	var (
		lf            lakeFlags
		s3f           s3Flags
		tenantName    string
		targetSize    int64
		maxBuffered   int64
		rowGroupRows  int
		maxFileBytes  int64
		maxFutureSkew time.Duration
		progress      string
		memProfile    string
	)
	c := &cobra.Command{
		Use:   "ingest [flags] FILE|DIR...",
		Short: "Write OTLP export-request files into the lake",
		Long: `Ingest OTLP export-request files into the lake.

Files may be protobuf (.binpb, .pb) or OTLP JSON (.json, one request or one per
line), each optionally gzip- or zstd-compressed; the signal (logs, metrics or
traces), the encoding and the compression are detected from the content.
Directories are walked for files with those extensions.

A file that cannot be read or decoded is reported and skipped; nothing of it
reaches the lake. The exit code is 1 if any file failed.`,
		Example: `  sluice ingest --lake ./data ./otlp-dumps
  sluice ingest --lake ./data --tenant acme logs.binpb.gz metrics.json
  sluice ingest --lake ./state --s3-bucket my-lake --s3-prefix prod ./otlp-dumps`,
		Args: minArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			if !tenant.Valid(tenantName) {
				return usageError{fmt.Errorf("--tenant %q: want 1-64 of A-Z a-z 0-9 . _ -", tenantName)}
			}
			files, skipped, err := ingest.Collect(args)
			if err != nil {
				return usageError{err}
			}
			out, errOut := c.OutOrStdout(), c.ErrOrStderr()
			if len(files) == 0 {
				return usageError{fmt.Errorf("no input files found in %v", args)}
			}
			if err := os.MkdirAll(lf.root, 0o755); err != nil {
				return fmt.Errorf("create lake root: %w", err)
			}
			store, err := s3f.store(ctx)
			if err != nil {
				return err
			}
			lk, err := openLake(ctx, &lf, lake.Options{
				Store:            store,
				TargetFileBytes:  targetSize,
				MaxBufferedBytes: maxBuffered,
				RowGroupRows:     rowGroupRows,
				MaxFutureSkew:    maxFutureSkew,
			})
			if err != nil {
				return err
			}
			defer lk.closeCatalog()

			setSoftMemoryLimit(maxBuffered, maxFileBytes, files)
			opts := ingest.Options{Tenant: tenantName, MaxFileBytes: maxFileBytes}
			bar := newProgressLine(errOut, progress)
			if bar != nil {
				opts.Progress = bar.update
			}
			start := time.Now()
			res, runErr := ingest.Run(ctx, files, lk.writer, opts)
			closeErr := lk.writer.Close()
			// The rate covers writing out what was still buffered, too.
			res.Elapsed = time.Since(start)
			if bar != nil {
				bar.update(res.Progress) // the final state, however short the run
				bar.clear()
			}
			for _, f := range res.Failed {
				fmt.Fprintf(errOut, "sluice: rejected %s\n", f.Error())
			}
			printIngestSummary(out, res, skipped, lk.segments, lk.writer.Stats())
			if memProfile != "" {
				if err := writeHeapProfile(memProfile); err != nil {
					fmt.Fprintf(errOut, "sluice: %v\n", err)
				}
			}
			if runErr != nil {
				return runErr
			}
			if closeErr != nil {
				return fmt.Errorf("flush lake: %w", closeErr)
			}
			if len(res.Failed) > 0 {
				return errPartial
			}
			return nil
		},
	}
	lf.register(c)
	s3f.register(c)
	f := c.Flags()
	f.StringVar(&tenantName, "tenant", "default", "tenant the records belong to")
	f.Int64Var(&targetSize, "target-file-size", 128<<20, "roll a Parquet file when its buffered data reaches this many bytes")
	f.Int64Var(&maxBuffered, "max-buffered-bytes", 128<<20, "bound on data buffered across all open partitions; the largest is written out when it is reached")
	f.IntVar(&rowGroupRows, "row-group-rows", 128*1024, "rows per Parquet row group")
	f.Int64Var(&maxFileBytes, "max-file-bytes", ingest.DefaultMaxFileBytes, "reject an input file larger than this, on disk or decompressed")
	f.DurationVar(&maxFutureSkew, "max-future-skew", 24*time.Hour, "a record time further than this in the future is not used for partitioning (see docs/schema.md)")
	f.StringVar(&progress, "progress", "auto", "progress line on stderr: auto (when a terminal), always, never")
	f.StringVar(&memProfile, "memprofile", "", "write a heap profile (go tool pprof) to this file at the end")
	return c
}

func printIngestSummary(w io.Writer, res ingest.Result, skipped []string, segs *segmentCounter, ws lake.WriterStats) {
	secs := res.Elapsed.Seconds()
	if secs <= 0 {
		secs = 1e-9
	}
	fmt.Fprintf(w, "ingested %d of %d files in %s: %d logs, %d data points, %d spans (%.0f records/s, %.1f MB/s decoded)\n",
		res.FilesDone-res.FilesFailed, res.FilesTotal, res.Elapsed.Round(time.Millisecond),
		res.Logs, res.DataPoints, res.Spans, float64(res.Records)/secs, float64(res.BytesDecoded)/1e6/secs)
	fmt.Fprintf(w, "wrote %d segments, %d rows, %s", segs.n, segs.rows, humanBytes(segs.bytes))
	if ws.ReplacedTimes > 0 {
		fmt.Fprintf(w, "; %d records had no usable timestamp and were partitioned by observed or ingest time", ws.ReplacedTimes)
	}
	fmt.Fprintln(w)
	if res.Empty > 0 {
		fmt.Fprintf(w, "%d files held no records\n", res.Empty)
	}
	if len(skipped) > 0 {
		fmt.Fprintf(w, "skipped %d files without an OTLP extension in the directories walked (name them explicitly to ingest them)\n", len(skipped))
	}
	if len(res.Failed) > 0 {
		fmt.Fprintf(w, "%d files rejected (see above)\n", len(res.Failed))
	}
}

// progressLine renders progress: on a terminal one line redrawn in place;
// elsewhere (--progress always into a file or pipe) plain lines, at most
// one every few seconds, so logs stay readable.
type progressLine struct {
	w        io.Writer
	terminal bool
	last     time.Time
}

func newProgressLine(w io.Writer, mode string) *progressLine {
	terminal := false
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		terminal = true
	}
	switch {
	case mode == "never":
		return nil
	case mode == "always", terminal:
		return &progressLine{w: w, terminal: terminal}
	}
	return nil
}

func (p *progressLine) update(pr ingest.Progress) {
	if !p.terminal && time.Since(p.last) < 5*time.Second && pr.FilesDone < pr.FilesTotal {
		return
	}
	p.last = time.Now()
	secs := max(pr.Elapsed.Seconds(), 1e-9)
	line := fmt.Sprintf("%d/%d files", pr.FilesDone, pr.FilesTotal)
	if pr.Records > 0 || pr.BytesDecoded > 0 { // rebuild-catalog counts files only
		line += fmt.Sprintf("  %d records  %.1f MB/s  %.0f records/s",
			pr.Records, float64(pr.BytesDecoded)/1e6/secs, float64(pr.Records)/secs)
	}
	line += "  " + pr.Elapsed.Round(time.Second).String()
	if pr.FilesFailed > 0 {
		line += fmt.Sprintf("  %d failed", pr.FilesFailed)
	}
	if p.terminal {
		fmt.Fprint(p.w, "\r\x1b[K"+line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

func (p *progressLine) clear() {
	if p.terminal {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// writeHeapProfile writes the heap profile, after a GC so that it shows
// what is live at the end of the run.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("memprofile: %w", err)
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		return fmt.Errorf("memprofile: %w", err)
	}
	return nil
}

// setSoftMemoryLimit gives the GC a heap goal that follows the configured
// buffers rather than GOGC alone, unless GOMEMLIMIT is set: the writer may
// buffer maxBuffered bytes (whose slices may hold up to half as much again
// while growing), two input files are decoded at a time (a decoded batch
// takes about 3x its file's bytes), and Parquet encoding needs room.
// Without it the heap target doubles whatever is live, and peak RSS
// follows (700 MB at the defaults instead of 430, for the same CPU:
// BENCHMARKS.md). The live heap peaks at about 1.8x maxBuffered at the
// defaults since partitions share resources (240 MB, 310 before); with
// 2x maxBuffered here the heap grew to the limit and RSS was 440-450 MB
// at 4 GB of input, with 1.5x it is 380-386 MB for 5-7% more CPU.
func setSoftMemoryLimit(maxBuffered, maxFileBytes int64, files []string) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	inFlight := largestInput(files, maxFileBytes) * 2 * 3
	debug.SetMemoryLimit(maxBuffered*3/2 + inFlight + 64<<20)
}

// largestInput estimates the decoded size of the largest input file: its
// size on disk, 8x for a compressed one (gzip, zstd), at most maxFileBytes
// (larger ones are refused).
func largestInput(files []string, maxFileBytes int64) int64 {
	var most int64
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			continue // reported when the file is read
		}
		n := st.Size()
		if lf := strings.ToLower(f); strings.HasSuffix(lf, ".gz") || strings.HasSuffix(lf, ".zst") {
			n *= 8
		}
		most = max(most, min(n, maxFileBytes))
	}
	return most
}
