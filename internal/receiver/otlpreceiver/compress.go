package otlpreceiver

import (
	"errors"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/grpc/encoding"
)

// zstdMaxWindow refuses frames that ask for a bigger history window, so a
// tiny malicious frame cannot make a decoder allocate hundreds of MiB.
// 8 MiB is what zstd levels up to 19 use without --long.
const zstdMaxWindow = 8 << 20

var zstdDecoders = sync.Pool{New: func() any {
	// Concurrency 1 decodes synchronously: no goroutines, so a decoder that
	// is dropped instead of returned to the pool is simply collected.
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxWindow(zstdMaxWindow), zstd.WithDecoderLowmem(true))
	if err != nil {
		panic(err) // only for invalid options, which are constants
	}
	return d
}}

var zstdEncoders = sync.Pool{New: func() any {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true),
		zstd.WithWindowSize(1<<20))
	if err != nil {
		panic(err) // only for invalid options, which are constants
	}
	return e
}}

var gzipReaders sync.Pool // *gzip.Reader; no New, since Reset needs a valid header

// newGzipReader returns a pooled gzip reader reading r.
func newGzipReader(r io.Reader) (*gzip.Reader, error) {
	if z, ok := gzipReaders.Get().(*gzip.Reader); ok {
		if err := z.Reset(r); err != nil {
			gzipReaders.Put(z)
			return nil, err
		}
		return z, nil
	}
	return gzip.NewReader(r)
}

func putGzipReader(z *gzip.Reader) {
	_ = z.Close()
	gzipReaders.Put(z)
}

func newZstdReader(r io.Reader) (*zstd.Decoder, error) {
	d := zstdDecoders.Get().(*zstd.Decoder)
	if err := d.Reset(r); err != nil {
		zstdDecoders.Put(d)
		return nil, err
	}
	return d, nil
}

func putZstdReader(d *zstd.Decoder) {
	_ = d.Reset(nil) // drop the reference to the request body
	zstdDecoders.Put(d)
}

// zstdCompressor is the gRPC "zstd" compressor, with pooled state. gRPC
// has none built in; registering one makes the server accept
// grpc-encoding: zstd (and answer in zstd when asked).
type zstdCompressor struct{}

func init() { encoding.RegisterCompressor(zstdCompressor{}) }

func (zstdCompressor) Name() string { return "zstd" }

func (zstdCompressor) Compress(w io.Writer) (io.WriteCloser, error) {
	e := zstdEncoders.Get().(*zstd.Encoder)
	e.Reset(w)
	return &zstdWriter{e: e}, nil
}

func (zstdCompressor) Decompress(r io.Reader) (io.Reader, error) {
	d, err := newZstdReader(r)
	if err != nil {
		return nil, err
	}
	return &zstdReader{d: d}, nil
}

// zstdReader returns its decoder to the pool on Close, which gRPC calls
// exactly once when the returned reader is an io.ReadCloser.
type zstdReader struct{ d *zstd.Decoder }

var errClosed = errors.New("read after close")

func (z *zstdReader) Read(p []byte) (int, error) {
	if z.d == nil {
		return 0, errClosed
	}
	return z.d.Read(p)
}

func (z *zstdReader) Close() error {
	if z.d != nil {
		putZstdReader(z.d)
		z.d = nil
	}
	return nil
}

type zstdWriter struct{ e *zstd.Encoder }

func (z *zstdWriter) Write(p []byte) (int, error) {
	if z.e == nil {
		return 0, errClosed
	}
	return z.e.Write(p)
}

func (z *zstdWriter) Close() error {
	if z.e == nil {
		return nil
	}
	err := z.e.Close()
	z.e.Reset(nil)
	zstdEncoders.Put(z.e)
	z.e = nil
	return err
}
