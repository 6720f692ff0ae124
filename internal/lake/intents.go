package lake

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

// IntentStore is the Store an upkeep run (compaction, rollup) writes its
// outputs through, under the catalog lease key held by owner: before
// creating an object it records an intent for it (catalog.AddIntent), so
// that if the run dies before its catalog swap the next holder of the
// lease finds the file and deletes it (CleanIntents). Create(p) writes the
// object at catalog.StagingPath(p), outside the Hive tree, so no glob
// reads it before the swap; catalog.ReplaceIntents journals its move to p
// and ApplyMoves does it. Create fails, with catalog.ErrLeaseNotHeld, once
// owner no longer holds the lease. Open of a path created through it
// opens the staged object; other calls go to the underlying Store. Safe
// for concurrent use.
type IntentStore struct {
	Store
	ctx        context.Context // of Create's catalog writes; Store.Create has none
	cat        *catalog.Catalog
	key, owner string

	mu    sync.Mutex
	paths []string
}

// NewIntentStore returns an IntentStore over store. ctx bounds the catalog
// writes of Create: the lease's context, so a lost lease stops them.
func NewIntentStore(ctx context.Context, store Store, cat *catalog.Catalog, key, owner string) *IntentStore {
	return &IntentStore{Store: store, ctx: ctx, cat: cat, key: key, owner: owner}
}

// Create records the intent, then creates the object.
func (s *IntentStore) Create(p string) (ObjectWriter, error) {
	if err := s.cat.AddIntent(s.ctx, s.key, s.owner, p); err != nil {
		return nil, fmt.Errorf("create %q: %w", p, err)
	}
	s.mu.Lock()
	s.paths = append(s.paths, p)
	s.mu.Unlock()
	return s.Store.Create(catalog.StagingPath(p))
}

// Open opens the staged object of a path created through s, else the
// object at p.
func (s *IntentStore) Open(p string) (ObjectReader, error) {
	s.mu.Lock()
	staged := slices.Contains(s.paths, p)
	s.mu.Unlock()
	if staged {
		return s.Store.Open(catalog.StagingPath(p))
	}
	return s.Store.Open(p)
}

// Discard removes every object created through s, committed or not, then
// forgets their intents, and returns cause with any failure of that
// joined. A file that cannot be removed keeps its intent, so the next
// holder of the lease retries. Call it when the run fails before its
// catalog swap.
func (s *IntentStore) Discard(cause error) error {
	s.mu.Lock()
	paths := s.paths
	s.paths = nil
	s.mu.Unlock()
	if len(paths) == 0 {
		return cause
	}
	err := RemoveAll(s.Store, stagedPaths(paths))
	if err == nil {
		// The lease may be lost or the run cancelled: forget the intents
		// anyway. If another owner claimed them, this deletes none.
		_, err = s.cat.DeleteIntents(context.WithoutCancel(s.ctx), s.owner, paths)
	}
	if err != nil {
		return fmt.Errorf("%w (and cleaning up: %w)", cause, err)
	}
	return cause
}

// CleanIntents deletes what runs that lost the lease key left behind:
// owner, which must hold the lease, claims the intents other owners
// recorded under key, removes their files and then forgets the intents.
// Files first: a crash in between leaves intents of missing files, which
// the next cleaning forgets. It returns the number of files cleaned.
// Call it after taking the lease and before recording intents of one's
// own.
func CleanIntents(ctx context.Context, cat *catalog.Catalog, store Store, key, owner string) (int, error) {
	stale, err := cat.ClaimIntents(ctx, key, owner)
	if err != nil || len(stale) == 0 {
		return 0, err
	}
	paths := make([]string, len(stale))
	for i, in := range stale {
		paths[i] = in.Path
	}
	// Staged, or in place if an older sluice wrote it.
	if err := RemoveAll(store, append(stagedPaths(paths), paths...)); err != nil {
		return 0, fmt.Errorf("clean up after a run that lost lease %q: %w", key, err)
	}
	if _, err := cat.DeleteIntents(ctx, owner, paths); err != nil {
		return 0, fmt.Errorf("clean up after a run that lost lease %q: %w", key, err)
	}
	return len(stale), nil
}

func stagedPaths(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = catalog.StagingPath(p)
	}
	return out
}
