package exporter

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/exporter/sending"
	"github.com/sluice-dev/sluice/internal/queue"
	"github.com/sluice-dev/sluice/internal/signal"
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
	if err := <-done; err != nil {
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
		if err := <-done; err != nil {
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
