package s3store_test

import (
	"bytes"
	"errors"
	"io/fs"
	"testing"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/s3store"
	"github.com/sluice-dev/sluice/internal/lake/s3store/s3test"
)

// TestRenameAndReadOnAfterMove: Rename is a server-side copy and a
// delete (a missing source fails with fs.ErrNotExist); a reader that
// opened a file of the Hive tree before a swap moved it to the trash reads
// on from the trash copy, and lake.OpenSegment finds it there.
func TestRenameAndReadOnAfterMove(t *testing.T) {
	srv := s3test.Start(t)
	st := newStore(t, srv, "lake", func(c *s3store.Config) { c.ReadBlockSize = 1 << 10; c.ReadCacheBlocks = 1 })
	p := catalog.PartitionDir("logs", "t", "2025-06-01", 12) + "/a.parquet"
	data := randomBytes(8<<10, 7)
	put(t, st, p, data)

	r, err := st.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	head := make([]byte, 100)
	if _, err := r.ReadAt(head, 0); err != nil {
		t.Fatal(err)
	}
	if err := st.Rename(p, catalog.TrashPath(p)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Open(p); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open of the moved file: %v, want not found", err)
	}
	// Blocks not cached yet: read from the trash copy.
	rest := make([]byte, len(data)-4096)
	if _, err := r.ReadAt(rest, 4096); err != nil {
		t.Fatalf("read on after the move: %v", err)
	}
	if !bytes.Equal(rest, data[4096:]) || !bytes.Equal(head, data[:100]) {
		t.Fatal("bytes differ after the move")
	}
	r2, err := lake.OpenSegment(st, p)
	if err != nil {
		t.Fatalf("OpenSegment after the move: %v", err)
	}
	r2.Close()
	if err := st.Rename(p, catalog.TrashPath(p)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("rename of a missing object: %v, want not found", err)
	}
	if got := readAll(t, st, catalog.TrashPath(p)); !bytes.Equal(got, data) {
		t.Fatal("trash copy differs")
	}
}
