package prom

import (
	"context"

	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

// listRaw lists the raw metrics segments of f: the catalog's, plus the
// unflushed tail's in `sluice run` (Options.Tail). The tail's files stay
// readable until the querier is closed.
func (q *Querier) listRaw(ctx context.Context, f catalog.Filter) ([]catalog.Segment, error) {
	if q.a.tail == nil {
		return q.a.cat.List(ctx, f)
	}
	segs, release, err := q.a.tail.List(ctx, f)
	if err != nil {
		return nil, err
	}
	q.tailHeld = append(q.tailHeld, release)
	return segs, nil
}

func (q *Querier) releaseTail() {
	for _, release := range q.tailHeld {
		release()
	}
	q.tailHeld = nil
}
