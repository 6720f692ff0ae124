package otlp

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/sluice-dev/sluice/internal/signal"
)

// TestCountRecords: the count agrees with pdata's on every corpus request,
// with no allocation, and a broken structure says so.
func TestCountRecords(t *testing.T) {
	for _, c := range []struct {
		kind  signal.Kind
		dir   string
		count func([]byte) int
	}{
		{signal.KindLogs, "logs", func(b []byte) int {
			r := plogotlp.NewExportRequest()
			if r.UnmarshalProto(b) != nil {
				return -1
			}
			return r.Logs().LogRecordCount()
		}},
		{signal.KindMetrics, "metrics", func(b []byte) int {
			r := pmetricotlp.NewExportRequest()
			if r.UnmarshalProto(b) != nil {
				return -1
			}
			return r.Metrics().DataPointCount()
		}},
		{signal.KindTraces, "traces", func(b []byte) int {
			r := ptraceotlp.NewExportRequest()
			if r.UnmarshalProto(b) != nil {
				return -1
			}
			return r.Traces().SpanCount()
		}},
	} {
		files := corpus(t, c.dir)
		for _, f := range files {
			want := c.count(f.data)
			if want < 0 {
				continue
			}
			got, _, ok := CountRecords(c.kind, f.data)
			if !ok || got != want {
				t.Errorf("%s/%s: %d records (ok %v), pdata counts %d", c.dir, f.name, got, ok, want)
			}
		}
		if allocs := testing.AllocsPerRun(10, func() { CountRecords(c.kind, files[0].data) }); allocs != 0 {
			t.Errorf("%s: %v allocations", c.dir, allocs)
		}
	}
	empty := []byte{0x0a, 0x04, 0x12, 0x02, 0x12, 0x00} // one empty log record
	if n, h, ok := CountRecords(signal.KindLogs, empty); n != 1 || h != 2 || !ok {
		t.Errorf("one empty record: %d records, %d holders, %v", n, h, ok)
	}
	// Two resources, the second with two scopes, one with a metric.
	holders := []byte{0x0a, 0x00, 0x0a, 0x06, 0x12, 0x00, 0x12, 0x02, 0x12, 0x00}
	if n, h, ok := CountRecords(signal.KindMetrics, holders); n != 0 || h != 5 || !ok {
		t.Errorf("holders only: %d records, %d holders, %v", n, h, ok)
	}
	for _, bad := range [][]byte{{0x0a, 0x05, 0x12}, {0x0a}, {0x00, 0x00}, {0x0f}} {
		if _, _, ok := CountRecords(signal.KindLogs, bad); ok {
			t.Errorf("% x: ok", bad)
		}
	}
}
