package rollup

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
	"strconv"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/format"
)

// Options configure Plan and Run. Zero values take the defaults.
type Options struct {
	Tiers  []time.Duration // finest first; default DefaultTiers
	Tenant string          // "" plans every tenant
	// MinAge: Plan skips hours that ended less than MinAge ago (0: roll
	// up even the current hour; late data recomputes it later).
	MinAge time.Duration
	// Store, when set, lets Plan read the source-rows footer of rollups
	// whose hour got newer raw segments, so compaction of raw files does
	// not cause a recompute. Without it such hours are recomputed.
	Store    lake.Store
	LeaseTTL time.Duration // default 15 min
	Owner    string        // lease owner; default host/pid/random
	Logger   *slog.Logger  // default slog.Default()
	Now      func() time.Time
	// Progress, if set, is called after each raw row group read.
	Progress func(files, bytes, rows int64)
	// BeforeReplace, if set, runs after the tiers are written and the
	// lease renewed, just before the swap; an error aborts the run like a
	// failed swap would. It exists for fault injection and crash tests.
	BeforeReplace func(ctx context.Context, job Job) error
	// MaxAttributeColumns caps the attribute label columns of a rollup
	// file as lake.max_attribute_columns caps a raw file's; the labels past
	// it go to their scope's overflow column. Default
	// lake.DefaultMaxAttributeColumns.
	MaxAttributeColumns int
}

// DefaultLeaseTTL is the default lease of one hour's rollup.
const DefaultLeaseTTL = 15 * time.Minute

// createdSlack: raw segments created up to this long before a rollup
// still make Plan compare row counts, covering clock differences between
// the process that committed them and the one that rolled up.
const createdSlack = 5 * time.Minute

func (o Options) withDefaults() Options {
	if len(o.Tiers) == 0 {
		o.Tiers = DefaultTiers
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.Owner == "" {
		host, _ := os.Hostname()
		var b [8]byte
		_, _ = rand.Read(b[:])
		o.Owner = fmt.Sprintf("rollup/%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Job is one tenant's raw metrics hour to roll up.
type Job struct {
	Tenant, Day string
	Hour        int
	Raw         []catalog.Segment // live raw segments when planned
	Rollups     []catalog.Segment // live rollup segments when planned (replaced by Run)
	RawRows     int64
	RawBytes    int64
	Reason      string // "new", "late data", "tiers changed"
}

// Dir is the raw partition the job reads.
func (j Job) Dir() string { return catalog.PartitionDir(lake.TableMetrics, j.Tenant, j.Day, j.Hour) }

// LeaseKey is the catalog lease Run holds on the hour: "rollup/<raw
// partition dir>", the key retention also takes.
func (j Job) LeaseKey() string { return "rollup/" + j.Dir() }

// Result says what Run did.
type Result struct {
	Skipped    bool // another owner holds the hour's lease
	SourceRows int64
	PointsRead int64 // raw rows read
	PointsOut  int64 // points rolled up (in the hour, with a timestamp)
	Untimed    int64 // raw rows without a timestamp inside the hour: not rolled up
	Series     int
	Replaced   []int64
	Outputs    []catalog.Segment
	BytesIn    int64
	BytesOut   int64
}

type hkey struct {
	tenant, day string
	hour        int
}

// Plan returns the hours whose rollups are missing or stale: hours with
// live raw rows and no rollup, rollups of other tiers than configured, or
// rollups computed from fewer (or more) raw rows than the hour holds now.
// Hours whose raw data is gone (retention) are left alone.
func Plan(ctx context.Context, cat *catalog.Catalog, opts Options) ([]Job, error) {
	opts = opts.withDefaults()
	if err := ValidateTiers(opts.Tiers); err != nil {
		return nil, err
	}
	raw, err := cat.List(ctx, catalog.Filter{Table: lake.TableMetrics, Tenant: opts.Tenant})
	if err != nil {
		return nil, fmt.Errorf("rollup: plan: %w", err)
	}
	ups, err := cat.List(ctx, catalog.Filter{Table: Table, Tenant: opts.Tenant})
	if err != nil {
		return nil, fmt.Errorf("rollup: plan: %w", err)
	}
	jobs := map[hkey]*Job{}
	maxCreated := map[hkey]time.Time{}
	maxID := map[hkey]int64{}
	cutoff := opts.Now().Add(-opts.MinAge)
	for _, s := range raw {
		k := hkey{s.Tenant, s.Day, s.Hour}
		j := jobs[k]
		if j == nil {
			j = &Job{Tenant: s.Tenant, Day: s.Day, Hour: s.Hour}
			jobs[k] = j
		}
		j.Raw = append(j.Raw, s)
		j.RawRows += s.Rows
		j.RawBytes += s.Bytes
		if s.Created.After(maxCreated[k]) {
			maxCreated[k] = s.Created
		}
		maxID[k] = max(maxID[k], s.ID)
	}
	for _, s := range ups {
		if j := jobs[hkey{s.Tenant, s.Day, s.Hour}]; j != nil {
			j.Rollups = append(j.Rollups, s)
		}
	}
	want := make([]int, len(opts.Tiers))
	for i, d := range opts.Tiers {
		want[i] = Level(d)
	}
	var out []Job
	for k, j := range jobs {
		if j.RawRows == 0 {
			continue
		}
		if opts.MinAge > 0 && catalog.PartitionStart(j.Day, j.Hour).Add(time.Hour).After(cutoff) {
			continue
		}
		switch {
		case len(j.Rollups) == 0:
			j.Reason = "new"
		case !sameLevels(j.Rollups, want):
			j.Reason = "tiers changed"
		default:
			rolled, minID := j.Rollups[0].Created, j.Rollups[0].ID
			for _, s := range j.Rollups {
				if s.Created.Before(rolled) {
					rolled = s.Created
				}
				minID = min(minID, s.ID)
			}
			// Ids grow: a raw segment catalogued after the rollup has a
			// larger id. One catalogued between Run's listing and its
			// Replace has a smaller id but a Created after the listing.
			if maxID[k] < minID && !maxCreated[k].After(rolled.Add(-createdSlack)) {
				continue // no raw segment since the rollup
			}
			// Raw segments changed since: new rows, or compaction (same rows).
			if opts.Store != nil {
				if n, err := sourceRows(opts.Store, j.Rollups[0].Path); err == nil && n == j.RawRows {
					continue
				}
			}
			j.Reason = "late data"
		}
		out = append(out, *j)
	}
	slices.SortFunc(out, func(a, b Job) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Day, b.Day), cmp.Compare(a.Hour, b.Hour))
	})
	return out, nil
}

func sameLevels(segs []catalog.Segment, want []int) bool {
	have := map[int]bool{}
	for _, s := range segs {
		have[s.Level] = true
	}
	if len(have) != len(want) || len(segs) != len(want) {
		return false
	}
	for _, l := range want {
		if !have[l] {
			return false
		}
	}
	return true
}

// sourceRows reads the source-rows footer key of a rollup file.
func sourceRows(store lake.Store, p string) (int64, error) {
	r, err := lake.OpenSegment(store, p)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	pf, err := format.Open(r, r.Size(), p, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return 0, err
	}
	v, ok := pf.Lookup(MetaSourceRows)
	if !ok {
		return 0, fmt.Errorf("%q: no %s", p, MetaSourceRows)
	}
	return strconv.ParseInt(v, 10, 64)
}

// ErrLeaseLost means the hour's lease was lost during a run (taken by
// another owner, or not renewed in time); the run aborted before its swap
// and removed its files. Such errors also wrap the catalog's reason:
// catalog.ErrLeaseLost, ErrLeaseNotHeld or ErrNoIntent.
var ErrLeaseLost = errors.New("rollup: hour lease lost")

// Run rolls up one hour: under the hour's lease (renewed while it works)
// it deletes the files that earlier runs killed before their swap left
// behind (their intents), lists the hour's live raw segments and rollups
// afresh, computes every tier in one pass, writes one file per tier, each
// announced by an intent before it is created, and swaps them for the old
// rollups with one catalog.ReplaceIntents, so a recompute replaces and
// never duplicates. It returns Result.Skipped, without error, when another
// owner holds the lease. On error the catalog is unchanged and the new
// files and their intents are removed; an error from losing the lease
// wraps ErrLeaseLost.
func Run(ctx context.Context, cat *catalog.Catalog, store lake.Store, job Job, opts Options) (Result, error) {
	opts = opts.withDefaults()
	var res Result
	if err := ValidateTiers(opts.Tiers); err != nil {
		return res, err
	}
	key := job.LeaseKey()
	lease, ok, err := cat.HoldLease(ctx, key, opts.Owner, opts.LeaseTTL, opts.Logger)
	if err != nil {
		return res, fmt.Errorf("rollup %s: %w", job.Dir(), err)
	}
	if !ok {
		res.Skipped = true
		return res, nil
	}
	defer func() {
		if err := lease.Release(); err != nil {
			opts.Logger.Warn("rollup lease release failed", "partition", job.Dir(), "err", err)
		}
	}()
	// Everything up to the swap runs in the lease's context: losing the
	// lease stops it.
	lctx := lease.Context()
	if n, err := lake.CleanIntents(lctx, cat, store, key, opts.Owner); err != nil {
		return res, fmt.Errorf("rollup %s: %w", job.Dir(), lease.WrapLost(err, ErrLeaseLost))
	} else if n > 0 {
		opts.Logger.Info("deleted uncommitted outputs of an earlier rollup", "partition", job.Dir(), "files", n)
	}
	// The snapshot time is the rollups' Created: a raw segment committed
	// after the listing below is newer than it, so Plan looks again.
	snapshot := opts.Now()
	start := catalog.PartitionStart(job.Day, job.Hour)
	raw, err := listHour(lctx, cat, lake.TableMetrics, job)
	if err != nil {
		return res, lease.WrapLost(err, ErrLeaseLost)
	}
	old, err := listHour(lctx, cat, Table, job)
	if err != nil {
		return res, lease.WrapLost(err, ErrLeaseLost)
	}
	h := newHour(start.UnixNano(), start.Add(time.Hour).UnixNano())
	var rows int64
	for _, s := range raw {
		rows += s.Rows
	}
	h.reserve(rows)
	for _, s := range raw {
		res.SourceRows += s.Rows
		res.BytesIn += s.Bytes
		if err := lctx.Err(); err != nil {
			return Result{}, fmt.Errorf("rollup %s: %w", job.Dir(), lease.WrapLost(err, ErrLeaseLost))
		}
		if err := readRaw(store, s.Path, h, opts.Progress); err != nil {
			return Result{}, fmt.Errorf("rollup %s: %w", job.Dir(), err)
		}
		if opts.Progress != nil {
			opts.Progress(1, s.Bytes, 0)
		}
	}
	if len(raw) == 0 {
		return res, nil // retention took the hour; keep its rollups
	}
	if err := h.capLabels(opts.MaxAttributeColumns); err != nil {
		return Result{}, fmt.Errorf("rollup %s: %w", job.Dir(), err)
	}
	res.PointsRead, res.Untimed, res.Series = h.rows, h.skipped, len(h.ser)
	res.PointsOut = int64(len(h.t))

	tiers := make([]int64, len(opts.Tiers))
	outs := make([]tierOut, len(opts.Tiers))
	for i, d := range opts.Tiers {
		tiers[i] = int64(d)
		outs[i].tier = d
		// At most one row per point, and per series and window.
		outs[i].reserve(min(len(h.t), len(h.ser)*int(time.Hour/d)))
	}
	var cur int32
	agg := NewAggregator(tiers, func(tier int, w *Window) { outs[tier].add(cur, w) })
	h.aggregate(agg, func(si int32) { cur = si })

	meta := fileMeta{tenant: job.Tenant, day: job.Day, hour: job.Hour, created: snapshot, sourceRows: res.SourceRows,
		replaces: catalog.Lineage(old)}
	out := lake.NewIntentStore(lctx, store, cat, key, opts.Owner)
	var written []catalog.Segment
	var re rowEncoder
	for i := range outs {
		if outs[i].len() == 0 {
			continue
		}
		if err := lctx.Err(); err != nil {
			return Result{}, out.Discard(fmt.Errorf("rollup %s: %w", job.Dir(), lease.WrapLost(err, ErrLeaseLost)))
		}
		seg, err := writeTier(out, h, &outs[i], meta, &re)
		if err != nil {
			return Result{}, out.Discard(fmt.Errorf("rollup %s: %w", job.Dir(), lease.WrapLost(err, ErrLeaseLost)))
		}
		seg.Created = snapshot
		written = append(written, seg)
		res.BytesOut += seg.Bytes
	}
	// Work that outlived its lease must not commit; renewing also extends
	// the lease through the swap.
	if err := lease.Renew(ctx); err != nil {
		return Result{}, out.Discard(fmt.Errorf("rollup %s: %w", job.Dir(), lease.WrapLost(err, ErrLeaseLost)))
	}
	for _, s := range old {
		res.Replaced = append(res.Replaced, s.ID)
	}
	if opts.BeforeReplace != nil {
		if err := opts.BeforeReplace(ctx, job); err != nil {
			return Result{}, out.Discard(fmt.Errorf("rollup %s: before replace: %w", job.Dir(), err))
		}
	}
	if err := cat.ReplaceIntents(ctx, key, opts.Owner, res.Replaced, written); err != nil {
		return Result{}, out.Discard(fmt.Errorf("rollup %s: %w", job.Dir(), lease.WrapLost(err, ErrLeaseLost)))
	}
	res.Outputs = written
	lake.FinishSwap(ctx, cat, store, old, written, opts.Logger)
	opts.Logger.Info("rolled up hour", "partition", job.Dir(), "raw_segments", len(raw), "points", res.PointsOut,
		"untimed", res.Untimed, "series", res.Series, "replaced", len(old), "outputs", len(written), "bytes_out", res.BytesOut)
	return res, nil
}

// listHour lists the live segments of table in the job's hour.
func listHour(ctx context.Context, cat *catalog.Catalog, table string, job Job) ([]catalog.Segment, error) {
	start := catalog.PartitionStart(job.Day, job.Hour)
	segs, err := cat.List(ctx, catalog.Filter{Table: table, Tenant: job.Tenant,
		From: start.UnixNano(), To: start.Add(time.Hour).UnixNano() - 1})
	if err != nil {
		return nil, fmt.Errorf("rollup %s: %w", job.Dir(), err)
	}
	out := segs[:0]
	for _, s := range segs {
		if s.Day == job.Day && s.Hour == job.Hour {
			out = append(out, s)
		}
	}
	return out, nil
}

func readRaw(store lake.Store, p string, h *hour, progress func(files, bytes, rows int64)) (err error) {
	r, err := lake.OpenSegment(store, p)
	if err != nil {
		return fmt.Errorf("open %q: %w", p, err)
	}
	defer r.Close()
	// parquet-go may panic on a damaged page: the run fails naming the
	// file, the process goes on.
	defer format.Recover(&err, "read %q", p)
	pf, err := openParquet(r, p)
	if err != nil {
		return err
	}
	var onGroup func(int64)
	if progress != nil {
		onGroup = func(rows int64) { progress(0, 0, rows) }
	}
	if err := h.addFile(pf, onGroup); err != nil {
		return fmt.Errorf("read %q: %w", p, err)
	}
	return nil
}

// openParquet opens a raw metrics file to roll it up: the page index is
// read (row groups are read whole, page by page).
func openParquet(r lake.ObjectReader, name string) (*parquet.File, error) {
	return format.Open(r, r.Size(), name, parquet.SkipBloomFilters(true), parquet.ReadBufferSize(64<<10))
}
