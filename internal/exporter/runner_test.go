package exporter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/exporter/sending"
	"github.com/sluice-dev/sluice/internal/queue"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/waittest"
)

// captureSender keeps the records of every Send.
type captureSender struct {
	mu   sync.Mutex
	recs []Record
}

func (c *captureSender) Send(_ context.Context, recs []Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range recs {
		r.Body = append([]byte(nil), r.Body...)
		c.recs = append(c.recs, r)
	}
	return nil
}

func (c *captureSender) Endpoints() []*sending.Endpoint { return nil }

// openQueue opens a queue in a temporary directory (closed when the test
// ends) and a cursor "x" on it.
func openQueue(t *testing.T) (*queue.Queue, *queue.Cursor) {
	q, err := queue.Open(queue.Options{Dir: t.TempDir(), SegmentBytes: 4 << 20, MaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	cur, err := q.OpenCursor("x", queue.CursorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return q, cur
}

// TestRunnerKeepsEveryRecordField: the Runner hands the Sender each
// record as Parse made it (its body copied), every field included: a
// remote-write record's series count lets the exporter forward it without
// decoding it.
func TestRunnerKeepsEveryRecordField(t *testing.T) {
	q, cur := openQueue(t)
	for _, b := range []string{"one", "two"} {
		if _, err := q.Append([]byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	cs := &captureSender{}
	r, err := New(Options{Name: "x", Cursor: cur, Sender: cs, BatchDelay: 10 * time.Millisecond,
		Parse: func(rec []byte) (Record, error) {
			return Record{Kind: signal.KindMetrics, Tenant: "t-" + string(rec), Body: rec, RemoteWrite: 1, Series: len(rec) + 4}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for cur.Committed() < q.Stats().Last && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := waittest.Recv(t, done, "Run to end once cancelled"); err != nil {
		t.Fatal(err)
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	want := []Record{{Kind: signal.KindMetrics, Tenant: "t-one", Body: []byte("one"), RemoteWrite: 1, Series: 7},
		{Kind: signal.KindMetrics, Tenant: "t-two", Body: []byte("two"), RemoteWrite: 1, Series: 7}}
	if len(cs.recs) != len(want) {
		t.Fatalf("sent %d records, want %d", len(cs.recs), len(want))
	}
	for i, w := range want {
		g := cs.recs[i]
		if g.Kind != w.Kind || g.Tenant != w.Tenant || string(g.Body) != string(w.Body) || g.RemoteWrite != w.RemoteWrite || g.Series != w.Series {
			t.Fatalf("record %d: %+v, want %+v", i, g, w)
		}
	}
}

// Records the exporter skips (signals it does not forward, records for
// other exporters) are committed even when nothing follows them: its lag
// reaches zero on an idle queue.
func TestRunnerCommitsTrailingSkippedRecords(t *testing.T) {
	q, cur := openQueue(t)
	cs := &captureSender{}
	r, err := New(Options{Name: "x", Cursor: cur, Sender: cs, BatchDelay: 10 * time.Millisecond,
		Signals: []signal.Kind{signal.KindLogs},
		Parse: func(rec []byte) (Record, error) {
			switch string(rec) {
			case "skip":
				return Record{}, ErrSkip
			case "metrics":
				return Record{Kind: signal.KindMetrics, Body: rec}, nil
			}
			return Record{Kind: signal.KindLogs, Body: rec}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := waittest.Recv(t, done, "Run to end once cancelled"); err != nil {
			t.Error(err)
		}
	}()
	caughtUp := func(what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for cur.Committed() < q.Stats().Last || r.Stats().Cursor.LagBytes != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: committed %d of %d, stats %+v", what, cur.Committed(), q.Stats().Last, r.Stats())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// A sent record, then, once it is committed, records the exporter
	// skips with nothing after them.
	if _, err := q.Append([]byte("logs")); err != nil {
		t.Fatal(err)
	}
	caughtUp("after a sent record")
	for _, b := range []string{"metrics", "skip"} {
		if _, err := q.Append([]byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	caughtUp("after skipped records alone")
	if st := r.Stats(); st.SentRecords != 1 || st.Skipped != 2 {
		t.Fatalf("stats %+v, want 1 sent and 2 skipped", st)
	}
}

// windowSender is a BatchSender whose Sends wait until released; it
// records the most Sends it saw at once and the batches delivered.
type windowSender struct {
	mu       sync.Mutex
	inflight int
	max      int
	gate     func(first string, max int) bool // Send of the batch starting with first waits while gate says so
	fail     func(first string) bool          // Send fails (once each) when fail says so
	failed   map[string]bool
	got      []string
}

func (w *windowSender) BatchesInFlight() int           { return 4 }
func (w *windowSender) Endpoints() []*sending.Endpoint { return nil }

func (w *windowSender) Send(ctx context.Context, recs []Record) error {
	first := string(recs[0].Body)
	w.mu.Lock()
	w.inflight++
	w.max = max(w.max, w.inflight)
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.inflight--
		w.mu.Unlock()
	}()
	held := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.gate != nil && w.gate(first, w.max)
	}
	for deadline := time.Now().Add(30 * time.Second); held() && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fail != nil && w.fail(first) && !w.failed[first] {
		w.failed[first] = true
		return errors.New("scripted failure")
	}
	for _, r := range recs {
		w.got = append(w.got, string(r.Body))
	}
	return nil
}

// TestRunnerWindow: a BatchSender gets several batches at once, and the
// cursor is committed in queue order only: while the first batch is held,
// later ones are delivered but the cursor stays before the first; a batch
// that fails is read again with everything after it, and nothing is lost.
func TestRunnerWindow(t *testing.T) {
	q, cur := openQueue(t)
	var firstPos queue.Position // the end of r0
	for i := range 8 {
		pos, err := q.Append([]byte(fmt.Sprintf("r%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			firstPos = pos
		}
	}
	var hold atomic.Bool
	hold.Store(true)
	ws := &windowSender{failed: map[string]bool{},
		// Every batch waits until 4 were in flight at once; r0 until hold ends.
		gate: func(first string, max int) bool { return max < 4 || (first == "r0" && hold.Load()) },
		fail: func(first string) bool { return first == "r2" }}
	// One record per batch: BatchBytes 1.
	r, err := New(Options{Name: "x", Cursor: cur, Sender: ws, BatchBytes: 1, BatchDelay: time.Millisecond,
		Parse: func(rec []byte) (Record, error) { return Record{Kind: signal.KindLogs, Body: rec}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := waittest.Recv(t, done, "Run to end once cancelled"); err != nil {
			t.Error(err)
		}
	}()
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: never", what)
			}
		}
	}
	// r0 held: up to 4 batches in flight, r1 and r3 delivered (r2 failed).
	waitUntil("4 batches in flight", func() bool { ws.mu.Lock(); defer ws.mu.Unlock(); return ws.max == 4 })
	waitUntil("r1 delivered", func() bool { ws.mu.Lock(); defer ws.mu.Unlock(); return slices.Contains(ws.got, "r1") })
	if c := cur.Committed(); c >= firstPos {
		t.Fatalf("committed %d, the end of the held first batch (%d) or past it", c, firstPos)
	}
	hold.Store(false)
	waitUntil("caught up", func() bool { return cur.Committed() == q.Stats().Last })
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for i := range 8 {
		if !slices.Contains(ws.got, fmt.Sprintf("r%d", i)) {
			t.Errorf("r%d never delivered; got %v", i, ws.got)
		}
	}
	if !ws.failed["r2"] {
		t.Errorf("r2's failure never happened")
	}
	if st := r.Stats(); st.SentRecords < 8 {
		t.Errorf("stats %+v: want at least 8 sent records", st)
	}
}
