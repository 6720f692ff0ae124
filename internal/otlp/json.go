package otlp

import (
	"fmt"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/sluice-dev/sluice/internal/signal"
)

// The JSON path is the slow one: pdata parses OTLP JSON, marshals protobuf,
// and the protobuf decoder fills the batch. It accepts one request or many
// (JSON lines as the Collector's file exporter writes them, or simply
// concatenated objects).

// DecodeLogsJSON appends the records of one or more OTLP JSON logs requests
// to dst. On error dst is left as it was.
func DecodeLogsJSON(dst *signal.Logs, js []byte) error {
	m, n := markCommon(&dst.Common), dst.Len()
	var u plog.JSONUnmarshaler
	var pm plog.ProtoMarshaler
	err := eachJSONDoc(js, func(doc []byte) error {
		ld, err := u.UnmarshalLogs(doc)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrJSON, err)
		}
		pb, err := pm.MarshalLogs(ld)
		if err != nil {
			return err
		}
		return DecodeLogs(dst, pb)
	})
	if err != nil {
		m.restore(&dst.Common)
		truncateLogs(dst, n)
	}
	return err
}

// DecodeMetricsJSON is DecodeLogsJSON for metrics.
func DecodeMetricsJSON(dst *signal.Metrics, js []byte) error {
	m, n, nd := markCommon(&dst.Common), dst.Len(), len(dst.Descs)
	nu, nf := len(dst.U64), len(dst.F64)
	var u pmetric.JSONUnmarshaler
	var pm pmetric.ProtoMarshaler
	err := eachJSONDoc(js, func(doc []byte) error {
		md, err := u.UnmarshalMetrics(doc)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrJSON, err)
		}
		pb, err := pm.MarshalMetrics(md)
		if err != nil {
			return err
		}
		return DecodeMetrics(dst, pb)
	})
	if err != nil {
		m.restore(&dst.Common)
		dst.Truncate(n)
		dst.Descs = dst.Descs[:nd]
		dst.U64, dst.F64 = dst.U64[:nu], dst.F64[:nf]
	}
	return err
}

// DecodeTracesJSON is DecodeLogsJSON for traces.
func DecodeTracesJSON(dst *signal.Spans, js []byte) error {
	m, n := markCommon(&dst.Common), dst.Len()
	var u ptrace.JSONUnmarshaler
	var pm ptrace.ProtoMarshaler
	err := eachJSONDoc(js, func(doc []byte) error {
		td, err := u.UnmarshalTraces(doc)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrJSON, err)
		}
		pb, err := pm.MarshalTraces(td)
		if err != nil {
			return err
		}
		return DecodeTraces(dst, pb)
	})
	if err != nil {
		m.restore(&dst.Common)
		truncateSpans(dst, n)
	}
	return err
}

// eachJSONDoc calls fn for every top-level JSON object in js, without
// its null members (see PrepareJSONRequest).
func eachJSONDoc(js []byte, fn func(doc []byte) error) error {
	r := jsonReader{b: js}
	var out []byte
	for n := 1; ; n++ {
		doc, _, err := nextJSONDoc(&r, &out)
		if err != nil {
			return describe(n, err)
		}
		if doc == nil {
			return nil
		}
		if err := fn(doc); err != nil {
			return describe(n, err)
		}
	}
}
