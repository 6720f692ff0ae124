package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// ErrTooLarge is returned for a file whose decompressed size exceeds the
// configured limit.
var ErrTooLarge = errors.New("file too large")

// ErrEmpty is returned for an empty file.
var ErrEmpty = errors.New("empty file")

var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// fileReader reads whole files into reused buffers and decompresses them by
// their magic bytes, not their names. It is used by one goroutine.
type fileReader struct {
	maxBytes int64
	raw      []byte
	out      []byte
	gz       *gzip.Reader
	zd       *zstd.Decoder
	msg      []byte // one decompressed request of a length-prefixed file
}

// read returns the decompressed content of path and the number of bytes read
// from disk. The slice is valid until the next call.
func (r *fileReader) read(path string) (content []byte, diskBytes int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	size := st.Size()
	if size == 0 {
		return nil, 0, ErrEmpty
	}
	if size > r.maxBytes {
		return nil, size, fmt.Errorf("%w: %d bytes on disk, limit %d", ErrTooLarge, size, r.maxBytes)
	}
	// Read into a buffer sized from the file, never by io.ReadAll's
	// doubling (a third of lakerunner's allocations, seed 001).
	if int64(cap(r.raw)) < size {
		r.raw = make([]byte, size)
	}
	r.raw = r.raw[:size]
	if _, err := io.ReadFull(f, r.raw); err != nil {
		return nil, size, fmt.Errorf("read: %w", err)
	}
	switch {
	case bytes.HasPrefix(r.raw, gzipMagic):
		out, err := r.gunzip(r.raw)
		return out, size, err
	case bytes.HasPrefix(r.raw, zstdMagic):
		out, err := r.unzstd(r.raw)
		return out, size, err
	}
	return r.raw, size, nil
}

func (r *fileReader) gunzip(in []byte) ([]byte, error) {
	var err error
	if r.gz == nil {
		r.gz, err = gzip.NewReader(bytes.NewReader(in))
	} else {
		err = r.gz.Reset(bytes.NewReader(in))
	}
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	out, err := r.readLimited(r.gz, len(in)*4)
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	return out, nil
}

// zstdDecoder returns the reader's zstd decoder, made on first use, which
// refuses to decompress more than maxBytes.
func (r *fileReader) zstdDecoder() (*zstd.Decoder, error) {
	if r.zd == nil {
		zd, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(r.maxBytes)))
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		r.zd = zd
	}
	return r.zd, nil
}

func (r *fileReader) unzstd(in []byte) ([]byte, error) {
	if _, err := r.zstdDecoder(); err != nil {
		return nil, err
	}
	if err := r.zd.Reset(bytes.NewReader(in)); err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	out, err := r.readLimited(r.zd, len(in)*4)
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
		return nil, fmt.Errorf("zstd: %w: more than %d bytes decompressed", ErrTooLarge, r.maxBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	return out, nil
}

// readLimited reads src into r.out, growing it geometrically from a guess,
// and fails once more than maxBytes would be needed (a decompression bomb).
func (r *fileReader) readLimited(src io.Reader, guess int) ([]byte, error) {
	out := r.out[:0]
	if cap(out) < guess {
		out = make([]byte, 0, min(int64(guess), r.maxBytes+1))
	}
	for {
		if len(out) == cap(out) {
			if int64(len(out)) > r.maxBytes {
				r.out = out[:0]
				return nil, fmt.Errorf("%w: more than %d bytes decompressed", ErrTooLarge, r.maxBytes)
			}
			out = append(out, 0)[:len(out)]
		}
		n, err := src.Read(out[len(out):cap(out)])
		out = out[:len(out)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			r.out = out[:0]
			return nil, err
		}
	}
	r.out = out
	if int64(len(out)) > r.maxBytes {
		return nil, fmt.Errorf("%w: more than %d bytes decompressed", ErrTooLarge, r.maxBytes)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w after decompression", ErrEmpty)
	}
	return out, nil
}

func (r *fileReader) close() {
	if r.zd != nil {
		r.zd.Close()
	}
}
