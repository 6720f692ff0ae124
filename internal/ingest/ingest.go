package ingest

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/internal/signal"
)

// Sink receives decoded batches; the lake writer is one. A call hands the
// batch over only for its duration: the sink copies what it keeps.
type Sink interface {
	WriteLogs(tenant string, b *signal.Logs) error
	WriteMetrics(tenant string, b *signal.Metrics) error
	WriteSpans(tenant string, b *signal.Spans) error
}

// Options configure a run.
type Options struct {
	Tenant string
	// MaxFileBytes bounds a file's size on disk and decompressed.
	MaxFileBytes int64
	// Progress, when set, is called about every ProgressEvery with the
	// counters so far; the caller renders it.
	Progress      func(Progress)
	ProgressEvery time.Duration
}

// DefaultMaxFileBytes is the default limit on one file, decompressed.
const DefaultMaxFileBytes = 1 << 30

// Progress is a snapshot of a run's counters.
type Progress struct {
	FilesDone, FilesTotal, FilesFailed int
	Records                            int64
	BytesRead                          int64 // from disk
	BytesDecoded                       int64 // after decompression
	Elapsed                            time.Duration
}

// FileError is a file that was rejected, and why.
type FileError struct {
	Path string
	Err  error
}

func (e FileError) Error() string { return fmt.Sprintf("%s: %v", e.Path, e.Err) }
func (e FileError) Unwrap() error { return e.Err }

// Result summarises a run.
type Result struct {
	Progress
	Logs, DataPoints, Spans int64
	Empty                   int // files that held a valid request with no records
	Failed                  []FileError
}

// inputExtensions are the names a directory walk picks up; files named
// explicitly are always tried, whatever their name.
var inputExtensions = []string{".binpb", ".pb", ".protobuf", ".json", ".jsonl", ".ndjson"}

// Collect expands paths into the list of files to ingest: files as given,
// directories walked recursively for names with an OTLP extension
// (optionally followed by .gz or .zst). Hidden entries are skipped; links to
// files are followed, links to directories are not.
func Collect(paths []string) (files, skipped []string, err error) {
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, nil, err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		var found []string
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if path != p && strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() {
				// Follow links to files (not to directories: no cycles).
				if d.Type()&fs.ModeSymlink == 0 {
					return nil
				}
				if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
					return nil
				}
			}
			if hasInputExtension(d.Name()) {
				found = append(found, path)
			} else {
				skipped = append(skipped, path)
			}
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("walk %s: %w", p, err)
		}
		sort.Strings(found)
		files = append(files, found...)
	}
	return files, skipped, nil
}

func hasInputExtension(name string) bool {
	name = strings.ToLower(name)
	name = strings.TrimSuffix(strings.TrimSuffix(name, ".gz"), ".zst")
	for _, ext := range inputExtensions {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}

// batches is one set of reusable batches, one per signal.
type batches struct {
	logs    signal.Logs
	metrics signal.Metrics
	spans   signal.Spans
}

type decoded struct {
	path  string
	kinds kinds
	b     *batches
	err   error
	disk  int64
	size  int64
}

// Run ingests files into sink. A file that fails to read or decode is
// recorded in Result.Failed and the run goes on; an error from the sink
// stops the run and is returned, since it means the lake itself failed.
func Run(parent context.Context, files []string, sink Sink, opts Options) (Result, error) {
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = DefaultMaxFileBytes
	}
	start := time.Now()
	var res Result
	res.FilesTotal = len(files)

	// Two batch sets: one being decoded while the other is written.
	free := make(chan *batches, 2)
	free <- new(batches)
	free <- new(batches)
	out := make(chan decoded, 1)
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	go decodeFiles(ctx, files, opts.MaxFileBytes, free, out)

	var records, bytesRead, bytesDecoded atomic.Int64
	var filesDone, filesFailed atomic.Int64
	snapshot := func() Progress {
		return Progress{
			FilesDone: int(filesDone.Load()), FilesTotal: len(files), FilesFailed: int(filesFailed.Load()),
			Records: records.Load(), BytesRead: bytesRead.Load(), BytesDecoded: bytesDecoded.Load(),
			Elapsed: time.Since(start),
		}
	}
	if opts.Progress != nil {
		every := opts.ProgressEvery
		if every <= 0 {
			every = 250 * time.Millisecond
		}
		t := time.NewTicker(every)
		done := make(chan struct{})
		defer func() { t.Stop(); close(done) }()
		go func() {
			for {
				select {
				case <-t.C:
					opts.Progress(snapshot())
				case <-done:
					return
				}
			}
		}()
	}

	var sinkErr error
	for d := range out {
		bytesRead.Add(d.disk)
		bytesDecoded.Add(d.size)
		if d.err != nil {
			res.Failed = append(res.Failed, FileError{d.path, d.err})
			filesFailed.Add(1)
			filesDone.Add(1)
			if d.b != nil {
				free <- d.b
			}
			continue
		}
		// A file may hold several signals (decodeFile); each goes to the
		// sink as its own batch.
		var n int
		var err error
		if d.kinds.has(signal.KindLogs) {
			n += d.b.logs.Len()
			res.Logs += int64(d.b.logs.Len())
			err = sink.WriteLogs(opts.Tenant, &d.b.logs)
		}
		if err == nil && d.kinds.has(signal.KindMetrics) {
			n += d.b.metrics.Len()
			res.DataPoints += int64(d.b.metrics.Len())
			err = sink.WriteMetrics(opts.Tenant, &d.b.metrics)
		}
		if err == nil && d.kinds.has(signal.KindTraces) {
			n += d.b.spans.Len()
			res.Spans += int64(d.b.spans.Len())
			err = sink.WriteSpans(opts.Tenant, &d.b.spans)
		}
		if n == 0 {
			res.Empty++
		}
		free <- d.b
		records.Add(int64(n))
		filesDone.Add(1)
		if err != nil {
			sinkErr = fmt.Errorf("write %s: %w", d.path, err)
			cancel()
			for range out { // let the decoder exit
			}
			break
		}
	}
	res.Progress = snapshot()
	if sinkErr == nil && parent.Err() != nil {
		sinkErr = fmt.Errorf("interrupted after %d of %d files: %w", res.FilesDone, len(files), parent.Err())
	}
	return res, sinkErr
}

// decodeFiles reads and decodes each file in turn into a free batch set and
// sends the result; it closes out when done or when ctx ends.
func decodeFiles(ctx context.Context, files []string, maxBytes int64, free chan *batches, out chan<- decoded) {
	defer close(out)
	r := &fileReader{maxBytes: maxBytes}
	defer r.close()
	for _, path := range files {
		var b *batches
		select {
		case b = <-free:
		case <-ctx.Done():
			return
		}
		d := decoded{path: path, b: b}
		content, disk, err := r.read(path)
		d.disk, d.size = disk, int64(len(content))
		if err == nil {
			d.kinds, err = r.decodeFile(content, b)
		}
		d.err = err
		select {
		case out <- d:
		case <-ctx.Done():
			return
		}
	}
}
