package otlp

import (
	"fmt"

	"github.com/sluice-dev/sluice/internal/signal"
)

// Limits bound what one export request may hold, checked on the decoded
// batch by Check*. A zero field is no limit.
type Limits struct {
	// MaxAttrsPerRecord bounds the attributes of one attribute set: a
	// record's (log record, data point, span), a resource's or a scope's.
	MaxAttrsPerRecord int
	// MaxAttrsPerRequest bounds the attributes of the whole request, all
	// sets together (nested values count as one).
	MaxAttrsPerRequest int
}

// Names of the limits, as errors and counters name them.
const (
	LimitAttrsPerRecord  = "max_attributes_per_record"
	LimitAttrsPerRequest = "max_attributes_per_request"
	LimitTimestamp       = "timestamp"
)

// LimitError is a request past one of Limits or with a timestamp past
// 2^63-1 ns; it wraps ErrLimit or ErrTimestamp.
type LimitError struct {
	Limit string // one of the Limit* names
	msg   string
	err   error
}

func (e *LimitError) Error() string { return e.msg }
func (e *LimitError) Unwrap() error { return e.err }

// CheckLogs checks the records of l from record from on against lim and
// the timestamp rule (see checkTimes).
func CheckLogs(l *signal.Logs, from int, lim Limits) error {
	if err := checkTimes("log record", "time_unix_nano", l.Time[from:], "observed_time_unix_nano", l.ObservedTime[from:]); err != nil {
		return err
	}
	return lim.checkAttrs(&l.Common, "log record", l.Attr[from:])
}

// CheckMetrics is CheckLogs for data points.
func CheckMetrics(m *signal.Metrics, from int, lim Limits) error {
	if err := checkTimes("data point", "time_unix_nano", m.Time[from:], "start_time_unix_nano", m.StartTime[from:]); err != nil {
		return err
	}
	return lim.checkAttrs(&m.Common, "data point", m.Attr[from:])
}

// CheckSpans is CheckLogs for spans.
func CheckSpans(s *signal.Spans, from int, lim Limits) error {
	if err := checkTimes("span", "start_time_unix_nano", s.StartTime[from:], "end_time_unix_nano", s.EndTime[from:]); err != nil {
		return err
	}
	return lim.checkAttrs(&s.Common, "span", s.Attr[from:])
}

// checkTimes refuses timestamps of 2^63 ns (2262-04-11) or more: OTLP
// carries them as fixed64, batches and the lake as int64, where they
// would wrap to before 1970. A request carrying one is refused whole
// rather than clamped, so no stored time differs from the sent one.
func checkTimes(what, name1 string, t1 []int64, name2 string, t2 []int64) error {
	for _, c := range [2]struct {
		name string
		t    []int64
	}{{name1, t1}, {name2, t2}} {
		for i, t := range c.t {
			if t < 0 {
				return &LimitError{Limit: LimitTimestamp, err: ErrTimestamp,
					msg: fmt.Sprintf("%s %d: %s %d is past the largest time sluice stores (2^63-1 ns, 2262-04-11)", what, i, c.name, uint64(t))}
			}
		}
	}
	return nil
}

// checkAttrs checks every attribute set of c (all of its resources and
// scopes, and the records' sets recs) and their total.
func (lim Limits) checkAttrs(c *signal.Common, what string, recs []signal.Range) error {
	if lim.MaxAttrsPerRequest > 0 && c.Attrs.Len() > lim.MaxAttrsPerRequest {
		return &LimitError{Limit: LimitAttrsPerRequest, err: ErrLimit,
			msg: fmt.Sprintf("request has %d attributes, past the limit %s of %d", c.Attrs.Len(), LimitAttrsPerRequest, lim.MaxAttrsPerRequest)}
	}
	limit := lim.MaxAttrsPerRecord
	if limit <= 0 {
		return nil
	}
	tooMany := func(set string, i int, r signal.Range) error {
		if n := int(r.End) - int(r.Start); n > limit {
			return &LimitError{Limit: LimitAttrsPerRecord, err: ErrLimit,
				msg: fmt.Sprintf("%s %d has %d attributes, past the limit %s of %d", set, i, n, LimitAttrsPerRecord, limit)}
		}
		return nil
	}
	for i, r := range c.Resources {
		if err := tooMany("resource", i, r.Attrs); err != nil {
			return err
		}
	}
	for i, s := range c.Scopes {
		if err := tooMany("scope", i, s.Attrs); err != nil {
			return err
		}
	}
	for i, r := range recs {
		if err := tooMany(what, i, r); err != nil {
			return err
		}
	}
	return nil
}
