package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// objectWriter buffers one part; an object that fits in it is sent by one
// PutObject at Commit, a larger one becomes a multipart upload whose full
// parts are sent in the background while the next one fills.
type objectWriter struct {
	s    *Store
	key  string
	buf  []byte // the part being filled, cap PartSize
	done bool

	// Multipart state, after the first full part.
	uploadID string
	next     int32         // number of the next part
	sem      chan struct{} // bounds parts in flight
	wg       sync.WaitGroup
	mu       sync.Mutex // guards below: written by upload goroutines
	parts    []types.CompletedPart
	free     [][]byte
	err      error // first failed part
}

func newWriter(s *Store, key string) *objectWriter {
	return &objectWriter{s: s, key: key}
}

func (w *objectWriter) Write(b []byte) (int, error) {
	if w.done {
		return 0, fmt.Errorf("write %q: already finished", w.key)
	}
	if err := w.failed(); err != nil {
		return 0, err
	}
	if w.buf == nil {
		// Start small: most lake files are far below PartSize.
		w.buf = make([]byte, 0, min(int64(len(b))+64<<10, w.s.cfg.PartSize))
	}
	n := 0
	for len(b) > 0 {
		room := int(w.s.cfg.PartSize) - len(w.buf)
		if room == 0 {
			// Flush only when more data comes, so an object of exactly
			// PartSize still goes as one PutObject.
			if err := w.sendPart(); err != nil {
				return n, err
			}
			continue
		}
		c := min(room, len(b))
		w.buf = append(w.buf, b[:c]...)
		b, n = b[c:], n+c
	}
	return n, nil
}

func (w *objectWriter) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// sendPart uploads w.buf as the next part in the background.
func (w *objectWriter) sendPart() error {
	if w.uploadID == "" {
		ctx, cancel := w.s.callCtx()
		out, err := w.s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
			Bucket: &w.s.bucket, Key: &w.key, ContentType: aws.String("application/vnd.apache.parquet"),
			ChecksumAlgorithm: types.ChecksumAlgorithmCrc32,
		})
		cancel()
		if err != nil {
			return wrap("create upload", w.key, err)
		}
		w.uploadID = aws.ToString(out.UploadId)
		w.next = 1
		w.sem = make(chan struct{}, w.s.cfg.UploadConcurrency)
	}
	part, data := w.next, w.buf
	w.next++
	w.sem <- struct{}{}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() { <-w.sem }()
		ctx, cancel := w.s.callCtx()
		out, err := w.s.client.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: &w.s.bucket, Key: &w.key, UploadId: &w.uploadID,
			PartNumber: aws.Int32(part), Body: bytes.NewReader(data),
			ContentLength: aws.Int64(int64(len(data))), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32,
		})
		cancel()
		w.mu.Lock()
		defer w.mu.Unlock()
		if err != nil {
			if w.err == nil {
				w.err = wrap(fmt.Sprintf("upload part %d", part), w.key, err)
			}
		} else {
			w.parts = append(w.parts, types.CompletedPart{
				PartNumber: aws.Int32(part), ETag: out.ETag, ChecksumCRC32: out.ChecksumCRC32,
			})
		}
		w.free = append(w.free, data[:0])
	}()
	w.mu.Lock()
	if n := len(w.free); n > 0 {
		w.buf, w.free = w.free[n-1], w.free[:n-1]
	} else {
		w.buf = make([]byte, 0, w.s.cfg.PartSize)
	}
	w.mu.Unlock()
	return nil
}

func (w *objectWriter) Commit() error {
	if w.done {
		return fmt.Errorf("commit %q: already finished", w.key)
	}
	w.done = true
	if w.uploadID == "" {
		err := w.put()
		w.buf = nil
		return err
	}
	if len(w.buf) > 0 {
		if err := w.sendPart(); err != nil {
			w.wg.Wait()
			return errors.Join(err, w.abortUpload())
		}
	}
	w.wg.Wait()
	w.buf, w.free = nil, nil
	if w.err != nil {
		return errors.Join(w.err, w.abortUpload())
	}
	slices.SortFunc(w.parts, func(a, b types.CompletedPart) int { return int(*a.PartNumber - *b.PartNumber) })
	if err := w.complete(); err != nil {
		return errors.Join(err, w.abortUpload())
	}
	return nil
}

func (w *objectWriter) put() error {
	in := &s3.PutObjectInput{
		Bucket: &w.s.bucket, Key: &w.key, Body: bytes.NewReader(w.buf),
		ContentLength: aws.Int64(int64(len(w.buf))), ContentType: aws.String("application/vnd.apache.parquet"),
	}
	return w.conditional("put", func(ctx context.Context, cond *string) error {
		in.IfNoneMatch = cond
		in.Body = bytes.NewReader(w.buf) // a refused attempt may have read it
		_, err := w.s.client.PutObject(ctx, in)
		return err
	})
}

func (w *objectWriter) complete() error {
	in := &s3.CompleteMultipartUploadInput{
		Bucket: &w.s.bucket, Key: &w.key, UploadId: &w.uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: w.parts},
	}
	return w.conditional("complete upload", func(ctx context.Context, cond *string) error {
		in.IfNoneMatch = cond
		_, err := w.s.client.CompleteMultipartUpload(ctx, in)
		return err
	})
}

// conditional runs call with If-None-Match: *, or, on a server that does
// not implement it, after a HeadObject that finds no object.
func (w *objectWriter) conditional(op string, call func(ctx context.Context, cond *string) error) error {
	ctx, cancel := w.s.callCtx()
	defer cancel()
	if !w.s.unconditional.Load() {
		err := call(ctx, aws.String("*"))
		if err == nil || !notImplemented(err) {
			return wrap(op, w.key, err)
		}
		if !w.s.unconditional.Swap(true) {
			w.s.log.Warn("the S3 server does not implement conditional writes (If-None-Match); checking for an existing object before each write instead, which is not atomic",
				"store", w.s.String(), "err", err)
		}
	}
	_, err := w.s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &w.s.bucket, Key: &w.key})
	switch {
	case err == nil:
		return &opError{op: op, key: w.key, err: ErrExists}
	case !isNotFound(err):
		return wrap("head", w.key, err)
	}
	return wrap(op, w.key, call(ctx, nil))
}

func (w *objectWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	w.buf = nil
	if w.uploadID == "" {
		return nil
	}
	w.wg.Wait()
	w.free = nil
	return w.abortUpload()
}

func (w *objectWriter) abortUpload() error {
	ctx, cancel := w.s.callCtx()
	defer cancel()
	_, err := w.s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket: &w.s.bucket, Key: &w.key, UploadId: &w.uploadID,
	})
	if err != nil && !isStatus(err, 404) {
		return wrap("abort upload", w.key, err)
	}
	return nil
}
