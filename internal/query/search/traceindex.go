package search

import (
	"fmt"
	"sync"

	"github.com/parquet-go/parquet-go/bloom"

	"github.com/sluice-dev/sluice/internal/lake/format"
)

// traceIndex is what a trace lookup needs from one traces file, kept in
// memory so that a lookup without a time hint does not parse the footer
// of every file: per row group, the trace_id min/max and bloom filter.
type traceIndex struct {
	groups []traceGroup
}

type traceGroup struct {
	min, max string
	bloom    bloom.SplitBlockFilter // nil: no filter, every id may be present
}

// mayHold reports whether row group g may hold trace id (hash: its
// XXH64, as parquet's bloom filters use).
func (ix *traceIndex) mayHold(g int, id string, hash uint64) bool {
	tg := &ix.groups[g]
	if tg.min != "" && (id < tg.min || id > tg.max) {
		return false
	}
	return tg.bloom == nil || tg.bloom.Check(hash)
}

// traceIndexes caches traceIndex by path; files are immutable, so entries
// never go stale. Entries are small (a bloom filter of a few KiB per row
// group); past maxTraceIndexes the map is simply dropped and refilled.
type traceIndexes struct {
	mu sync.Mutex
	m  map[string]*traceIndex
}

const maxTraceIndexes = 20000

func (t *traceIndexes) get(p string) *traceIndex {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[p]
}

func (t *traceIndexes) put(p string, ix *traceIndex) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil || len(t.m) >= maxTraceIndexes {
		t.m = map[string]*traceIndex{}
	}
	t.m[p] = ix
}

// buildTraceIndex reads the statistics and bloom filters of trace_id.
func buildTraceIndex(lf *lakeFile) (*traceIndex, error) {
	ix := &traceIndex{groups: make([]traceGroup, len(lf.pf.RowGroups()))}
	tc := lf.col(format.ColTraceID)
	if tc < 0 {
		return ix, nil
	}
	for g, rg := range lf.pf.RowGroups() {
		tg := &ix.groups[g]
		s, _ := lf.stats(g, tc)
		if s.MinValue != nil && s.MaxValue != nil && len(s.MinValue) > 0 {
			tg.min, tg.max = string(s.MinValue), string(s.MaxValue)
		}
		bf := rg.ColumnChunks()[tc].BloomFilter()
		if bf == nil {
			continue
		}
		b := make([]byte, bf.Size())
		if _, err := bf.ReadAt(b, 0); err != nil {
			return nil, fmt.Errorf("read trace_id bloom filter of %q row group %d: %w", lf.path, g, err)
		}
		tg.bloom = bloom.MakeSplitBlockFilter(b)
	}
	return ix, nil
}
