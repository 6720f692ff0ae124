package prom

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

// countingTail is a lake.TailSource that lists what the catalog lists and
// counts listings and releases.
type countingTail struct {
	cat *catalog.Catalog

	mu              sync.Mutex
	lists, released int
	tables          []string
}

func (c *countingTail) List(ctx context.Context, f catalog.Filter) ([]catalog.Segment, func(), error) {
	segs, err := c.cat.List(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	c.lists++
	c.tables = append(c.tables, f.Table)
	c.mu.Unlock()
	return segs, func() {
		c.mu.Lock()
		c.released++
		c.mu.Unlock()
	}, nil
}

// TestTailListedAndReleased: with Options.Tail, raw metrics segments are
// listed through the tail (never rollups), and every listing is released
// when the querier closes, not before.
func TestTailListedAndReleased(t *testing.T) {
	l := newTestLake(t)
	s := defaultSynth()
	l.Write(t, "acme", 100, s.JSON())
	ct := &countingTail{cat: l.Catalog}
	a, err := NewAdapter(Options{Catalog: l.Catalog, Store: l.Store, Tail: ct, Rollups: true})
	if err != nil {
		t.Fatal(err)
	}
	end := s.Start.Add(time.Duration(s.Points-1) * s.Interval)
	v := instant(t, a.Queryable("acme", Limits{}), `test_queue_depth{service_name="checkout", http_route="/a"}`, end)
	if len(v) != 1 || v[0].F != float64(s.Points-1) {
		t.Fatalf("plain selector through the tail: %v", v)
	}
	if ct.lists == 0 || ct.released != ct.lists {
		t.Fatalf("%d listings, %d released after the query", ct.lists, ct.released)
	}
	for _, tb := range ct.tables {
		if tb != "metrics" {
			t.Fatalf("the tail was asked for table %q", tb)
		}
	}

	q, err := a.Queryable("acme", Limits{}).Querier(0, end.UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	before := ct.released
	if _, _, err := q.LabelNames(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if ct.released != before {
		t.Fatal("a listing was released before the querier closed")
	}
	q.Close()
	if ct.released != ct.lists {
		t.Fatalf("%d listings, %d released after Close", ct.lists, ct.released)
	}
	if _, err := a.Metadata(context.Background(), "acme", ""); err != nil {
		t.Fatal(err)
	}
	if ct.released != ct.lists {
		t.Fatalf("Metadata: %d listings, %d released", ct.lists, ct.released)
	}
}
