package lake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

// Renamer is a Store that moves objects itself: a rename on a local
// filesystem, a server-side copy then a delete in S3. Move falls back to
// a copy through the Store for others.
type Renamer interface {
	// Rename moves the object at src to dst, replacing any object at
	// dst. A missing src fails with an error matching fs.ErrNotExist.
	Rename(src, dst string) error
}

// Move moves the object at src to dst in store. A missing src fails with
// an error matching fs.ErrNotExist; an object already at dst (an earlier
// move that stopped before deleting src) is replaced.
func Move(store Store, src, dst string) error {
	if r, ok := store.(Renamer); ok {
		return r.Rename(src, dst)
	}
	in, err := store.Open(src)
	if err != nil {
		return fmt.Errorf("move %q: %w", src, err)
	}
	defer in.Close()
	if err := store.Remove(dst); err != nil {
		return fmt.Errorf("move %q to %q: %w", src, dst, err)
	}
	w, err := store.Create(dst)
	if err != nil {
		return fmt.Errorf("move %q to %q: %w", src, dst, err)
	}
	if _, err := io.Copy(w, io.NewSectionReader(in, 0, in.Size())); err != nil {
		return errors.Join(fmt.Errorf("move %q to %q: %w", src, dst, err), w.Abort())
	}
	if err := w.Commit(); err != nil {
		return fmt.Errorf("move %q to %q: %w", src, dst, err)
	}
	return store.Remove(src)
}

// Rename implements Renamer: a rename(2), with both directories fsynced.
func (s *LocalStore) Rename(src, dst string) error {
	if err := s.renameNoSync(src, dst); err != nil {
		return err
	}
	return s.syncDirsOf([]string{src, dst})
}

// renameNoSync is rename(2) alone; the caller makes it durable with
// syncDirsOf, once for a batch.
func (s *LocalStore) renameNoSync(src, dst string) error {
	from, err := s.full(src)
	if err != nil {
		return err
	}
	to, err := s.full(dst)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return fmt.Errorf("rename %q to %q: %w", src, dst, err)
	}
	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("rename %q to %q: %w", src, dst, err)
	}
	return nil
}

// syncDirsOf fsyncs each distinct directory of the objects at paths.
func (s *LocalStore) syncDirsOf(paths []string) error {
	seen := map[string]bool{}
	for _, p := range paths {
		full, err := s.full(p)
		if err != nil {
			return err
		}
		dir := filepath.Dir(full)
		if seen[dir] {
			continue
		}
		seen[dir] = true
		if err := syncDir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("sync %q: %w", dir, err)
		}
	}
	return nil
}

// OpenSegment opens the file of the catalogued segment at p wherever the
// swap protocol has it (catalog.Locations): in place, or, for a reader
// that listed the catalog just before or after a swap, still staged or
// already in the trash. A file only moves forward through those places,
// so trying them in that order finds it unless the sweeper deleted it
// (past its grace period); the error is then the one from p.
func OpenSegment(store Store, p string) (ObjectReader, error) {
	r, err := store.Open(p)
	if err == nil || !errors.Is(err, fs.ErrNotExist) || catalog.IsOutsideTree(p) {
		return r, err
	}
	for _, loc := range catalog.Locations(p) {
		r, lerr := store.Open(loc)
		if lerr == nil {
			return r, nil
		}
		if !errors.Is(lerr, fs.ErrNotExist) {
			return nil, lerr
		}
	}
	return nil, err
}

// maxFailedMovesInARow is how many moves may fail one after the other
// before ApplyMoves stops trying the rest.
const maxFailedMovesInARow = 3

// ApplyMoves does the catalog's pending moves (catalog.Move) whose source
// is in srcs, or all of them when srcs is nil, in the order they were
// committed, then deletes them. A move whose source is gone is done: an
// earlier or concurrent ApplyMoves did it. A move into the trash whose
// file is still staged (its own move in was not done yet) takes it from
// there. It returns the number of moves done; a failed move stays
// pending for the next ApplyMoves (the sweeper's), and the others go on,
// except that a swap whose added file failed to come into place keeps
// its replaced files in place (pending) too, and that after
// maxFailedMovesInARow failures in a row the rest stay pending untried.
// Safe to run concurrently with itself in any number of processes.
func ApplyMoves(ctx context.Context, cat *catalog.Catalog, store Store, srcs []string, log *slog.Logger) (int, error) {
	moves, err := cat.Moves(ctx)
	if err != nil || len(moves) == 0 {
		return 0, err
	}
	if srcs != nil {
		want := make(map[string]bool, len(srcs))
		for _, s := range srcs {
			want[s] = true
		}
		moves = slices.DeleteFunc(moves, func(m catalog.Move) bool { return !want[m.Src] })
	}
	// A local store renames without syncing, then syncs each directory
	// once before the moves are forgotten: one partition's swap touches
	// three directories, not two per file.
	local, _ := store.(*LocalStore)
	move := func(src, dst string) error {
		if local != nil {
			return local.renameNoSync(src, dst)
		}
		return Move(store, src, dst)
	}
	var done []int64
	var touched []string
	var errs []error
	// held holds the swaps (by commit time: one transaction's moves share
	// it) one of whose files failed to come into place: their replaced
	// files stay in the Hive tree until it has, so that a glob counts
	// their rows once meanwhile, rather than not at all.
	held := map[time.Time]bool{}
	// failing counts the moves that failed in a row: past
	// maxFailedMovesInARow the store is taken for down (S3 answering
	// 5xx, or not at all, each failure after its retries and backoff)
	// and the rest stay pending for a later run, rather than each
	// taking its full retries against a dead server.
	failing := 0
	for i, m := range moves {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		if failing >= maxFailedMovesInARow {
			errs = append(errs, fmt.Errorf("%d moves failed in a row: %d left pending for a later run", failing, len(moves)-i))
			break
		}
		if held[m.Created] && strings.HasPrefix(m.Dst, catalog.TrashDir+"/") {
			continue
		}
		err := move(m.Src, m.Dst)
		if errors.Is(err, fs.ErrNotExist) && strings.HasPrefix(m.Dst, catalog.TrashDir+"/") {
			err = move(catalog.StagingPath(m.Src), m.Dst)
			touched = append(touched, catalog.StagingPath(m.Src))
		}
		touched = append(touched, m.Src, m.Dst)
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
			if r, oerr := store.Open(m.Dst); oerr == nil {
				_ = r.Close()
			} else if log != nil && strings.HasPrefix(m.Src, catalog.StagingDir+"/") {
				// A later swap that replaced the file before this move was
				// done took it from _staging/ into the trash (and the
				// sweeper may have deleted it since): nothing is missing.
				// Only a file the catalog still lists as live is.
				if live, lerr := cat.IsLive(ctx, m.Dst); lerr != nil || live {
					log.Warn("a catalogued file is neither staged nor in place", "path", m.Dst, "err", lerr)
				}
			}
		}
		if err != nil {
			if strings.HasPrefix(m.Src, catalog.StagingDir+"/") {
				held[m.Created] = true
			}
			errs = append(errs, err)
			failing++
			continue
		}
		failing = 0
		done = append(done, m.ID)
	}
	if local != nil && len(done) > 0 {
		if err := local.syncDirsOf(touched); err != nil {
			return 0, fmt.Errorf("lake: apply moves: %w", errors.Join(append(errs, err)...))
		}
	}
	if len(done) > 0 {
		if _, err := cat.DeleteMoves(context.WithoutCancel(ctx), done); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return len(done), fmt.Errorf("lake: apply moves: %w", err)
	}
	return len(done), nil
}

// FinishSwap does the moves a committed swap of removed for added
// journaled (ApplyMoves): the added files into place from their staging
// paths, then the removed ones into the trash. The swap is committed
// either way: a failure is logged, and the sweeper does the moves left.
func FinishSwap(ctx context.Context, cat *catalog.Catalog, store Store, removed, added []catalog.Segment, log *slog.Logger) {
	srcs := make([]string, 0, len(removed)+len(added))
	for _, s := range added {
		srcs = append(srcs, catalog.StagingPath(s.Path))
	}
	for _, s := range removed {
		srcs = append(srcs, s.Path)
	}
	if _, err := ApplyMoves(context.WithoutCancel(ctx), cat, store, srcs, log); err != nil && log != nil {
		log.Warn("swap committed, but moving its files failed; the next sweep moves them", "err", err)
	}
}
