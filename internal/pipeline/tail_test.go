package pipeline

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/waittest"
)

// tailSeqs reads the seq attribute of every row of the logs segments segs
// through store (which opens tail paths too).
func tailSeqs(t *testing.T, store lake.Store, segs []catalog.Segment) (seqs []int64, tailRows int) {
	t.Helper()
	var l signal.Logs
	for _, s := range segs {
		f, err := lake.OpenObject(store, s.Path)
		if err != nil {
			t.Error(err)
			return nil, 0
		}
		l.Reset()
		err = f.ReadLogs(&l)
		f.Close()
		if err != nil {
			t.Errorf("read %s: %v", s.Path, err)
			return nil, 0
		}
		if int64(l.Len()) != s.Rows {
			t.Errorf("%s: %d rows, listed with %d", s.Path, l.Len(), s.Rows)
		}
		if lake.IsTailPath(s.Path) {
			tailRows += l.Len()
		}
		for i := range l.Len() {
			seqs = append(seqs, l.AttrInt(l.FindAttr(l.Attr[i], "seq")))
		}
	}
	return seqs, tailRows
}

// TestTailNoDuplicateNoGap lists the lake and the unflushed tail while
// records are acknowledged and checkpoints commit: every listing must hold
// each record acknowledged before it exactly once, and no record twice,
// whichever side of a commit it falls on. "commits" checkpoints every
// 20 ms; "merges" rarely, so that listings split the tail into more than
// tailMaxChunks chunks and builds read it again into one.
func TestTailNoDuplicateNoGap(t *testing.T) {
	t.Run("commits", func(t *testing.T) { testTailBoundary(t, 20*time.Millisecond, 4*time.Second, false) })
	t.Run("merges", func(t *testing.T) { testTailBoundary(t, 1500*time.Millisecond, 4*time.Second, true) })
}

func testTailBoundary(t *testing.T, flush, run time.Duration, merges bool) {
	cfg := testConfig(t)
	cfg.Query.Addr = "127.0.0.1:0"
	cfg.Lake.FlushInterval = config.Duration(flush)
	cfg.Upkeep.Enabled = false
	p := start(t, cfg)
	store := p.tail.store(lake.NewLocalStore(cfg.Lake.Root))
	if merges {
		p.tail.maxChunks = 4
	}

	const perReq = 7
	var acked atomic.Int64 // records 0..acked-1 are acknowledged
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ctx.Err() == nil; n += perReq {
			if r := post(t, p, "/v1/logs", "", logsRequest(t, n, perReq)); r.StatusCode != http.StatusOK {
				t.Errorf("post: %s", r.Status)
				return
			}
			acked.Store(int64(n + perReq))
		}
	}()
	var lists, withTail, withBoth atomic.Int64
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				want := acked.Load()
				segs, release, err := p.tail.List(context.Background(), catalog.Filter{Table: "logs", Tenant: "default"})
				if err != nil {
					t.Error(err)
					return
				}
				seqs, tailRows := tailSeqs(t, store, segs)
				release()
				seen := make(map[int64]bool, len(seqs))
				for _, s := range seqs {
					if seen[s] {
						t.Errorf("record %d listed twice", s)
						return
					}
					seen[s] = true
				}
				for s := range want {
					if !seen[s] {
						t.Errorf("record %d acknowledged before the listing is missing (%d of %d listed, %d from the tail)", s, len(seqs), want, tailRows)
						return
					}
				}
				lists.Add(1)
				if tailRows > 0 {
					withTail.Add(1)
					if tailRows < len(seqs) {
						withBoth.Add(1)
					}
				}
			}
		}()
	}
	waittest.Wait(t, &wg, "the readers")
	if t.Failed() {
		return
	}
	commits, _ := p.cat.QueuePosition(context.Background(), QueueName)
	t.Logf("%d listings, %d with tail rows, %d with tail and lake rows; %d records; committed position %d; %d tail builds, %d merges, %d retries",
		lists.Load(), withTail.Load(), withBoth.Load(), acked.Load(), commits, int(testCounter(p.m.tailBuilds)),
		int(testCounter(p.m.tailMerges)), int(testCounter(p.m.tailRetries)))
	if merges {
		if testCounter(p.m.tailMerges) == 0 {
			t.Fatal("no merge of the tail's chunks happened")
		}
		return
	}
	if withBoth.Load() < 5 {
		t.Fatalf("only %d listings mixed tail and lake rows: the boundary was not exercised", withBoth.Load())
	}
}

func testCounter(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// TestTailWarm: once queries come, the tail is built in the background,
// so a later query finds the new records already encoded.
func TestTailWarm(t *testing.T) {
	cfg := testConfig(t)
	cfg.Query.Addr = "127.0.0.1:0"
	cfg.Upkeep.Enabled = false // flush_interval is an hour: no checkpoint
	p := start(t, cfg)
	store := p.tail.store(lake.NewLocalStore(cfg.Lake.Root))
	list := func() int {
		segs, release, err := p.tail.List(context.Background(), catalog.Filter{Table: "logs"})
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		seqs, _ := tailSeqs(t, store, segs)
		return len(seqs)
	}
	post(t, p, "/v1/logs", "", logsRequest(t, 0, 10))
	if n := list(); n != 10 {
		t.Fatalf("%d records listed, want 10", n)
	}
	post(t, p, "/v1/logs", "", logsRequest(t, 10, 10))
	builds := testCounter(p.m.tailBuilds)
	deadline := time.Now().Add(10 * time.Second)
	for testCounter(p.m.tailBuilds) == builds {
		if time.Now().After(deadline) {
			t.Fatal("no background build within 10 s of new records")
		}
		time.Sleep(50 * time.Millisecond)
	}
	builds = testCounter(p.m.tailBuilds)
	if n := list(); n != 20 {
		t.Fatalf("%d records listed, want 20", n)
	}
	if b := testCounter(p.m.tailBuilds); b != builds {
		t.Errorf("the query built %v more chunks; the background build should have done it", b-builds)
	}
}

// TestTailMaxBytes: lake.tail_max_bytes bounds the tail's files: past it
// builds fail (counted) and queries see what was built, not the newest
// records; 0 serves no tail at all.
func TestTailMaxBytes(t *testing.T) {
	cfg := testConfig(t)
	cfg.Query.Addr = "127.0.0.1:0"
	cfg.Upkeep.Enabled = false // flush_interval is an hour: no checkpoint
	cfg.Lake.TailMaxBytes = 1  // the first chunk passes it
	p := start(t, cfg)
	store := p.tail.store(lake.NewLocalStore(cfg.Lake.Root))
	list := func() int {
		segs, release, err := p.tail.List(context.Background(), catalog.Filter{Table: "logs"})
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		seqs, _ := tailSeqs(t, store, segs)
		return len(seqs)
	}
	post(t, p, "/v1/logs", "", logsRequest(t, 0, 10))
	if n := list(); n != 10 {
		t.Fatalf("%d records listed, want 10", n)
	}
	post(t, p, "/v1/logs", "", logsRequest(t, 10, 10))
	if n := list(); n != 10 {
		t.Fatalf("%d records listed past lake.tail_max_bytes, want the 10 built before it", n)
	}
	if testCounter(p.m.tailBuildErrors) == 0 {
		t.Error("a build past lake.tail_max_bytes was not counted")
	}

	cfg = testConfig(t)
	cfg.Query.Addr = "127.0.0.1:0"
	cfg.Lake.TailMaxBytes = 0
	if p := start(t, cfg); p.tail != nil {
		t.Error("lake.tail_max_bytes 0 still serves the tail")
	}
}

// TestTailLeavesOutPoison: a record the lake writer cannot encode (the lake
// loop puts it in quarantine) does not blank the tail: the records around
// it are served, it is not, before and after the checkpoints.
func TestTailLeavesOutPoison(t *testing.T) {
	t.Setenv("SLUICE_FAULT_POISON_KEY", "poison")
	cfg := testConfig(t)
	cfg.Query.Addr = "127.0.0.1:0"
	cfg.Upkeep.Enabled = false
	p := start(t, cfg)
	store := p.tail.store(lake.NewLocalStore(cfg.Lake.Root))
	for _, body := range [][]byte{logsRequest(t, 0, 3), poisonRequest(t, 100), logsRequest(t, 10, 3)} {
		if r := post(t, p, "/v1/logs", "acme", body); r.StatusCode != 200 {
			t.Fatalf("status %d", r.StatusCode)
		}
	}
	want := append(seqRange(0, 3), seqRange(10, 3)...)
	check := func(when string) {
		t.Helper()
		segs, release, err := p.tail.List(context.Background(), catalog.Filter{Table: "logs", Tenant: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		got, _ := tailSeqs(t, store, segs)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: listed %v, want %v", when, got, want)
		}
	}
	check("before the checkpoint")
	if n := testCounter(p.m.tailBuildErrors); n != 0 {
		t.Errorf("%v tail build errors", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_ = p.Checkpoint(ctx) // fails on the poison, then the replay quarantines it
	if err := p.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	check("after the checkpoints")
}
