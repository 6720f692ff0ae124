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
)

// Options configure Plan and Run. Zero values take the defaults.
type Options struct {
	// TargetBytes: segments at least this big are left alone, and output
	// files roll at about this size (buffered estimate). Default 128 MiB.
	TargetBytes int64
	// MaxInputs caps the inputs of one job, bounding the row groups held
	// at once during the merge. Default 32.
	MaxInputs int
	// MaxBufferedBytes bounds the output writer's buffer. Default TargetBytes.
	MaxBufferedBytes int64
	RowGroupRows     int           // default lake.DefaultRowGroupRows
	MaxFutureSkew    time.Duration // must match ingest; default lake.DefaultMaxFutureSkew
	// Table and Tenant restrict Plan; "" means all.
	Table, Tenant string
	LeaseTTL      time.Duration // default 15 min
	Owner         string        // lease owner; default host/pid/random
	Logger        *slog.Logger  // default slog.Default()
	Now           func() time.Time
}

// Defaults of Options.
const (
	DefaultTargetBytes = 128 << 20
	DefaultMaxInputs   = 32
	DefaultLeaseTTL    = 15 * time.Minute
)

func (o Options) withDefaults() Options {
	if o.TargetBytes <= 0 {
		o.TargetBytes = DefaultTargetBytes
	}
	if o.MaxInputs < 2 {
		o.MaxInputs = DefaultMaxInputs
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
		o.Owner = defaultOwner()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

func defaultOwner() string {
	host, _ := os.Hostname()
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("compact/%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
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
func (j Job) LeaseKey() string { return "compact/" + j.Dir() }

// Result says what Run did.
type Result struct {
	Skipped           bool // another owner holds the partition's lease
	InputIDs          []int64
	Outputs           []catalog.Segment
	RowsIn, RowsOut   int64
	BytesIn, BytesOut int64
}

// ErrRowMismatch means the merge did not produce exactly the input rows;
// nothing was committed.
var ErrRowMismatch = errors.New("compact: output rows differ from input rows")

// Plan returns one job per (table, tenant, day, hour) partition holding at
// least two live segments smaller than TargetBytes. Jobs are ordered by
// partition; each takes at most MaxInputs segments, the oldest first.
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
		k := pkey{s.Table, s.Tenant, s.Day, s.Hour}
		groups[k] = append(groups[k], s)
	}
	var jobs []Job
	for k, in := range groups {
		if len(in) < 2 {
			continue
		}
		slices.SortFunc(in, func(a, b catalog.Segment) int { return cmp.Compare(a.ID, b.ID) })
		jobs = append(jobs, Job{Table: k.table, Tenant: k.tenant, Day: k.day, Hour: k.hour, Inputs: in[:min(len(in), opts.MaxInputs)]})
	}
	slices.SortFunc(jobs, func(a, b Job) int {
		return cmp.Or(cmp.Compare(a.Table, b.Table), cmp.Compare(a.Tenant, b.Tenant),
			cmp.Compare(a.Day, b.Day), cmp.Compare(a.Hour, b.Hour))
	})
	return jobs, nil
}

// Run compacts one job: under the partition's lease it merges the inputs
// into new files and swaps them in with one catalog.Replace. It returns
// Result.Skipped, without error, when another owner holds the lease. On any
// error the catalog is unchanged and the new files are removed.
func Run(ctx context.Context, cat *catalog.Catalog, store lake.Store, job Job, opts Options) (Result, error) {
	opts = opts.withDefaults()
	res := Result{}
	if len(job.Inputs) == 0 {
		return res, nil
	}
	key := job.LeaseKey()
	ok, err := cat.TryLease(ctx, key, opts.Owner, opts.LeaseTTL)
	if err != nil {
		return res, fmt.Errorf("compact %s: %w", job.Dir(), err)
	}
	if !ok {
		res.Skipped = true
		return res, nil
	}
	defer func() {
		// The swap is already decided either way; a lost lease is only
		// worth a warning, since Replace refused stale inputs.
		if err := cat.ReleaseLease(context.WithoutCancel(ctx), key, opts.Owner); err != nil {
			opts.Logger.Warn("compaction lease release failed", "partition", job.Dir(), "err", err)
		}
	}()

	var written []lake.Segment
	removeWritten := func(cause error) error {
		var errs []error
		for _, s := range written {
			if err := store.Remove(s.Path); err != nil {
				errs = append(errs, fmt.Errorf("remove %q: %w", s.Path, err))
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("%w (and cleaning up: %w)", cause, errors.Join(errs...))
		}
		return cause
	}

	res, written, err = merge(store, job, opts)
	if err != nil {
		return Result{}, removeWritten(fmt.Errorf("compact %s: %w", job.Dir(), err))
	}

	// Work that outlived its lease must not commit: the partition may be
	// another owner's now. Renewing also extends it through Replace.
	if ok, err := cat.TryLease(ctx, key, opts.Owner, opts.LeaseTTL); err != nil || !ok {
		if err == nil {
			err = catalog.ErrLeaseNotHeld
		}
		return Result{}, removeWritten(fmt.Errorf("compact %s: renew lease: %w", job.Dir(), err))
	}
	now := opts.Now()
	add := make([]catalog.Segment, len(written))
	for i, s := range written {
		add[i] = s.CatalogRow()
		add[i].Created = now
	}
	if err := cat.Replace(ctx, res.InputIDs, add); err != nil {
		return Result{}, removeWritten(fmt.Errorf("compact %s: %w", job.Dir(), err))
	}
	res.Outputs = add
	opts.Logger.Info("compacted partition", "partition", job.Dir(), "inputs", len(res.InputIDs),
		"outputs", len(add), "rows", res.RowsOut, "bytes_in", res.BytesIn, "bytes_out", res.BytesOut)
	return res, nil
}
