package search

import (
	"context"
	"sync"

	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

// tailHold collects the releases of the tail files one request listed;
// they are released when the request ends (its results are written), so
// that the files stay readable between the scan and the output.
type tailHold struct {
	mu       sync.Mutex
	releases []func()
}

type tailHoldKey struct{}

// holdTail returns ctx carrying a hold for the request, and its release.
func (h *Handler) holdTail(ctx context.Context) (context.Context, func()) {
	if h.o.Tail == nil {
		return ctx, func() {}
	}
	th := &tailHold{}
	return context.WithValue(ctx, tailHoldKey{}, th), func() {
		th.mu.Lock()
		defer th.mu.Unlock()
		for _, release := range th.releases {
			release()
		}
		th.releases = nil
	}
}

// list lists the segments of f: the catalog's, plus the unflushed tail's
// in `sluice run` (Options.Tail), held until the request ends.
func (h *Handler) list(ctx context.Context, f catalog.Filter) ([]catalog.Segment, error) {
	th, _ := ctx.Value(tailHoldKey{}).(*tailHold)
	if h.o.Tail == nil || th == nil {
		return h.cat.List(ctx, f)
	}
	segs, release, err := h.o.Tail.List(ctx, f)
	if err != nil {
		return nil, err
	}
	th.mu.Lock()
	th.releases = append(th.releases, release)
	th.mu.Unlock()
	return segs, nil
}
