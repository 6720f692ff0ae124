package compact

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/progress"
)

// Options configure Plan and Run. Zero values take the defaults.
type Options struct {
	// TargetBytes: segments at least this big are left alone, and output
	// files roll at about this size (buffered estimate). Default 128 MiB.
	TargetBytes int64
	// MaxInputs caps the inputs of one job, bounding the row groups held
	// at once during the merge. Default 32.
	MaxInputs int
	// MaxMergeRows bounds the rows decoded at once across a job's inputs,
	// counting each input as min(its rows, lake.DefaultRowGroupRows) (one
	// row group of it is in memory). Plan stops adding inputs at this
	// budget, but a job always has two. Default 512K rows.
	MaxMergeRows int64
	// MaxBufferedBytes bounds the output writer's buffer. Default TargetBytes.
	MaxBufferedBytes int64
	RowGroupRows     int           // default lake.DefaultRowGroupRows
	MaxFutureSkew    time.Duration // must match ingest; default lake.DefaultMaxFutureSkew
	// MaxAttributeColumns caps an output file's attribute columns as
	// ingest does (lake.Options); inputs whose columns together pass it
	// go through the row merge, which moves the rest to the overflow
	// columns. Default lake.DefaultMaxAttributeColumns.
	MaxAttributeColumns int
	// Table and Tenant restrict Plan; "" means all.
	Table, Tenant string
	LeaseTTL      time.Duration // default 15 min
	Owner         string        // lease owner; default host/pid/random
	Logger        *slog.Logger  // default slog.Default()
	Now           func() time.Time
	// Progress, if set, is advanced by the rows merged (per round) and by
	// each input file and its bytes once fully read.
	Progress *progress.Bar
	// BeforeReplace, if set, runs after the merge and the lease check and
	// just before catalog.Replace; an error aborts the job like a failed
	// Replace would. It exists for fault injection and crash tests.
	BeforeReplace func(ctx context.Context, job Job) error
	// AfterReplace, if set, runs after the swap committed and before its
	// file moves (lake.FinishSwap). It exists for crash tests.
	AfterReplace func(ctx context.Context, job Job)
}

// Defaults of Options.
const (
	DefaultTargetBytes = 128 << 20
	DefaultMaxInputs   = 32
	// DefaultMaxMergeRows: decoded rows cost about 0.5-2 KB each (attribute
	// heavy metrics most), so this is about 0.3-1 GB of input row groups.
	DefaultMaxMergeRows = 512 << 10
	DefaultLeaseTTL     = 15 * time.Minute
)

func (o Options) withDefaults() Options {
	if o.TargetBytes <= 0 {
		o.TargetBytes = DefaultTargetBytes
	}
	if o.MaxInputs < 2 {
		o.MaxInputs = DefaultMaxInputs
	}
	if o.MaxMergeRows <= 0 {
		o.MaxMergeRows = DefaultMaxMergeRows
	}
	if o.MaxBufferedBytes <= 0 {
		o.MaxBufferedBytes = o.TargetBytes
	}
	if o.MaxFutureSkew <= 0 {
		o.MaxFutureSkew = lake.DefaultMaxFutureSkew
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.Owner == "" {
		o.Owner = defaultOwner("compact")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// defaultOwner is a lease owner unique to this process and call:
// role/host/pid/random.
func defaultOwner(role string) string {
	host, _ := os.Hostname()
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%s/%d/%s", role, host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Job is one partition's compaction: its small live segments, in id order.
type Job struct {
	Table, Tenant, Day string
	Hour               int
	Inputs             []catalog.Segment
}

// Dir is the job's partition directory.
func (j Job) Dir() string { return catalog.PartitionDir(j.Table, j.Tenant, j.Day, j.Hour) }

// LeaseKey is the catalog lease Run holds while working on the partition.
func (j Job) LeaseKey() string { return LeaseKeyForDir(j.Dir()) }

// LeaseKeyForDir is the compaction lease of the partition directory dir
// (catalog.PartitionDir). Whoever holds it may have written files there
// that the catalog does not list yet; orphan sweeps must leave them alone.
func LeaseKeyForDir(dir string) string { return "compact/" + dir }

// Result says what Run did.
type Result struct {
	Skipped           bool // another owner holds the partition's lease
	InputIDs          []int64
	Outputs           []catalog.Segment
	RowsIn, RowsOut   int64
	BytesIn, BytesOut int64
	// PagesCopied counts the output pages copied verbatim from the
	// inputs (column merge), not decoded and encoded again.
	PagesCopied int64
	// DictPagesCopied counts those of them that are dictionary-encoded
	// (their output chunk took their input's dictionary).
	DictPagesCopied int64
	// DictPagesRemapped counts the dictionary-encoded input pages whose
	// indexes were rewritten into their output chunk's dictionary (its
	// input's dictionary ordered values otherwise), not copied row by
	// row; they are not among PagesCopied.
	DictPagesRemapped int64
}

// ErrLeaseLost means the partition's lease was lost during a run (taken
// by another owner, or not renewed in time); the run aborted before its
// swap and removed its files. Such errors also wrap the catalog's reason:
// catalog.ErrLeaseLost, ErrLeaseNotHeld or ErrNoIntent.
var ErrLeaseLost = errors.New("compact: partition lease lost")

// ErrRowMismatch means the merge did not produce exactly the input rows;
// nothing was committed.
var ErrRowMismatch = errors.New("compact: output rows differ from input rows")

// Plan returns one job per (table, tenant, day, hour) partition holding at
// least two live segments smaller than TargetBytes. Jobs are ordered by
// partition; each takes the oldest segments, at most MaxInputs and within
// MaxMergeRows (but at least two).
func Plan(ctx context.Context, cat *catalog.Catalog, opts Options) ([]Job, error) {
	opts = opts.withDefaults()
	segs, err := cat.List(ctx, catalog.Filter{Table: opts.Table, Tenant: opts.Tenant})
	if err != nil {
		return nil, fmt.Errorf("compact: plan: %w", err)
	}
	type pkey struct {
		table, tenant, day string
		hour               int
	}
	groups := make(map[pkey][]catalog.Segment)
	for _, s := range segs {
		if s.Bytes >= opts.TargetBytes || !s.ReplacedAt.IsZero() {
			continue
		}
		// Only the raw tables (and io_events, sluice trace --record):
		// rollups rewrite metrics_rollup hours whole, one file per tier,
		// and merging the tiers would lose them.
		switch s.Table {
		case lake.TableLogs, lake.TableMetrics, lake.TableTraces, lake.TableIOEvents:
		default:
			continue
		}
		k := pkey{s.Table, s.Tenant, s.Day, s.Hour}
		groups[k] = append(groups[k], s)
	}
	var jobs []Job
	for k, in := range groups {
		if len(in) < 2 {
			continue
		}
		slices.SortFunc(in, func(a, b catalog.Segment) int { return cmp.Compare(a.ID, b.ID) })
		n, rows := 0, int64(0)
		for n < len(in) && n < opts.MaxInputs {
			r := min(in[n].Rows, lake.DefaultRowGroupRows)
			if n >= 2 && rows+r > opts.MaxMergeRows {
				break
			}
			rows += r
			n++
		}
		jobs = append(jobs, Job{Table: k.table, Tenant: k.tenant, Day: k.day, Hour: k.hour, Inputs: in[:n]})
	}
	slices.SortFunc(jobs, func(a, b Job) int {
		return cmp.Or(cmp.Compare(a.Table, b.Table), cmp.Compare(a.Tenant, b.Tenant),
			cmp.Compare(a.Day, b.Day), cmp.Compare(a.Hour, b.Hour))
	})
	return jobs, nil
}

// Run compacts one job: under the partition's lease it deletes the files
// that earlier runs killed before their swap left behind (their intents),
// merges the inputs into new files, each announced by an intent before it
// is created, and swaps them in with one catalog.ReplaceIntents. It returns
// Result.Skipped, without error, when another owner holds the lease. On any
// error the catalog is unchanged and the new files and their intents are
// removed; an error from losing the lease wraps ErrLeaseLost.
func Run(ctx context.Context, cat *catalog.Catalog, store lake.Store, job Job, opts Options) (Result, error) {
	opts = opts.withDefaults()
	res := Result{}
	if len(job.Inputs) == 0 {
		return res, nil
	}
	key := job.LeaseKey()
	// Keep the lease while merging: renewed every LeaseTTL/3; once it
	// cannot be, the lease's context cancels the merge.
	lease, ok, err := cat.HoldLease(ctx, key, opts.Owner, opts.LeaseTTL, opts.Logger)
	if err != nil {
		return res, fmt.Errorf("compact %s: %w", job.Dir(), err)
	}
	if !ok {
		res.Skipped = true
		return res, nil
	}
	defer func() {
		// The swap is already decided either way; a lost lease is only
		// worth a warning, since ReplaceIntents checked the lease.
		if err := lease.Release(); err != nil {
			opts.Logger.Warn("compaction lease release failed", "partition", job.Dir(), "err", err)
		}
	}()
	lctx := lease.Context()
	if n, err := lake.CleanIntents(lctx, cat, store, key, opts.Owner); err != nil {
		return res, fmt.Errorf("compact %s: %w", job.Dir(), lease.WrapLost(err, ErrLeaseLost))
	} else if n > 0 {
		opts.Logger.Info("deleted uncommitted outputs of an earlier compaction", "partition", job.Dir(), "files", n)
	}

	out := lake.NewIntentStore(lctx, store, cat, key, opts.Owner)
	res, written, err := merge(lctx, out, job, opts)
	if err != nil {
		return Result{}, out.Discard(fmt.Errorf("compact %s: %w", job.Dir(), lease.WrapLost(err, ErrLeaseLost)))
	}
	// Work that outlived its lease must not commit: the partition may be
	// another owner's now. Renewing also extends it through the swap.
	if err := lease.Renew(ctx); err != nil {
		return Result{}, out.Discard(fmt.Errorf("compact %s: %w", job.Dir(), lease.WrapLost(err, ErrLeaseLost)))
	}
	now := opts.Now()
	add := make([]catalog.Segment, len(written))
	for i, s := range written {
		add[i] = s.CatalogRow()
		add[i].Created = now
	}
	if opts.BeforeReplace != nil {
		if err := opts.BeforeReplace(ctx, job); err != nil {
			return Result{}, out.Discard(fmt.Errorf("compact %s: before replace: %w", job.Dir(), err))
		}
	}
	if err := cat.ReplaceIntents(ctx, key, opts.Owner, res.InputIDs, add); err != nil {
		return Result{}, out.Discard(fmt.Errorf("compact %s: %w", job.Dir(), lease.WrapLost(err, ErrLeaseLost)))
	}
	res.Outputs = add
	if opts.AfterReplace != nil {
		opts.AfterReplace(ctx, job)
	}
	lake.FinishSwap(ctx, cat, store, job.Inputs, add, opts.Logger)
	opts.Logger.Info("compacted partition", "partition", job.Dir(), "inputs", len(res.InputIDs),
		"outputs", len(add), "rows", res.RowsOut, "bytes_in", res.BytesIn, "bytes_out", res.BytesOut)
	return res, nil
}
