package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

// orphanDir receives uncommitted files when the catalog has never been
// committed to, which is also what a wrong catalog.dsn looks like: moving
// keeps them recoverable (lake rebuild-catalog) instead of deleting a lake.
const orphanDir = "_orphans"

// sweepResult counts what sweepOrphans did.
type sweepResult struct {
	Removed, Quarantined, Temp int
}

// sweepOrphans removes *.parquet files in the lake layout
// (<table>/tenant=<t>/dt=<day>/hour=<HH>/<id>.parquet under root) that the
// catalog does not list, live or replaced, and leftover temporary files
// of the local store (<root>/_tmp/*.tmp). Nothing else is touched: hidden
// names, other depths and other extensions are skipped. It must run before
// any writer of this lake starts (the lake lock guarantees none runs).
func sweepOrphans(ctx context.Context, cat *catalog.Catalog, root string, committed int64, log *slog.Logger) (sweepResult, error) {
	var res sweepResult
	segs, err := cat.List(ctx, catalog.Filter{IncludeReplaced: true})
	if err != nil {
		return res, fmt.Errorf("list catalog: %w", err)
	}
	known := make(map[string]struct{}, len(segs))
	for _, s := range segs {
		known[s.Path] = struct{}{}
	}
	quarantine := len(segs) == 0 && committed == 0
	files, err := layoutFiles(root)
	if err != nil {
		return res, err
	}
	for _, rel := range files {
		if _, ok := known[rel]; ok {
			continue
		}
		full := filepath.Join(root, filepath.FromSlash(rel))
		if quarantine {
			dst := filepath.Join(root, orphanDir, filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return res, fmt.Errorf("quarantine %q: %w", rel, err)
			}
			if err := os.Rename(full, dst); err != nil {
				return res, fmt.Errorf("quarantine %q: %w", rel, err)
			}
			log.Warn("moved a lake file the catalog does not know to the orphan directory; if it is not the output of a crashed first run, check catalog.dsn or run `sluice lake rebuild-catalog`",
				"path", rel, "to", filepath.Join(orphanDir, rel))
			res.Quarantined++
			continue
		}
		if err := os.Remove(full); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return res, fmt.Errorf("remove orphan %q: %w", rel, err)
		}
		log.Info("removed uncommitted lake file (its records are replayed from the queue)", "path", rel)
		res.Removed++
	}
	tmp := filepath.Join(root, "_tmp")
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

// layoutFiles lists the slash-separated paths of regular *.parquet files
// exactly at <table>/tenant=*/dt=*/hour=*/ under root.
func layoutFiles(root string) ([]string, error) {
	prefixes := []string{"", "tenant=", "dt=", "hour="}
	var out []string
	var walk func(dir, rel string, depth int) error
	walk = func(dir, rel string, depth int) error {
		ents, err := os.ReadDir(dir)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && depth == 0 {
				return nil
			}
			return fmt.Errorf("read %q: %w", dir, err)
		}
		for _, e := range ents {
			name := e.Name()
			if strings.HasPrefix(name, "_") || strings.HasPrefix(name, ".") {
				continue // hidden from Hive readers: queue, tmp, orphans, locks
			}
			if depth < len(prefixes) {
				if e.IsDir() && strings.HasPrefix(name, prefixes[depth]) && len(name) > len(prefixes[depth]) {
					if err := walk(filepath.Join(dir, name), path.Join(rel, name), depth+1); err != nil {
						return err
					}
				}
				continue
			}
			if e.Type().IsRegular() && strings.HasSuffix(name, ".parquet") && len(name) > len(".parquet") {
				out = append(out, path.Join(rel, name))
			}
		}
		return nil
	}
	return out, walk(root, "", 0)
}
