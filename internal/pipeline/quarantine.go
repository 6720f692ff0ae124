package pipeline

import (
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/queue"
	"github.com/sluice-dev/sluice/internal/signal"
)

// Poison isolation. A queue record the lake writer cannot write must not
// stop the lake: a failed checkpoint is replayed from the committed
// position (rewind), and during that replay (isolate) every record is
// first encoded alone by a lake.Probe into nothing. A record that fails
// alone, or does not decode, is a poison record: it goes to the
// quarantine (lake.WriteQuarantine: its body as OTLP and why; a
// remote-write record that decoded is encoded as OTLP for it, one that
// does not decode goes as queued, snappy remote write) and
// the loop goes on past it, so it is tried once more at most, never
// forever. The first successful checkpoint ends isolation. /readyz is 503
// from a failed checkpoint until the next one succeeds, saying why.
//
// Exactly once: a quarantined record is handled like a written one. Its
// files are durable (Store.Commit) before handle advances l.pos past it,
// and l.pos reaches the catalog only with the next checkpoint, together
// with the files of the records around it (lakeLoop.commit). A crash or
// rewind before that checkpoint replays the record, which is quarantined
// again under the same names (named by queue position), so each record
// ends up either in the lake or in the quarantine, once.

// poisonError marks a record the probe could not encode alone.
type poisonError struct{ err error }

func (e *poisonError) Error() string { return "poison record: " + e.err.Error() }
func (e *poisonError) Unwrap() error { return e.err }

func tableOf(k signal.Kind) string {
	switch k {
	case signal.KindLogs:
		return lake.TableLogs
	case signal.KindMetrics:
		return lake.TableMetrics
	case signal.KindTraces:
		return lake.TableTraces
	case signal.KindIOEvents:
		return lake.TableIOEvents
	}
	return ""
}

// probeRecord encodes the batch just decoded for kind alone.
func (l *lakeLoop) probeRecord(kind signal.Kind, tenant string) error {
	switch kind {
	case signal.KindLogs:
		return l.probe.Logs(tenant, &l.logs)
	case signal.KindMetrics:
		return l.probe.Metrics(tenant, &l.metrics)
	case signal.KindIOEvents:
		// The tracer's rows have fixed columns and no attributes: nothing
		// in one record can make the io_events encoder fail alone.
		return nil
	default:
		return l.probe.Spans(tenant, &l.spans)
	}
}

// quarantine stores one record the lake cannot take. An error (the store
// failed) calls for a rewind like a failed write: the record is not lost.
func (l *lakeLoop) quarantine(table, tenant string, body []byte, pos queue.Position, n int, cause error) error {
	e, err := lake.WriteQuarantine(l.store, lake.QuarantineEntry{
		Table: table, Tenant: tenant, Position: uint64(pos), Records: n, Time: time.Now().UTC(), Reason: cause.Error(),
	}, body)
	if err != nil {
		return fmt.Errorf("quarantine the record at queue position %d: %w", pos, err)
	}
	l.m.quarantined.Inc()
	l.log.Warn("record quarantined: the lake cannot write it", "position", pos, "table", e.Table, "tenant", e.Tenant,
		"records", n, "path", e.Body, "reason", cause)
	return nil
}

// failed notes a failed checkpoint: isolate poison records in the replay,
// and say why in /readyz.
func (l *lakeLoop) failed(cause error) {
	l.isolate = true
	l.failures++
	l.status.Store(fmt.Sprintf("lake checkpoints failing (%d in a row, last at %s): %v; see sluice_lake_checkpoint_failures_total",
		l.failures, time.Now().UTC().Format(time.RFC3339), cause))
}

// recovered notes a successful checkpoint.
func (l *lakeLoop) recovered() {
	if l.failures > 0 {
		l.log.Info("lake checkpoints recovered", "failed_before", l.failures)
	}
	l.isolate, l.failures = false, 0
	l.status.Store("")
}

// failing is why the loop is failing, "" when it is not; safe for
// concurrent use (/readyz).
func (l *lakeLoop) failing() string {
	s, _ := l.status.Load().(string)
	return s
}
