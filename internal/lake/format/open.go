package format

import (
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
)

// ErrCorrupt is wrapped by the errors of Open and of readers guarded by
// Recover when parquet-go panicked on a damaged file (it panics, rather
// than returning an error, on some malformed footers and pages).
var ErrCorrupt = errors.New("corrupt parquet")

// Open opens the Parquet file held by r, of size bytes; name (its path)
// is used in errors. opts are parquet-go's (e.g. SkipPageIndex,
// SkipBloomFilters, ReadBufferSize). A damaged file gives an error naming
// it, never a panic. The caller keeps r open while the file is read, and
// guards its page reads with Recover: parquet-go reads pages lazily.
func Open(r io.ReaderAt, size int64, name string, opts ...parquet.FileOption) (pf *parquet.File, err error) {
	defer Recover(&err, "open %q", name)
	pf, err = parquet.OpenFile(r, size, opts...)
	if err != nil {
		return nil, fmt.Errorf("open %q: %w", name, err)
	}
	return pf, nil
}

// Recover, deferred by a function that reads a Parquet file, turns a
// parquet-go panic into an error wrapping ErrCorrupt in *err, prefixed
// with what (a format and its arguments, e.g. "read %q", path), so that a
// damaged file fails its reader and not the process:
//
//	defer format.Recover(&err, "read %q", path)
func Recover(err *error, what string, args ...any) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("%s: %w: %v", fmt.Sprintf(what, args...), ErrCorrupt, p)
	}
}
