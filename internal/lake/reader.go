package lake

import (
	"fmt"
	"io"

	"github.com/sluice-dev/sluice/internal/lake/format"
	"github.com/sluice-dev/sluice/internal/signal"
)

// The reader of lake files is package format's (format.File): typed,
// projected column reads into signal batches. This package opens files
// from its stores.

// ErrNotLakeFile is returned for Parquet files without sluice footer
// metadata or with columns the reader does not understand.
var ErrNotLakeFile = format.ErrNotLakeFile

// File is an opened lake Parquet file (format.File).
type File = format.File

// OpenFile opens the lake file at path.
func OpenFile(path string) (*File, error) {
	r, err := openLocal(path)
	if err != nil {
		return nil, fmt.Errorf("open %q: %w", path, err)
	}
	return format.OpenCloser(r, r.Size(), path)
}

// OpenObject opens the file of the segment at p in a Store, wherever the
// swap protocol has it (OpenSegment).
func OpenObject(s Store, p string) (*File, error) {
	r, err := OpenSegment(s, p)
	if err != nil {
		return nil, fmt.Errorf("open %q: %w", p, err)
	}
	return format.OpenCloser(r, r.Size(), p)
}

// OpenReader opens a lake file held by r; name is used in errors. The
// caller keeps r open while the File is used.
func OpenReader(r io.ReaderAt, size int64, name string) (*File, error) {
	return format.OpenReader(r, size, name)
}

// appendOverflowAttrs is format.DecodeOverflow.
func appendOverflowAttrs(c *signal.Common, js []byte) error { return format.DecodeOverflow(c, js) }
