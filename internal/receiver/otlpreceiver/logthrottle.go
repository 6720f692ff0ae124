package otlpreceiver

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// warnEvery is the least time between two log lines of one kind of warning;
// bad input at a network edge can repeat thousands of times a second.
const warnEvery = 10 * time.Second

// throttledLog logs one kind of warning at most once per warnEvery and
// reports how many were suppressed in between. Safe for concurrent use.
type throttledLog struct {
	log        *slog.Logger
	msg        string
	next       atomic.Int64 // unix nanoseconds before which lines are suppressed
	suppressed atomic.Int64
}

func (t *throttledLog) warn(attrs ...slog.Attr) {
	now := time.Now().UnixNano()
	next := t.next.Load()
	if now < next || !t.next.CompareAndSwap(next, now+int64(warnEvery)) {
		t.suppressed.Add(1)
		return
	}
	if n := t.suppressed.Swap(0); n > 0 {
		attrs = append(attrs, slog.Int64("suppressed", n))
	}
	t.log.LogAttrs(context.Background(), slog.LevelWarn, t.msg, attrs...)
}
