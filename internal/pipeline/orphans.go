package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/compact"
)

// orphanDir receives uncommitted files when the catalog has never been
// committed to, which is also what a wrong catalog.dsn looks like: moving
// keeps them recoverable (lake rebuild-catalog) instead of deleting a lake.
const orphanDir = "_orphans"

// sweepResult counts what sweepOrphans did.
type sweepResult struct {
	Removed, Quarantined, Temp int
	Busy                       int // left alone: their partition's compaction lease is held
}

// sweepOrphans removes *.parquet files in the lake layout
// (<table>/tenant=<t>/dt=<day>/hour=<HH>/<id>.parquet in store) that the
// catalog does not list, as a segment (live or replaced) or an intent, and leftover temporary files
// of a local store (<root>/_tmp/*.tmp). Nothing else is touched: hidden
// names, other depths and other extensions are skipped. It must run before
// any writer of this lake starts (the lake lock guarantees none runs).
//
// Upkeep does not take the lake lock: a compaction or rollup in another
// process writes its outputs under their final names before its catalog
// swap, each after recording an intent for it, so files with an intent are
// left to upkeep (lake.CleanIntents). Besides, a partition is swept only
// under its compaction lease, and skipped while someone else holds it;
// its orphans go at a later start.
func sweepOrphans(ctx context.Context, cat *catalog.Catalog, store lake.Store, committed int64, log *slog.Logger) (res sweepResult, err error) {
	owner := fmt.Sprintf("orphan-sweep/%d/%d", os.Getpid(), time.Now().UnixNano())
	leased := map[string]bool{} // partition dir -> we hold its lease
	defer func() {
		for dir, ours := range leased {
			if ours {
				if rerr := cat.ReleaseLease(context.WithoutCancel(ctx), compact.LeaseKeyForDir(dir), owner); rerr != nil {
					log.Warn("orphan sweep: release partition lease", "partition", dir, "err", rerr)
				}
			}
		}
	}()
	// Files first, then intents, then segments: a file an upkeep run
	// writes has its intent before it exists, and its intent becomes a
	// segment in one transaction, so every such file seen by the walk is
	// in one of the two listings.
	files, err := layoutFiles(store)
	if err != nil {
		return res, err
	}
	intents, err := cat.Intents(ctx)
	if err != nil {
		return res, fmt.Errorf("list catalog intents: %w", err)
	}
	segs, err := cat.List(ctx, catalog.Filter{IncludeReplaced: true})
	if err != nil {
		return res, fmt.Errorf("list catalog: %w", err)
	}
	known := make(map[string]struct{}, len(segs)+len(intents))
	for _, s := range segs {
		known[s.Path] = struct{}{}
	}
	// Outputs of an upkeep run, in progress or killed: the next holder of
	// their lease, or the upkeep sweeper, deletes those of a killed run.
	for _, in := range intents {
		known[in.Path] = struct{}{}
	}
	quarantine := len(segs) == 0 && committed == 0
	for _, rel := range files {
		if _, ok := known[rel]; ok {
			continue
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		dir := path.Dir(rel)
		ours, seen := leased[dir]
		if !seen {
			ours, err = cat.TryLease(ctx, compact.LeaseKeyForDir(dir), owner, time.Minute)
			if err != nil {
				return res, fmt.Errorf("lease partition %q: %w", dir, err)
			}
			leased[dir] = ours
			if !ours {
				log.Info("left uncatalogued files of a partition under compaction alone", "partition", dir)
			}
		}
		if !ours {
			res.Busy++
			continue
		}
		if quarantine {
			dst := path.Join(orphanDir, rel)
			if err := moveObject(store, rel, dst); err != nil {
				return res, fmt.Errorf("quarantine %q: %w", rel, err)
			}
			log.Warn("moved a lake file the catalog does not know to the orphan directory; if it is not the output of a crashed first run, check catalog.dsn or run `sluice lake rebuild-catalog`",
				"path", rel, "to", dst)
			res.Quarantined++
			continue
		}
		if err := store.Remove(rel); err != nil {
			return res, fmt.Errorf("remove orphan %q: %w", rel, err)
		}
		log.Info("removed uncommitted lake file (its records are replayed from the queue)", "path", rel)
		res.Removed++
	}
	local, ok := store.(*lake.LocalStore)
	if !ok {
		// Object stores have no temporary objects: an interrupted upload
		// is an incomplete multipart upload, left to the bucket's
		// lifecycle rule (docs/s3.md).
		return res, nil
	}
	tmp := filepath.Join(local.Root, "_tmp")
	ents, err := os.ReadDir(tmp)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return res, fmt.Errorf("read %q: %w", tmp, err)
	}
	for _, e := range ents {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".tmp") {
			if err := os.Remove(filepath.Join(tmp, e.Name())); err == nil {
				res.Temp++
			}
		}
	}
	if res.Temp > 0 {
		log.Info("removed temporary files of an interrupted lake write", "dir", tmp, "files", res.Temp)
	}
	return res, nil
}

// moveObject moves src to dst in store: a rename in a local store, a copy
// then a delete elsewhere. A dst already there is an earlier move that
// stopped before the delete.
func moveObject(store lake.Store, src, dst string) error {
	if local, ok := store.(*lake.LocalStore); ok {
		full := filepath.Join(local.Root, filepath.FromSlash(dst))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		return os.Rename(filepath.Join(local.Root, filepath.FromSlash(src)), full)
	}
	r, err := store.Open(src)
	if err != nil {
		return err
	}
	defer r.Close()
	w, err := store.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, io.NewSectionReader(r, 0, r.Size())); err != nil {
		return errors.Join(err, w.Abort())
	}
	if err := w.Commit(); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return store.Remove(src)
}

// layoutFiles lists the slash-separated paths of *.parquet objects
// exactly at <table>/tenant=*/dt=*/hour=*/ in store.
func layoutFiles(store lake.Store) ([]string, error) {
	var out []string
	err := store.Walk("", func(p string, _ int64) error {
		if inLayout(p) {
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

func inLayout(p string) bool {
	parts := strings.Split(p, "/")
	if len(parts) != 5 {
		return false
	}
	for i, pre := range []string{"", "tenant=", "dt=", "hour=", ""} {
		name := parts[i]
		if strings.HasPrefix(name, "_") || strings.HasPrefix(name, ".") {
			return false // hidden from Hive readers: queue, tmp, orphans, locks
		}
		if !strings.HasPrefix(name, pre) || len(name) == len(pre) {
			return false
		}
	}
	return strings.HasSuffix(parts[4], ".parquet") && len(parts[4]) > len(".parquet")
}
