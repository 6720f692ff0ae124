package lake

import (
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/format"
)

// zstdCodec is the one zstd codec of the package. It keeps its encoders and
// decoders on a plain free list instead of a sync.Pool: a pool drops them at
// GC, and rebuilding zstd encoders (with their history buffers) for every
// file was the largest allocator in lakerunner's writer (seed 003).
type zstdCodec struct {
	level zstd.EncoderLevel

	mu   sync.Mutex
	encs []*zstd.Encoder
	decs []*zstd.Decoder
}

// maxIdleCoders bounds the free lists; more only exist while that many
// goroutines compress at once.
const maxIdleCoders = 8

var sharedZstd = &zstdCodec{level: zstd.SpeedFastest}

func (c *zstdCodec) String() string                            { return "ZSTD" }
func (c *zstdCodec) CompressionCodec() format.CompressionCodec { return format.Zstd }

func (c *zstdCodec) Encode(dst, src []byte) ([]byte, error) {
	c.mu.Lock()
	var e *zstd.Encoder
	if n := len(c.encs); n > 0 {
		e, c.encs = c.encs[n-1], c.encs[:n-1]
	}
	c.mu.Unlock()
	if e == nil {
		var err error
		e, err = zstd.NewWriter(nil,
			zstd.WithEncoderConcurrency(1),
			zstd.WithEncoderLevel(c.level),
			zstd.WithZeroFrames(true),
			zstd.WithEncoderCRC(false),
		)
		if err != nil {
			return dst, err
		}
	}
	dst = e.EncodeAll(src, dst[:0])
	c.mu.Lock()
	if len(c.encs) < maxIdleCoders {
		c.encs = append(c.encs, e)
	}
	c.mu.Unlock()
	return dst, nil
}

func (c *zstdCodec) Decode(dst, src []byte) ([]byte, error) {
	c.mu.Lock()
	var d *zstd.Decoder
	if n := len(c.decs); n > 0 {
		d, c.decs = c.decs[n-1], c.decs[:n-1]
	}
	c.mu.Unlock()
	if d == nil {
		var err error
		d, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<30))
		if err != nil {
			return dst, err
		}
	}
	dst, err := d.DecodeAll(src, dst[:0])
	c.mu.Lock()
	if len(c.decs) < maxIdleCoders {
		c.decs = append(c.decs, d)
	}
	c.mu.Unlock()
	return dst, err
}
