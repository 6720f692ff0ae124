package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/queue"
	"github.com/sluice-dev/sluice/internal/signal"
)

// tail serves the records of the queue above the catalog's committed
// position to queries, as in-memory lake files written by the same
// lake.Writer code as the lake itself (docs/design/freshness.md). It reads
// the queue on its own, independently of the lake loop, when a query asks
// (lake.TailSource.List) and, while queries come, every second in the
// background (warm), so it costs nothing while nobody queries.
//
// Its chunks cover the queue range (start, built] without holes, each
// chunk a contiguous range (from, to] of record boundaries. start only
// moves forward, to positions the catalog has committed (trim).
//
// # Why a row is never counted twice nor missed
//
// List reads the catalog's position p, lists the segments, and reads the
// position again; when both reads agree, the listing saw exactly the files
// of the records up to p (a checkpoint commits its files and its position
// in one transaction, and positions only grow). It then serves the chunks
// of (p, end], where end is the durable queue end read before the listing:
//
//   - p < start: the catalog moved on after the listing; try again.
//   - p > start: the catalog says (start, p] is committed; trim to p first.
//     A chunk straddling p is dropped and its range read again.
//
// The queue releases a segment only after the lake loop trimmed the tail to
// the committed position (lakeLoop.commitCheckpoint), so a build that read
// released data started below start and is discarded at install.
//
// # Concurrency
//
// mu guards the chunk state; buildMu makes builds one at a time and is
// held while reading the queue and encoding, without mu. Files of a
// trimmed chunk stay readable while a List caller holds them (refs).
type tail struct {
	q     *queue.Queue
	cat   *catalog.Catalog
	m     *metrics
	log   *slog.Logger
	wopts lake.Options
	// maxChunks is tailMaxChunks (tests lower it).
	maxChunks int
	// maxBytes is lake.tail_max_bytes; chunkBytes bounds one build's
	// rows: tailChunkBytes, or an eighth of a smaller maxBytes.
	maxBytes, chunkBytes int64

	buildMu sync.Mutex
	wo      lake.Options // of w
	w       *lake.Writer
	probe   *lake.Probe // after a failed encode, finds the records to leave out
	mem     *memStore
	made    []lake.Segment // files of the running build
	logs    signal.Logs
	metrics signal.Metrics
	spans   signal.Spans

	mu      sync.Mutex
	start   int64 // committed: the tail holds nothing at or below it
	built   int64 // chunks cover (start, built]
	chunks  []*tailChunk
	retired []*tailChunk // trimmed but still held by a List caller
	files   map[string]*tailFile
	nextID  uint64
	bytes   int64 // of live and retired chunks' files

	errLog   atomic.Int64 // unix ns of the last build error logged
	lastList atomic.Int64 // unix ns of the last List
	stopWarm chan struct{}
	warmDone chan struct{}
}

type tailChunk struct {
	id        uint64
	from, to  int64
	segs      []catalog.Segment
	files     []*tailFile
	refs      int
	retiredAt time.Time
}

type tailFile struct {
	path string
	size int64
	data atomic.Pointer[[]byte] // nil once dropped
}

const (
	// tailChunkBytes bounds the rows one build buffers before it encodes
	// them as a chunk (the writer's estimate of decoded bytes).
	tailChunkBytes = 64 << 20
	// tailMaxHold drops a trimmed chunk even if a caller never released
	// it, so that a forgotten release cannot hold memory forever.
	tailMaxHold = 10 * time.Minute
	// tailMaxChunks: a build that would add a chunk past this many reads
	// the whole tail again into one chunk instead, so that frequent
	// queries (a dashboard refreshing every few seconds) do not leave
	// hundreds of small files for every query to open.
	tailMaxChunks = 32
	// tailWarmFor: while queries came within this long, the tail is
	// built every tailWarmEvery in the background, so that a query finds
	// at most that much to encode (at high ingest rates, the tail of a
	// whole checkpoint interval takes seconds to encode).
	tailWarmFor   = 2 * time.Minute
	tailWarmEvery = time.Second
	// tailListAttempts bounds List's retries when checkpoints commit
	// while it lists (each attempt loses only to a checkpoint commit).
	tailListAttempts = 20
)

var errTailStale = errors.New("tail: the catalog moved on during the listing")

// newTail serves the queue after committed. maxBytes
// (lake.tail_max_bytes) stops building past that many bytes of tail files: they are about the size of the files the next checkpoint
// writes, so only a lake loop that cannot commit for a long time gets
// there, and queries then miss the newest records (counted as build
// errors) rather than the process growing with the queue.
func newTail(q *queue.Queue, cat *catalog.Catalog, committed, maxBytes int64, wopts lake.Options, m *metrics, log *slog.Logger) (*tail, error) {
	t := &tail{q: q, cat: cat, m: m, log: log, start: committed, built: committed, maxChunks: tailMaxChunks,
		maxBytes: maxBytes, chunkBytes: min(tailChunkBytes, max(maxBytes/8, 1<<20)),
		mem: &memStore{files: map[string][]byte{}}, files: map[string]*tailFile{}}
	t.wo = lake.Options{
		Store: t.mem,
		// One file per partition and build: chunk size is bounded by
		// tailChunkBytes instead.
		TargetFileBytes:  1 << 40,
		MaxBufferedBytes: 1 << 40,
		RowGroupRows:     wopts.RowGroupRows,
		MaxFutureSkew:    wopts.MaxFutureSkew,
		// The same schema as the lake's files, overflow column included.
		MaxAttributeColumns: wopts.MaxAttributeColumns,
		PoisonKey:           wopts.PoisonKey,
	}
	if err := t.newWriter(); err != nil {
		return nil, err
	}
	var err error
	if t.probe, err = lake.NewProbe(t.wo); err != nil {
		return nil, fmt.Errorf("tail writer: %w", err)
	}
	return t, nil
}

func (t *tail) newWriter() error {
	w, err := lake.NewWriter(t.wo, func(s lake.Segment) error {
		t.made = append(t.made, s)
		return nil
	})
	if err != nil {
		return fmt.Errorf("tail writer: %w", err)
	}
	t.w = w
	return nil
}

// List implements lake.TailSource.
func (t *tail) List(ctx context.Context, f catalog.Filter) ([]catalog.Segment, func(), error) {
	t.lastList.Store(time.Now().UnixNano())
	// Everything acknowledged before the call is durable up to end.
	end := int64(t.q.Stats().Last)
	for attempt := 1; ; attempt++ {
		p1, err := t.cat.QueuePosition(ctx, QueueName)
		if err != nil {
			return nil, nil, err
		}
		segs, err := t.cat.List(ctx, f)
		if err != nil {
			return nil, nil, err
		}
		p2, err := t.cat.QueuePosition(ctx, QueueName)
		if err != nil {
			return nil, nil, err
		}
		if p1 == p2 {
			chunks, err := t.acquire(ctx, p1, end)
			if err == nil {
				for _, c := range chunks {
					for _, s := range c.segs {
						if tailMatches(&s, &f) {
							segs = append(segs, s)
						}
					}
				}
				return segs, func() { t.release(chunks) }, nil
			}
			if !errors.Is(err, errTailStale) {
				return nil, nil, err
			}
		}
		t.m.tailRetries.Inc()
		if attempt >= tailListAttempts {
			return nil, nil, fmt.Errorf("list the unflushed tail: the catalog kept moving (%d attempts)", attempt)
		}
	}
}

// warm builds the tail every tailWarmEvery while queries came within
// tailWarmFor, until stop.
func (t *tail) warm() {
	t.stopWarm, t.warmDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(t.warmDone)
		tick := time.NewTicker(tailWarmEvery)
		defer tick.Stop()
		for {
			select {
			case <-t.stopWarm:
				return
			case <-tick.C:
			}
			if time.Since(time.Unix(0, t.lastList.Load())) > tailWarmFor {
				continue
			}
			end := int64(t.q.Stats().Last)
			t.mu.Lock()
			need := t.built < end
			t.mu.Unlock()
			if need {
				if err := t.build(end); err != nil {
					t.buildFailed(err)
				}
			}
		}
	}()
}

// stop ends the background builds; before the queue closes.
func (t *tail) stop() {
	if t.stopWarm != nil {
		close(t.stopWarm)
		<-t.warmDone
		t.stopWarm = nil
	}
}

func (t *tail) buildFailed(err error) {
	t.m.tailBuildErrors.Inc()
	if now, last := time.Now().UnixNano(), t.errLog.Load(); now-last > int64(time.Minute) && t.errLog.CompareAndSwap(last, now) {
		t.log.Error("reading the unflushed tail for queries failed; they miss the newest records (logged at most once a minute; see sluice_lake_tail_build_errors_total)", "err", err)
	}
}

// acquire returns the chunks covering (p, end] (p committed in the
// catalog), building what is missing, with a reference on each.
func (t *tail) acquire(ctx context.Context, p, end int64) ([]*tailChunk, error) {
	for {
		t.mu.Lock()
		if p < t.start {
			t.mu.Unlock()
			return nil, errTailStale
		}
		t.trimLocked(p)
		if t.built >= end {
			chunks := slices.Clone(t.chunks)
			for _, c := range chunks {
				c.refs++
			}
			t.mu.Unlock()
			return chunks, nil
		}
		t.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := t.build(end); err != nil {
			// Serve what is built: the answer misses only the newest
			// records, as it would without a tail.
			t.buildFailed(err)
			end = 0
		}
	}
}

func (t *tail) release(chunks []*tailChunk) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range chunks {
		c.refs--
		if c.refs == 0 && !c.retiredAt.IsZero() {
			t.dropLocked(c)
		}
	}
}

// trim tells the tail that the catalog committed everything up to pos.
func (t *tail) trim(pos int64) {
	t.mu.Lock()
	t.trimLocked(pos)
	t.mu.Unlock()
}

func (t *tail) trimLocked(pos int64) {
	if pos <= t.start {
		return
	}
	t.start = pos
	now := time.Now()
	keep := 0
	for i, c := range t.chunks {
		if c.to <= pos {
			t.retireLocked(c, now)
			continue
		}
		if c.from < pos {
			// Straddles pos: drop it and what follows; read again from pos.
			for _, d := range t.chunks[i:] {
				t.retireLocked(d, now)
			}
			t.built = pos
			break
		}
		t.chunks[keep] = c
		keep++
	}
	clear(t.chunks[keep:])
	t.chunks = t.chunks[:keep]
	t.built = max(t.built, pos)
	// A holder that never released must not keep memory for ever.
	t.retired = slices.DeleteFunc(t.retired, func(c *tailChunk) bool {
		if c.refs > 0 && now.Sub(c.retiredAt) < tailMaxHold {
			return false
		}
		t.dropLocked(c)
		return true
	})
}

func (t *tail) retireLocked(c *tailChunk, now time.Time) {
	c.retiredAt = now
	if c.refs == 0 {
		t.dropLocked(c)
		return
	}
	t.retired = append(t.retired, c)
}

func (t *tail) dropLocked(c *tailChunk) {
	for _, f := range c.files {
		if f.data.Swap(nil) != nil {
			t.bytes -= f.size
		}
		delete(t.files, f.path)
	}
	c.files = nil
	t.m.tailBytes.Set(float64(t.bytes))
}

// build reads the queue from built towards end (at most tailChunkBytes of
// rows) into one new chunk; with maxChunks chunks already, it reads
// the whole tail from start into one chunk that replaces them all.
func (t *tail) build(end int64) error {
	t.buildMu.Lock()
	defer t.buildMu.Unlock()
	t.mu.Lock()
	from, base := t.built, t.built
	// A merge reads the whole tail at once: only while it is small.
	replace := len(t.chunks) >= t.maxChunks && base-t.start <= t.chunkBytes
	if replace {
		from = t.start
	}
	size := t.bytes
	t.mu.Unlock()
	if base >= end {
		return nil // built by another caller meanwhile
	}
	if size >= t.maxBytes {
		return fmt.Errorf("the tail holds %d bytes of files, lake.tail_max_bytes (%d); the lake loop is not committing", size, t.maxBytes)
	}
	t.made = t.made[:0]
	to, err := t.read(from, end, base, false)
	if err == nil {
		if err = t.w.Flush(); err != nil {
			// A record the writer cannot encode (the lake loop puts it in
			// quarantine): read the range again, each record probed alone
			// first, leaving out those that fail.
			t.discard()
			if err = t.newWriter(); err == nil {
				if _, err = t.read(from, to, to, true); err == nil {
					err = t.w.Flush()
				}
			}
		}
	}
	if err != nil {
		t.discard()
		if werr := t.newWriter(); werr != nil {
			return errors.Join(err, werr)
		}
		return fmt.Errorf("read the tail from queue position %d: %w", from, err)
	}
	t.m.tailBuilds.Inc()

	t.mu.Lock()
	defer t.mu.Unlock()
	if t.built != base || from < t.start {
		// Trimmed while building (the data may already be released):
		// the next build starts again from built.
		t.discard()
		return nil
	}
	if replace {
		now := time.Now()
		for _, c := range t.chunks {
			t.retireLocked(c, now)
		}
		clear(t.chunks)
		t.chunks = t.chunks[:0]
		t.m.tailMerges.Inc()
	}
	t.nextID++
	c := &tailChunk{id: t.nextID, from: from, to: to}
	for _, s := range t.made {
		data := t.mem.files[s.Path]
		f := &tailFile{path: fmt.Sprintf("%s%d/%s", lake.TailPrefix, c.id, s.Path), size: int64(len(data))}
		f.data.Store(&data)
		row := s.CatalogRow()
		row.Path = f.path
		c.segs = append(c.segs, row)
		c.files = append(c.files, f)
		t.files[f.path] = f
		t.bytes += f.size
	}
	clear(t.mem.files)
	t.made = t.made[:0]
	t.chunks = append(t.chunks, c)
	t.built = to
	t.m.tailBytes.Set(float64(t.bytes))
	return nil
}

// read hands the records of (from, end] (fewer past tailChunkBytes of
// rows, once past base) to the writer and returns the position after the
// last one; with probe, each record is first encoded alone and left out
// when that fails.
func (t *tail) read(from, end, base int64, probe bool) (int64, error) {
	r := t.q.NewReader(queue.Position(from))
	defer r.Close()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	to := from
	for to < end && (t.w.Stats().BufferedBytes < t.chunkBytes || to < base) {
		rec, pos, err := r.Next(done)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				break // caught up with the durable end
			}
			return to, fmt.Errorf("read queue at %d: %w", to, err)
		}
		to = int64(pos)
		t.add(rec, probe)
	}
	return to, nil
}

func (t *tail) discard() {
	clear(t.mem.files)
	t.made = t.made[:0]
}

// add decodes one queue record into the tail writer. Records the lake
// loop would skip (undecodable, refused tenant) are skipped here too, and
// with probe those it would put in quarantine.
func (t *tail) add(rec []byte, probe bool) {
	r, err := parseRecord(rec)
	if err != nil || !r.to(lakeDest) {
		return
	}
	kind, body, tenant := r.Kind, r.Body, string(r.Tenant)
	switch kind {
	case signal.KindLogs:
		t.logs.Reset()
		if otlp.DecodeLogs(&t.logs, body) == nil && (!probe || t.probe.Logs(tenant, &t.logs) == nil) {
			_ = t.w.WriteLogs(tenant, &t.logs)
		}
	case signal.KindMetrics:
		t.metrics.Reset()
		if decodeMetricsRecord(&t.metrics, r.Enc, body) == nil && (!probe || t.probe.Metrics(tenant, &t.metrics) == nil) {
			_ = t.w.WriteMetrics(tenant, &t.metrics)
		}
	case signal.KindTraces:
		t.spans.Reset()
		if otlp.DecodeTraces(&t.spans, body) == nil && (!probe || t.probe.Spans(tenant, &t.spans) == nil) {
			_ = t.w.WriteSpans(tenant, &t.spans)
		}
	}
}

// tailMatches applies a catalog filter to a tail segment as the catalog
// applies it to its rows.
func tailMatches(s *catalog.Segment, f *catalog.Filter) bool {
	switch {
	case f.Table != "" && s.Table != f.Table,
		f.Tenant != "" && s.Tenant != f.Tenant,
		f.From != 0 && s.MaxTime < f.From,
		f.To != 0 && s.MinTime > f.To,
		f.Level != nil && s.Level != *f.Level,
		f.Service != "" && len(s.Services) > 0 && !slices.Contains(s.Services, f.Service),
		f.MetricName != "" && len(s.MetricNames) > 0 && !slices.Contains(s.MetricNames, f.MetricName):
		return false
	}
	return true
}

// store returns base with the tail's files readable under lake.TailPrefix;
// every other call goes to base.
func (t *tail) store(base lake.Store) lake.Store { return tailStore{Store: base, t: t} }

type tailStore struct {
	lake.Store
	t *tail
}

func (s tailStore) Open(p string) (lake.ObjectReader, error) {
	if !lake.IsTailPath(p) {
		return s.Store.Open(p)
	}
	s.t.mu.Lock()
	f := s.t.files[p]
	s.t.mu.Unlock()
	if f == nil || f.data.Load() == nil {
		return nil, fmt.Errorf("open %q: unflushed tail file no longer held (its rows are in the lake now; run the query again): %w", p, fs.ErrNotExist)
	}
	return &tailReader{f: f}, nil
}

// tailReader reads a tail file; it fails once the file is dropped, so a
// reader kept in a cache does not keep the bytes alive.
type tailReader struct{ f *tailFile }

func (r *tailReader) Size() int64  { return r.f.size }
func (r *tailReader) Close() error { return nil }

func (r *tailReader) ReadAt(p []byte, off int64) (int, error) {
	d := r.f.data.Load()
	if d == nil {
		return 0, fmt.Errorf("read %q: unflushed tail file no longer held: %w", r.f.path, fs.ErrNotExist)
	}
	if off < 0 || off > int64(len(*d)) {
		return 0, fmt.Errorf("read %q at %d: out of range", r.f.path, off)
	}
	n := copy(p, (*d)[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// memStore is the in-memory Store the tail writer encodes into; used by
// the build alone (under buildMu).
type memStore struct{ files map[string][]byte }

func (m *memStore) Create(p string) (lake.ObjectWriter, error) { return &memWriter{m: m, p: p}, nil }
func (m *memStore) Open(p string) (lake.ObjectReader, error) {
	return nil, fmt.Errorf("open %q: %w", p, fs.ErrNotExist)
}
func (m *memStore) Remove(p string) error { delete(m.files, p); return nil }
func (m *memStore) Walk(string, func(string, int64) error) error {
	return nil
}

type memWriter struct {
	m   *memStore
	p   string
	buf bytes.Buffer
}

func (w *memWriter) Write(b []byte) (int, error) { return w.buf.Write(b) }
func (w *memWriter) Commit() error {
	w.m.files[w.p] = w.buf.Bytes()
	return nil
}
func (w *memWriter) Abort() error { return nil }
