package lake

import (
	"fmt"

	"github.com/sluice-dev/sluice/internal/lake/format"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// nestedKind names the nested OTLP messages that batches keep as raw
// protobuf and the lake stores as OTLP JSON arrays (format.NestedKind).
type nestedKind = format.NestedKind

const (
	nestedEvent    = format.NestedEvent
	nestedLink     = format.NestedLink
	nestedExemplar = format.NestedExemplar
)

// appendAnyValueJSON renders a scalar AnyValue (as a batch holds it) in OTLP
// JSON; arrays and maps go through the codec.
func appendAnyValueJSON(dst []byte, c *signal.Common, t signal.ValueType, v uint64) ([]byte, error) {
	switch t {
	case signal.ValueString, signal.ValueBytes:
		return appendScalarJSON(dst, t, c.Bytes(signal.Str(v)), 0), nil
	case signal.ValueEmpty, signal.ValueBool, signal.ValueInt, signal.ValueDouble:
		return appendScalarJSON(dst, t, nil, v), nil
	case signal.ValueArray, signal.ValueMap:
		return otlp.AppendAnyValueJSON(dst, c.Bytes(signal.Str(v)))
	}
	return dst, fmt.Errorf("lake: unknown value type %d", t)
}

// appendScalarJSON renders a scalar AnyValue in OTLP JSON
// (format.AppendScalarJSON).
func appendScalarJSON(dst []byte, t signal.ValueType, b []byte, v uint64) []byte {
	return format.AppendScalarJSON(dst, t, b, v)
}

const hexDigits = "0123456789abcdef"

func appendJSONString(dst, s []byte) []byte { return format.AppendJSONString(dst, s) }

// appendMsgsJSON renders the raw messages c.Msgs[r] as a JSON array;
// *scratch is reused for the message list.
func appendMsgsJSON(dst []byte, c *signal.Common, kind nestedKind, r signal.Range, scratch *[][]byte) ([]byte, error) {
	msgs := (*scratch)[:0]
	for _, m := range c.Msgs[r.Start:r.End] {
		msgs = append(msgs, c.Bytes(m))
	}
	*scratch = msgs
	switch kind {
	case nestedEvent:
		return otlp.AppendEventsJSON(dst, msgs)
	case nestedLink:
		return otlp.AppendLinksJSON(dst, msgs)
	}
	return otlp.AppendExemplarsJSON(dst, msgs)
}

// msgSink is what parseMsgsJSON took to append messages; format keeps
// its own now.
type msgSink struct{ c *signal.Common }

func (s *msgSink) add(msg []byte) { s.c.Msgs = append(s.c.Msgs, s.c.AppendBytes(msg)) }

// parseMsgsJSON is format.ParseNestedJSON.
func parseMsgsJSON(c *signal.Common, kind nestedKind, b []byte, _ *msgSink, _ func([]byte)) (signal.Range, error) {
	return format.ParseNestedJSON(c, kind, b)
}
