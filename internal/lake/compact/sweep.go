package compact

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
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
	// Owner is the sweeper's lease owner; default host/pid/random.
	Owner string
}

// sweepLeaseTTL is the lease the sweeper takes on a partition whose
// intents it cleans; HoldLease renews it while the files go.
const sweepLeaseTTL = time.Minute

// SweepResult says what Sweep did (or, with DryRun, would do).
type SweepResult struct {
	Segments int   // replaced segments forgotten by the catalog
	Files    int   // files deleted (or already gone)
	Bytes    int64 // their catalogued size
	Waiting  int   // replaced segments still inside the grace period
	// Uncommitted counts the files of unfinished runs deleted (with
	// DryRun: found), those whose intents' lease no one holds.
	Uncommitted int
	// UncommittedLeased counts intents left alone because their lease is
	// held: a run in progress, or a killed one whose lease has not expired.
	UncommittedLeased int
	// Moved counts the moves of committed swaps that their run left
	// undone (killed, or a failed rename) and the sweep did (with DryRun:
	// found): replaced files still in the Hive tree, new ones still staged.
	Moved int
	// Staged counts staged files that neither an intent nor a pending
	// move names, deleted (with DryRun: found).
	Staged int
	// Held counts replaced segments past their grace whose files stay
	// because their move to the trash is still pending (sweepReplaced).
	Held int
}

// Sweep deletes the files of segments replaced more than Grace ago, by
// compaction or by retention (Replace(ids, nil)), then forgets their
// catalog rows. Files go first: a crash in between leaves replaced rows
// whose files are gone, which no reader lists (they are not live) and the
// next Sweep removes (a missing file is not an error). Deleting rows first
// would instead leave files nothing refers to. Sweep never touches a live
// segment's file, and it is safe to run concurrently with compaction,
// ingestion and another Sweep.
//
// It also deletes the files of intents (catalog.Intent) whose lease no one
// holds, left by compactions and rollups killed before their swap: for
// each such lease it takes the lease itself, so never while another owner
// holds it, and cleans up as the next run there would (lake.CleanIntents).
// No grace applies: no reader of the catalog ever listed those files.
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
	if opts.Owner == "" {
		opts.Owner = defaultOwner("sweep")
	}
	// Moves first, so replaced files are in the trash before their
	// grace is checked; one failing does not hold the others up.
	err := errors.Join(sweepMoves(ctx, cat, store, opts, &res), sweepReplaced(ctx, cat, store, opts, &res),
		sweepIntents(ctx, cat, store, opts, &res), sweepStaged(ctx, cat, store, opts, &res))
	if err != nil {
		return res, fmt.Errorf("compact: sweep: %w", err)
	}
	return res, nil
}

// sweepReplaced deletes the files of segments replaced more than Grace
// ago, then their rows.
func sweepReplaced(ctx context.Context, cat *catalog.Catalog, store lake.Store, opts SweepOptions, res *SweepResult) error {
	segs, err := cat.List(ctx, catalog.Filter{Table: opts.Table, Tenant: opts.Tenant, IncludeReplaced: true})
	if err != nil {
		return err
	}
	// A replaced file whose move to the trash is still pending stays: its
	// move failed, or ApplyMoves held it because the file replacing it is
	// not in place yet; deleting it would leave a glob over the Hive tree
	// without its rows. A later sweep moves it, then deletes it.
	moves, err := cat.Moves(ctx)
	if err != nil {
		return err
	}
	pending := make(map[string]bool, len(moves))
	for _, m := range moves {
		pending[m.Src] = true
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
		if pending[s.Path] && !opts.DryRun {
			res.Held++
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !opts.DryRun {
			// In the trash, or in place if its move failed.
			if err := lake.RemoveAll(store, []string{catalog.TrashPath(s.Path), s.Path}); err != nil {
				return err
			}
		}
		res.Files++
		res.Bytes += s.Bytes
		ids = append(ids, s.ID)
	}
	if opts.DryRun || len(ids) == 0 {
		res.Segments = len(ids)
		return nil
	}
	// Another Sweep may have forgotten some already; count only ours.
	n, err := cat.DeleteReplaced(ctx, ids)
	if err != nil {
		return err
	}
	res.Segments = n
	opts.Logger.Info("swept replaced segments", "files", res.Files, "bytes", res.Bytes,
		"segments", n, "waiting", res.Waiting, "held", res.Held, "grace", opts.Grace)
	return nil
}

// sweepIntents cleans the intents of opts' table and tenant under every
// lease it can take.
func sweepIntents(ctx context.Context, cat *catalog.Catalog, store lake.Store, opts SweepOptions, res *SweepResult) error {
	intents, err := cat.Intents(ctx)
	if err != nil {
		return err
	}
	keys := map[string]int{} // lease key -> intents
	for _, in := range intents {
		if (opts.Table == "" || in.Table == opts.Table) && (opts.Tenant == "" || in.Tenant == opts.Tenant) {
			keys[in.LeaseKey]++
		}
	}
	if opts.DryRun {
		for _, n := range keys {
			res.Uncommitted += n
		}
		return nil
	}
	for _, key := range slices.Sorted(maps.Keys(keys)) {
		if err := ctx.Err(); err != nil {
			return err
		}
		lease, ok, err := cat.HoldLease(ctx, key, opts.Owner, sweepLeaseTTL, opts.Logger)
		if err != nil {
			return err
		}
		if !ok {
			res.UncommittedLeased += keys[key]
			continue
		}
		n, err := lake.CleanIntents(lease.Context(), cat, store, key, opts.Owner)
		if rerr := lease.Release(); rerr != nil && err == nil {
			err = rerr
		}
		if err != nil {
			return err
		}
		res.Uncommitted += n
		if n > 0 {
			opts.Logger.Info("deleted uncommitted outputs of a killed run", "lease", key, "files", n)
		}
	}
	return nil
}

// sweepMoves does the moves that committed swaps left pending: their run
// was killed between its catalog commit and its moves, or a move failed.
// It is not limited to opts' table and tenant: a move is a committed
// swap's unfinished business, whoever's it is.
func sweepMoves(ctx context.Context, cat *catalog.Catalog, store lake.Store, opts SweepOptions, res *SweepResult) error {
	if opts.DryRun {
		moves, err := cat.Moves(ctx)
		res.Moved = len(moves)
		return err
	}
	n, err := lake.ApplyMoves(ctx, cat, store, nil, opts.Logger)
	res.Moved = n
	if n > 0 {
		opts.Logger.Info("finished the file moves of committed swaps", "moves", n)
	}
	return err
}

// sweepStaged deletes staged files that no intent and no pending move
// names: left by a run whose intent was claimed and cleaned before its
// late write landed. The walk comes first, then intents, then moves: a
// staged file has an intent from before it exists until its swap turns
// the intent into a move in one transaction, and the move is deleted only
// after the file left, so every staged file the walk saw that is still
// there is in one of the two listings, unless it is an orphan.
func sweepStaged(ctx context.Context, cat *catalog.Catalog, store lake.Store, opts SweepOptions, res *SweepResult) error {
	var staged []string
	err := store.Walk(catalog.StagingDir+"/", func(p string, _ int64) error {
		staged = append(staged, p)
		return nil
	})
	if err != nil || len(staged) == 0 {
		return err
	}
	intents, err := cat.Intents(ctx)
	if err != nil {
		return err
	}
	moves, err := cat.Moves(ctx)
	if err != nil {
		return err
	}
	known := make(map[string]bool, len(intents)+len(moves))
	for _, in := range intents {
		known[catalog.StagingPath(in.Path)] = true
	}
	for _, m := range moves {
		known[m.Src] = true
	}
	var orphans []string
	for _, p := range staged {
		if !known[p] {
			orphans = append(orphans, p)
		}
	}
	res.Staged = len(orphans)
	if opts.DryRun || len(orphans) == 0 {
		return nil
	}
	if err := lake.RemoveAll(store, orphans); err != nil {
		return err
	}
	opts.Logger.Info("deleted staged files no run will swap in", "files", len(orphans))
	return nil
}
