package format

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/parquet-go/parquet-go"
	pqformat "github.com/parquet-go/parquet-go/format"
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
	if err := checkFooterLength(r, size); err != nil {
		return nil, fmt.Errorf("open %q: %w", name, err)
	}
	pf, err = parquet.OpenFile(r, size, opts...)
	if err != nil {
		return nil, fmt.Errorf("open %q: %w", name, err)
	}
	if err := checkCodecs(pf); err != nil {
		return nil, fmt.Errorf("open %q: %w", name, err)
	}
	return pf, nil
}

// ErrUnsupportedCodec is wrapped by Open's error for a file with column
// chunks compressed other than with zstd, snappy or not at all. sluice
// writes zstd; parquet-go's LZ4 decoder doubles its buffer until the block
// fits, without bound, so one damaged page (a flipped codec byte in a 6 KB
// file, FuzzOpen found) exhausts memory, a fatal error no recover catches,
// and its gzip and brotli decoders are as unbounded; CheckChunk bounds the
// three codecs read.
var ErrUnsupportedCodec = errors.New("compression codec not read (only zstd, snappy and none: a damaged page would exhaust memory)")

// checkFooterLength refuses a footer length past the file: parquet-go
// allocates the length it reads before reading, so a damaged one would
// allocate up to 4 GiB (a fatal error no recover catches).
func checkFooterLength(r io.ReaderAt, size int64) error {
	const minSize = 12 // "PAR1", footer length, "PAR1"
	if size < minSize {
		return fmt.Errorf("%w: %d bytes is too short for a Parquet file", ErrCorrupt, size)
	}
	var tail [8]byte
	if _, err := r.ReadAt(tail[:], size-8); err != nil {
		return fmt.Errorf("read footer length: %w", err)
	}
	if n := int64(binary.LittleEndian.Uint32(tail[:4])); n > size-minSize {
		return fmt.Errorf("%w: footer length %d past the file's %d bytes", ErrCorrupt, n, size)
	}
	return nil
}

func checkCodecs(pf *parquet.File) error {
	for _, rg := range pf.Metadata().RowGroups {
		for _, cc := range rg.Columns {
			switch cc.MetaData.Codec {
			case pqformat.Uncompressed, pqformat.Snappy, pqformat.Zstd:
			default:
				return fmt.Errorf("column %q: %s: %w", strings.Join(cc.MetaData.PathInSchema, "."), cc.MetaData.Codec, ErrUnsupportedCodec)
			}
		}
	}
	return nil
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
