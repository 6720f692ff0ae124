package search

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

// countingTail is a lake.TailSource that lists what the catalog lists and
// counts listings and releases.
type countingTail struct {
	cat *catalog.Catalog

	mu              sync.Mutex
	lists, released int
}

func (c *countingTail) List(ctx context.Context, f catalog.Filter) ([]catalog.Segment, func(), error) {
	segs, err := c.cat.List(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	c.lists++
	c.mu.Unlock()
	return segs, func() {
		c.mu.Lock()
		c.released++
		c.mu.Unlock()
	}, nil
}

func (c *countingTail) counts() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lists, c.released
}

// TestTailListedAndReleased: with Options.Tail, the logs search, the spans
// search and the trace lookup list through the tail, answer as without it,
// and release every listing by the end of the request.
func TestTailListedAndReleased(t *testing.T) {
	tl := buildLake(t, 500, []copySpec{{"default", 0}}, nil)
	plain := serve(t, tl, Options{})
	ct := &countingTail{cat: tl.cat}
	tailed := serve(t, tl, Options{Tail: ct})
	for _, path := range []string{logsPath, spansPath} {
		want := plain.all(path, wide(), 1000)
		got := tailed.all(path, wide(), 1000)
		if len(got) != len(want) || len(want) == 0 {
			t.Fatalf("%s: %d records through the tail, %d without", path, len(got), len(want))
		}
	}
	spans := plain.all(spansPath, wide(), 1)
	id, _ := spans[0]["trace_id"].(string)
	if code, _ := tailed.get(tracePrefix+id, nil); code != http.StatusOK {
		t.Fatalf("trace %q through the tail: %d", id, code)
	}
	if lists, released := ct.counts(); lists < 3 || released != lists {
		t.Fatalf("%d listings, %d released", lists, released)
	}
}
