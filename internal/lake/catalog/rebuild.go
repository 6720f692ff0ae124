package catalog

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/lake/format"
)

// Footer metadata keys written by the lake writer (package format's).
const (
	MetaTable         = format.MetaTable
	MetaTenant        = format.MetaTenant
	MetaLevel         = format.MetaLevel
	MetaSchemaVersion = format.MetaSchemaVersion
	MetaMinTime       = format.MetaMinTime // decimal unix ns
	MetaMaxTime       = format.MetaMaxTime // decimal unix ns
	// MetaReplaces is the lineage of a compaction or rollup output: the
	// file ids (FileID) of the files its swap replaced, space-separated.
	// Rebuild drops the files a lake file's lineage names.
	MetaReplaces = format.MetaReplaces
)

// FileID is the id of the lake file at p: its name without ".parquet".
func FileID(p string) string { return strings.TrimSuffix(path.Base(p), ".parquet") }

// Lineage is the MetaReplaces value of an output that replaces segs.
func Lineage(segs []Segment) string {
	ids := make([]string, len(segs))
	for i, s := range segs {
		ids[i] = FileID(s.Path)
	}
	return strings.Join(ids, " ")
}

// SchemaHash identifies a schema by its column descriptors: hex of xxhash64
// over the sorted descriptors, each followed by "\n". Column order does not
// change the hash. ParquetSchemaHash defines the descriptors for files.
func SchemaHash(columns []string) string {
	sorted := slices.Clone(columns)
	slices.Sort(sorted)
	var h xxhash.Digest
	for _, c := range sorted {
		_, _ = h.WriteString(c)
		_, _ = h.WriteString("\n")
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// ParquetSchemaHash is SchemaHash over "<dotted leaf path> <type>" for each
// leaf column of s, so a type change is a schema change. The lake writer and
// Rebuild must both use it, or rebuilt rows would not match the hashes the
// writer recorded.
func ParquetSchemaHash(s *parquet.Schema) string {
	cols := s.Columns()
	desc := make([]string, len(cols))
	for i, path := range cols {
		leaf, _ := s.Lookup(path...)
		desc[i] = strings.Join(path, ".") + " " + leaf.Node.Type().String()
	}
	return SchemaHash(desc)
}

// RebuildStats reports what Rebuild found.
type RebuildStats struct {
	Files    int   // *.parquet files considered
	Segments int   // segments catalogued
	Rows     int64 // sum of catalogued rows
	Bytes    int64 // sum of catalogued file sizes
	Skipped  int   // hidden/temporary files and directories ignored
	// Intended counts files left out because they have an intent: the
	// uncommitted outputs of an upkeep run, deleted by the next holder of
	// its lease.
	Intended int
	// Replaced counts the segments catalogued as replaced (in Segments,
	// not in Rows and Bytes): marked so in the old catalog, or named by
	// the lineage (MetaReplaces) of another file, a compaction or rollup
	// output whose swap replaced them. Those of the second kind get a
	// move to the trash (ApplyMoves in package lake, or the next sweep).
	Replaced int
	Failed   []RebuildFailure
}

// RebuildFailure is a file Rebuild could not catalogue.
type RebuildFailure struct {
	Path string // relative to the lake root, slash-separated
	Err  error
}

// Rebuild recreates the segment rows from the Parquet files under root.
// Footers are read first, then all segment rows are replaced in one
// transaction, so readers see either the old or the new set. Files that
// cannot be read or disagree with their path go to RebuildStats.Failed and
// are left out. Services and MetricNames come from the dictionaries of
// top-level service_name and metric_name columns when those are fully
// dictionary-encoded, else stay unknown. Rows of files the old catalog had marked replaced stay
// replaced; queue positions, leases and intents are kept, and files with
// an intent are left out (RebuildStats.Intended). Writers and upkeep must be
// stopped while it runs: a segment added between the walk and the commit
// would be dropped. progress, if not nil, is called after each file.
func Rebuild(ctx context.Context, c *Catalog, root string, progress func(done, total int)) (RebuildStats, error) {
	var st RebuildStats
	paths, skipped, err := lakeFiles(root)
	if err != nil {
		return st, fmt.Errorf("catalog: rebuild %q: %w", root, err)
	}
	st.Files, st.Skipped = len(paths), skipped
	segs := make([]Segment, 0, len(paths))
	lineage := make([][]string, 0, len(paths))
	for i, rel := range paths {
		if err := ctx.Err(); err != nil {
			return st, fmt.Errorf("catalog: rebuild %q: %w", root, err)
		}
		s, replaces, err := readSegment(root, rel)
		if err != nil {
			st.Failed = append(st.Failed, RebuildFailure{Path: rel, Err: err})
		} else {
			segs = append(segs, s)
			lineage = append(lineage, replaces)
		}
		if progress != nil {
			progress(i+1, len(paths))
		}
	}
	kept := make([]Segment, 0, len(segs))
	err = c.inTx(ctx, func(tx *sql.Tx) error {
		if c.d.lockRebuild != "" {
			if _, err := tx.ExecContext(ctx, c.d.lockRebuild); err != nil {
				return fmt.Errorf("lock segments: %w", err)
			}
		}
		replaced, err := replacedPaths(ctx, tx)
		if err != nil {
			return err
		}
		intended, err := intentPaths(ctx, tx)
		if err != nil {
			return err
		}
		kept = kept[:0] // inTx may run this again
		// A file named by the lineage of another catalogued file was
		// replaced by it: all names count, so a chain of swaps is dropped
		// whole. Uncommitted outputs (intents) name live files: not theirs.
		named := map[string]bool{}
		for i, s := range segs {
			if !intended[s.Path] {
				for _, id := range lineage[i] {
					named[id] = true
				}
			}
		}
		now := c.now()
		var moves [][2]string
		for _, s := range segs {
			if intended[s.Path] {
				continue
			}
			s.ReplacedAt = replaced[s.Path]
			if s.ReplacedAt.IsZero() && named[FileID(s.Path)] {
				s.ReplacedAt = now
				moves = append(moves, [2]string{s.Path, TrashPath(s.Path)})
			}
			kept = append(kept, s)
		}
		// Names first: foreign keys cascade too, but not if a connection
		// was opened without them.
		if _, err := tx.ExecContext(ctx, `DELETE FROM segment_names`); err != nil {
			return fmt.Errorf("clear segment names: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM segments`); err != nil {
			return fmt.Errorf("clear segments: %w", err)
		}
		if err := c.insertSegments(ctx, tx, kept, nil, now, true); err != nil {
			return err
		}
		return c.recordMoves(ctx, tx, moves, now)
	})
	if err != nil {
		return st, fmt.Errorf("catalog: rebuild %q: %w", root, err)
	}
	st.Segments, st.Intended = len(kept), len(segs)-len(kept)
	for i := range kept {
		if !kept[i].ReplacedAt.IsZero() {
			st.Replaced++
			continue
		}
		st.Rows += kept[i].Rows
		st.Bytes += kept[i].Bytes
	}
	return st, nil
}

func replacedPaths(ctx context.Context, tx *sql.Tx) (map[string]time.Time, error) {
	rows, err := tx.QueryContext(ctx, `SELECT path, replaced_ns FROM segments WHERE replaced_ns IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("read replaced segments: %w", err)
	}
	defer rows.Close()
	m := make(map[string]time.Time)
	for rows.Next() {
		var p string
		var ns int64
		if err := rows.Scan(&p, &ns); err != nil {
			return nil, fmt.Errorf("read replaced segments: %w", err)
		}
		m[p] = time.Unix(0, ns).UTC()
	}
	return m, rows.Err()
}

// hidden follows the Hive/Spark convention: names starting with "." or "_"
// (".tmp-x.parquet", "_tmp/", "_SUCCESS") are not data.
func hidden(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// lakeFiles returns the sorted slash-separated paths of all visible
// *.parquet files under root.
func lakeFiles(root string) (paths []string, skipped int, err error) {
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		if hidden(d.Name()) {
			skipped++
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".parquet") || !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		paths = append(paths, filepath.ToSlash(rel))
		return nil
	})
	slices.Sort(paths)
	return paths, skipped, err
}

// readSegment builds a Segment from the path and the footer of one file,
// and returns the file ids its lineage (MetaReplaces) names.
func readSegment(root, rel string) (Segment, []string, error) {
	s, pf, err := readFooter(root, rel)
	if err != nil {
		return Segment{}, nil, err
	}
	var replaces []string
	if v, ok := pf.Lookup(MetaReplaces); ok {
		replaces = strings.Fields(v)
	}
	return s, replaces, nil
}

// readFooter builds a Segment from the path and the footer of one file.
func readFooter(root, rel string) (Segment, *parquet.File, error) {
	pt, err := parsePath(rel)
	if err != nil {
		return Segment{}, nil, err
	}
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return Segment{}, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Segment{}, nil, fmt.Errorf("stat %q: %w", rel, err)
	}
	pf, err := format.Open(f, fi.Size(), rel, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return Segment{}, nil, fmt.Errorf("read footer: %w", err)
	}
	s := Segment{
		Table: pt.table, Tenant: pt.tenant, Day: pt.day, Hour: pt.hour, Path: rel,
		Rows: pf.NumRows(), Bytes: fi.Size(), Created: fi.ModTime().UTC(),
	}
	for _, kv := range [...]struct{ key, want string }{{MetaTable, pt.table}, {MetaTenant, pt.tenant}} {
		// A missing key is accepted so files from other writers can be
		// imported; a present one must agree with the path.
		if v, ok := pf.Lookup(kv.key); ok && v != kv.want {
			return Segment{}, nil, fmt.Errorf("%q: footer %s=%q disagrees with path (%q)", rel, kv.key, v, kv.want)
		}
	}
	if v, ok := pf.Lookup(MetaLevel); ok {
		if s.Level, err = strconv.Atoi(v); err != nil || s.Level < 0 {
			return Segment{}, nil, fmt.Errorf("%q: footer %s=%q: want a non-negative integer", rel, MetaLevel, v)
		}
	}
	s.SchemaHash = ParquetSchemaHash(pf.Schema())
	s.Services = dictionaryValues(pf, format.ColServiceName)
	s.MetricNames = dictionaryValues(pf, format.ColMetricName)
	if s.MinTime, s.MaxTime, err = timeRange(pf, pt.table, rel); err != nil {
		return Segment{}, nil, err
	}
	if err := checkTimes(s.MinTime, s.MaxTime, s.Day, s.Hour); err != nil {
		return Segment{}, nil, fmt.Errorf("%q: %w", rel, err)
	}
	return s, pf, nil
}

// maxRebuildNames bounds the pruning names Rebuild records per segment and
// kind; beyond it the names are left unknown rather than bloat the index.
const maxRebuildNames = 1024

// dictionaryValues returns the distinct values of a top-level string column
// (format.DictionaryValues), sorted; nil when unknown.
func dictionaryValues(pf *parquet.File, column string) []string {
	return uniqueSorted(format.DictionaryValues(pf, column, maxRebuildNames))
}

// timeRange takes min/max from the footer keys, falling back to the time
// column's column-chunk statistics.
func timeRange(pf *parquet.File, table, rel string) (minT, maxT int64, err error) {
	minS, okMin := pf.Lookup(MetaMinTime)
	maxS, okMax := pf.Lookup(MetaMaxTime)
	if okMin && okMax {
		if minT, err = strconv.ParseInt(minS, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("%q: footer %s: %w", rel, MetaMinTime, err)
		}
		if maxT, err = strconv.ParseInt(maxS, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("%q: footer %s: %w", rel, MetaMaxTime, err)
		}
		return minT, maxT, nil
	}
	// The table's event-time column (format.TimeColumn; ColTimestamp for
	// tables sluice does not know).
	col := format.TimeColumn(table)
	found := false
	for _, rg := range pf.Metadata().RowGroups {
		for _, cc := range rg.Columns {
			md := &cc.MetaData
			if len(md.PathInSchema) != 1 || md.PathInSchema[0] != col {
				continue
			}
			lo, hi := md.Statistics.MinValue, md.Statistics.MaxValue
			if lo == nil || hi == nil {
				lo, hi = md.Statistics.Min, md.Statistics.Max // pre-2.x writers
			}
			if len(lo) != 8 || len(hi) != 8 {
				return 0, 0, fmt.Errorf("%q: no footer time keys and no int64 statistics for column %q", rel, col)
			}
			l, h := int64(binary.LittleEndian.Uint64(lo)), int64(binary.LittleEndian.Uint64(hi))
			if !found || l < minT {
				minT = l
			}
			if !found || h > maxT {
				maxT = h
			}
			found = true
		}
	}
	if !found {
		return 0, 0, fmt.Errorf("%q: no footer time keys and no statistics for time column %q", rel, col)
	}
	return minT, maxT, nil
}
