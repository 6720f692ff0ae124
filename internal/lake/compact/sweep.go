package compact

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

// DefaultGrace is how long Sweep leaves a replaced file in place: longer
// than any query that could have listed it before it was replaced.
const DefaultGrace = 10 * time.Minute

// SweepOptions configure Sweep. Zero values take the defaults.
type SweepOptions struct {
	// Grace: only segments replaced at least this long ago are swept.
	// Default DefaultGrace; a negative value means no grace at all.
	Grace  time.Duration
	Now    func() time.Time // default time.Now
	Logger *slog.Logger     // default slog.Default()
	// Table and Tenant restrict the sweep; "" means all.
	Table, Tenant string
	// DryRun lists what would be swept without deleting anything.
	DryRun bool
}

// SweepResult says what Sweep did (or, with DryRun, would do).
type SweepResult struct {
	Segments int   // replaced segments forgotten by the catalog
	Files    int   // files deleted (or already gone)
	Bytes    int64 // their catalogued size
	Waiting  int   // replaced segments still inside the grace period
}

// Sweep deletes the files of segments replaced more than Grace ago, by
// compaction or by retention (Replace(ids, nil)), then forgets their
// catalog rows. Files go first: a crash in between leaves replaced rows
// whose files are gone, which no reader lists (they are not live) and the
// next Sweep removes (a missing file is not an error). Deleting rows first
// would instead leave files nothing refers to. Sweep never touches a live
// segment's file, and it is safe to run concurrently with compaction,
// ingestion and another Sweep.
func Sweep(ctx context.Context, cat *catalog.Catalog, store lake.Store, opts SweepOptions) (SweepResult, error) {
	var res SweepResult
	if opts.Grace == 0 {
		opts.Grace = DefaultGrace
	}
	opts.Grace = max(opts.Grace, 0)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	segs, err := cat.List(ctx, catalog.Filter{Table: opts.Table, Tenant: opts.Tenant, IncludeReplaced: true})
	if err != nil {
		return res, fmt.Errorf("compact: sweep: %w", err)
	}
	cutoff := opts.Now().Add(-opts.Grace)
	var ids []int64
	for _, s := range segs {
		if s.ReplacedAt.IsZero() {
			continue
		}
		if s.ReplacedAt.After(cutoff) {
			res.Waiting++
			continue
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if !opts.DryRun {
			if err := store.Remove(s.Path); err != nil {
				return res, fmt.Errorf("compact: sweep: remove %q: %w", s.Path, err)
			}
		}
		res.Files++
		res.Bytes += s.Bytes
		ids = append(ids, s.ID)
	}
	if opts.DryRun || len(ids) == 0 {
		res.Segments = len(ids)
		return res, nil
	}
	// Another Sweep may have forgotten some already; count only ours.
	n, err := cat.DeleteReplaced(ctx, ids)
	if err != nil {
		return res, fmt.Errorf("compact: sweep: %w", err)
	}
	res.Segments = n
	opts.Logger.Info("swept replaced segments", "files", res.Files, "bytes", res.Bytes,
		"segments", n, "waiting", res.Waiting, "grace", opts.Grace)
	return res, nil
}
