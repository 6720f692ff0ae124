package search

import (
	"container/list"
	"fmt"
	"sync"

	"github.com/sluice-dev/sluice/internal/lake"
)

// fileCache keeps recently used lake files open with their parsed footers:
// lake files are immutable, and parsing a footer costs more than scanning
// a small file. parquet.File is safe for concurrent reads (its lazily read
// indexes and bloom filters are atomic), so one entry serves many queries.
// An evicted entry is closed once its last user releases it.
type fileCache struct {
	store lake.Store
	max   int

	mu  sync.Mutex
	m   map[string]*cacheEntry
	lru list.List // of *cacheEntry, most recent first
}

type cacheEntry struct {
	lf      *lakeFile
	refs    int
	evicted bool
	elem    *list.Element
}

func newFileCache(store lake.Store, max int) *fileCache {
	return &fileCache{store: store, max: max, m: map[string]*cacheEntry{}}
}

// acquire returns the open file at p, checked to hold table for tenant;
// the caller calls release(lf) when done with it.
func (c *fileCache) acquire(p, table, tenant string) (*lakeFile, error) {
	c.mu.Lock()
	if e, ok := c.m[p]; ok {
		e.refs++
		c.lru.MoveToFront(e.elem)
		c.mu.Unlock()
		if e.lf.table != table || e.lf.tenant != tenant {
			c.release(e.lf)
			return nil, fmt.Errorf("open %q: holds %s of tenant %q, want %s of %q", p, e.lf.table, e.lf.tenant, table, tenant)
		}
		return e.lf, nil
	}
	c.mu.Unlock()
	lf, err := openLakeFile(c.store, p, table, tenant)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[p]; ok { // opened concurrently: keep the first
		e.refs++
		c.lru.MoveToFront(e.elem)
		lf.close()
		return e.lf, nil
	}
	e := &cacheEntry{lf: lf, refs: 1}
	e.elem = c.lru.PushFront(e)
	c.m[p] = e
	lf.entry = e
	for c.lru.Len() > c.max {
		old := c.lru.Back().Value.(*cacheEntry)
		c.lru.Remove(old.elem)
		delete(c.m, old.lf.path)
		old.evicted = true
		if old.refs == 0 {
			old.lf.close()
		}
	}
	return lf, nil
}

func (c *fileCache) release(lf *lakeFile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := lf.entry
	e.refs--
	if e.refs == 0 && e.evicted {
		lf.close()
	}
}

// closeAll closes every idle file (tests and shutdown).
func (c *fileCache) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, e := range c.m {
		c.lru.Remove(e.elem)
		delete(c.m, p)
		e.evicted = true
		if e.refs == 0 {
			e.lf.close()
		}
	}
}

// Close closes the lake files the handler keeps open; files still in use
// by a running query close when it ends. The handler stays usable.
func (h *Handler) Close() error {
	h.files.closeAll()
	return nil
}
