package otlp

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/sluice-dev/sluice/internal/signal"
)

func TestCorpusLogs(t *testing.T) {
	total := 0
	for _, f := range corpus(t, "logs") {
		var u plog.ProtoUnmarshaler
		ld, err := u.UnmarshalLogs(f.data)
		if err != nil {
			t.Fatalf("%s: pdata: %v", f.name, err)
		}
		var b signal.Logs
		if err := DecodeLogs(&b, f.data); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if b.Len() != ld.LogRecordCount() {
			t.Fatalf("%s: %d records, pdata counts %d", f.name, b.Len(), ld.LogRecordCount())
		}
		want := pdataLogs(ld)
		sameRecords(t, f.name+" decode", want, batchLogs(t, &b))

		// Encode, decode with pdata, compare with pdata's view of the file.
		pb := AppendLogsProto(nil, &b)
		ld2, err := u.UnmarshalLogs(pb)
		if err != nil {
			t.Fatalf("%s: pdata rejects our encoding: %v", f.name, err)
		}
		sameRecords(t, f.name+" encode", want, pdataLogs(ld2))
		total += b.Len()
	}
	t.Logf("%d log records", total)
}

func TestCorpusMetrics(t *testing.T) {
	total := 0
	for _, f := range corpus(t, "metrics") {
		var u pmetric.ProtoUnmarshaler
		md, err := u.UnmarshalMetrics(f.data)
		if err != nil {
			t.Fatalf("%s: pdata: %v", f.name, err)
		}
		var b signal.Metrics
		if err := DecodeMetrics(&b, f.data); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if b.Len() != md.DataPointCount() {
			t.Fatalf("%s: %d points, pdata counts %d", f.name, b.Len(), md.DataPointCount())
		}
		want := pdataMetrics(md)
		sameRecords(t, f.name+" decode", want, batchMetrics(t, &b))
		pb := AppendMetricsProto(nil, &b)
		md2, err := u.UnmarshalMetrics(pb)
		if err != nil {
			t.Fatalf("%s: pdata rejects our encoding: %v", f.name, err)
		}
		sameRecords(t, f.name+" encode", want, pdataMetrics(md2))
		total += b.Len()
	}
	t.Logf("%d data points", total)
}

func TestCorpusTraces(t *testing.T) {
	total := 0
	for _, f := range corpus(t, "traces") {
		var u ptrace.ProtoUnmarshaler
		td, err := u.UnmarshalTraces(f.data)
		if err != nil {
			t.Fatalf("%s: pdata: %v", f.name, err)
		}
		var b signal.Spans
		if err := DecodeTraces(&b, f.data); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if b.Len() != td.SpanCount() {
			t.Fatalf("%s: %d spans, pdata counts %d", f.name, b.Len(), td.SpanCount())
		}
		want := pdataTraces(td)
		sameRecords(t, f.name+" decode", want, batchTraces(t, &b))
		pb := AppendTracesProto(nil, &b)
		td2, err := u.UnmarshalTraces(pb)
		if err != nil {
			t.Fatalf("%s: pdata rejects our encoding: %v", f.name, err)
		}
		sameRecords(t, f.name+" encode", want, pdataTraces(td2))
		total += b.Len()
	}
	t.Logf("%d spans", total)
}
