package otlp

import (
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/sluice-dev/sluice/internal/signal"
)

// TestCheckTimestamps: every time field of 2^63 ns or more is refused,
// naming the field (issue 11 item 9: 2^63 read back as 1677).
func TestCheckTimestamps(t *testing.T) {
	md := pmetric.NewMetrics()
	dp := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(1)
	dp.SetStartTimestamp(pcommon.Timestamp(1 << 63))
	b, _ := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	var m signal.Metrics
	if err := DecodeMetrics(&m, b); err != nil {
		t.Fatal(err)
	}
	err := CheckMetrics(&m, 0, Limits{})
	if !errors.Is(err, ErrTimestamp) || !strings.Contains(err.Error(), "start_time_unix_nano 9223372036854775808") {
		t.Errorf("metrics: %v", err)
	}

	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetStartTimestamp(1)
	sp.SetEndTimestamp(pcommon.Timestamp(1<<63 + 5))
	b, _ = ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	var s signal.Spans
	if err := DecodeTraces(&s, b); err != nil {
		t.Fatal(err)
	}
	err = CheckSpans(&s, 0, Limits{})
	if !errors.Is(err, ErrTimestamp) || !strings.Contains(err.Error(), "span 0: end_time_unix_nano 9223372036854775813") {
		t.Errorf("spans: %v", err)
	}
	sp.SetEndTimestamp(1<<63 - 1) // the largest time that fits is fine
	b, _ = ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	s.Reset()
	if err := DecodeTraces(&s, b); err != nil {
		t.Fatal(err)
	}
	if err := CheckSpans(&s, 0, Limits{}); err != nil {
		t.Errorf("2^63-1: %v", err)
	}
}

// TestCheckAttrLimits covers resource and scope sets, which the pipeline
// test does not.
func TestCheckAttrLimits(t *testing.T) {
	var l signal.Logs
	c := &l.Common
	start := uint32(c.Attrs.Len())
	for i := range 3 {
		c.Attrs.Append(c.Keys.IDString(string(rune('a'+i))), signal.ValueInt, 1)
	}
	c.Scopes = append(c.Scopes, signal.Scope{Attrs: signal.Range{Start: start, End: uint32(c.Attrs.Len())}})
	var le *LimitError
	err := CheckLogs(&l, 0, Limits{MaxAttrsPerRecord: 2})
	if !errors.As(err, &le) || le.Limit != LimitAttrsPerRecord || !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "scope 0 has 3 attributes") {
		t.Errorf("scope: %v", err)
	}
	if err := CheckLogs(&l, 0, Limits{MaxAttrsPerRecord: 3, MaxAttrsPerRequest: 3}); err != nil {
		t.Errorf("at the limits: %v", err)
	}
	if err := CheckLogs(&l, 0, Limits{}); err != nil {
		t.Errorf("no limits: %v", err)
	}
}
