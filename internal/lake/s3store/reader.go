package s3store

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

// objectReader serves ReadAt from ranged GETs. Parquet readers make many
// small reads (the footer length, the footer, then 4 KiB page-buffer
// refills per column), so reads smaller than a block are served from
// aligned blocks of ReadBlockSize kept in a small LRU cache: the footer of
// a file below one block costs one request, and each column chunk is read
// ahead a block at a time.
type objectReader struct {
	s    *Store
	name string // the key opened, for errors
	size int64

	// key and etag change (under mu) if the object moves to the trash.
	key  string
	etag string

	mu     sync.Mutex
	blocks map[int64][]byte // block index → data
	lru    []int64          // block indexes, least recently used first
	closed bool
}

func newReader(s *Store, key string, size int64, etag string) *objectReader {
	return &objectReader{s: s, name: key, key: key, size: size, etag: etag, blocks: make(map[int64][]byte)}
}

func (r *objectReader) Size() int64 { return r.size }

func (r *objectReader) Close() error {
	r.mu.Lock()
	r.closed, r.blocks, r.lru = true, nil, nil
	r.mu.Unlock()
	return nil
}

// ReadAt implements io.ReaderAt; it is safe for concurrent use.
func (r *objectReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read %q: negative offset %d", r.name, off)
	}
	if off >= r.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), r.size-off))
	bs := r.s.cfg.ReadBlockSize
	if int64(n) >= bs {
		// Large reads gain nothing from the cache and would evict it.
		if err := r.fetch(p[:n], off); err != nil {
			return 0, err
		}
	} else {
		for done := 0; done < n; {
			pos := off + int64(done)
			blk, err := r.block(pos / bs)
			if err != nil {
				return done, err
			}
			c := copy(p[done:n], blk[pos%bs:])
			if c == 0 {
				return done, fmt.Errorf("read %q at %d: %w", r.name, pos, io.ErrUnexpectedEOF)
			}
			done += c
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// block returns block i, from the cache or the server. The fetch runs
// without the lock; two readers of one missing block may both fetch it.
func (r *objectReader) block(i int64) ([]byte, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, fmt.Errorf("read %q: %w", r.name, errors.New("reader closed"))
	}
	if b, ok := r.blocks[i]; ok {
		r.touch(i)
		r.mu.Unlock()
		return b, nil
	}
	r.mu.Unlock()

	bs := r.s.cfg.ReadBlockSize
	start := i * bs
	b := make([]byte, min(bs, r.size-start))
	if err := r.fetch(b, start); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return b, nil
	}
	if _, ok := r.blocks[i]; !ok {
		if len(r.lru) >= r.s.cfg.ReadCacheBlocks {
			delete(r.blocks, r.lru[0])
			r.lru = append(r.lru[:0], r.lru[1:]...)
		}
		r.blocks[i] = b
		r.lru = append(r.lru, i)
	}
	return b, nil
}

func (r *objectReader) touch(i int64) {
	for j, v := range r.lru {
		if v == i {
			copy(r.lru[j:], r.lru[j+1:])
			r.lru[len(r.lru)-1] = i
			return
		}
	}
}

// fetch fills p from the object at off with one ranged GET. An object of
// the Hive tree that is gone was replaced and moved to the trash by a
// swap (a server-side copy, so the same bytes): its reads continue there,
// so a query that opened it just before the swap finishes.
func (r *objectReader) fetch(p []byte, off int64) error {
	r.mu.Lock()
	key, etag := r.key, r.etag
	r.mu.Unlock()
	err := r.get(p, off, key, etag)
	if err == nil || !errors.Is(err, ErrNotFound) {
		return err
	}
	rel, ok := strings.CutPrefix(key, r.s.prefix)
	if !ok || catalog.IsOutsideTree(rel) {
		return err
	}
	trash := r.s.prefix + catalog.TrashPath(rel)
	// No If-Match: a copy of a multipart object has another ETag.
	if terr := r.get(p, off, trash, ""); terr != nil {
		return err
	}
	r.mu.Lock()
	r.key, r.etag = trash, ""
	r.mu.Unlock()
	return nil
}

func (r *objectReader) get(p []byte, off int64, key, etag string) error {
	ctx, cancel := r.s.callCtx()
	defer cancel()
	in := &s3.GetObjectInput{
		Bucket: &r.s.bucket, Key: &key,
		Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+int64(len(p))-1)),
	}
	if etag != "" {
		in.IfMatch = aws.String(etag)
	}
	out, err := r.s.client.GetObject(ctx, in)
	if err != nil {
		return wrap(fmt.Sprintf("get range %d+%d", off, len(p)), key, err)
	}
	defer out.Body.Close()
	if _, err := io.ReadFull(out.Body, p); err != nil {
		return wrap(fmt.Sprintf("get range %d+%d", off, len(p)), key, err)
	}
	return nil
}
