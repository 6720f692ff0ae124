package lake

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/sluice-dev/sluice/internal/lake/format"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// nestedKind names the nested OTLP messages that batches keep as raw
// protobuf and the lake stores as OTLP JSON arrays (package otlp converts).
type nestedKind uint8

const (
	nestedEvent    nestedKind = iota // Span.Event
	nestedLink                       // Span.Link
	nestedExemplar                   // Exemplar
)

func (k nestedKind) String() string {
	switch k {
	case nestedEvent:
		return "events"
	case nestedLink:
		return "links"
	}
	return "exemplars"
}

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

// jsonAnyValue is the decoded shape of an OTLP JSON AnyValue; only one field
// is set. Raw messages are kept for arrays and maps, which go to the codec.
type jsonAnyValue struct {
	StringValue *string         `json:"stringValue"`
	BoolValue   *bool           `json:"boolValue"`
	IntValue    json.RawMessage `json:"intValue"`
	DoubleValue json.RawMessage `json:"doubleValue"`
	BytesValue  *string         `json:"bytesValue"`
	ArrayValue  json.RawMessage `json:"arrayValue"`
	KvlistValue json.RawMessage `json:"kvlistValue"`
}

// parseAnyValueJSON appends the value in b to c's arena as a batch holds it.
func parseAnyValueJSON(c *signal.Common, b []byte) (signal.ValueType, uint64, error) {
	var av jsonAnyValue
	if err := json.Unmarshal(b, &av); err != nil {
		return 0, 0, fmt.Errorf("parse AnyValue JSON: %w", err)
	}
	switch {
	case av.StringValue != nil:
		return signal.ValueString, uint64(c.AppendString(*av.StringValue)), nil
	case av.BoolValue != nil:
		if *av.BoolValue {
			return signal.ValueBool, 1, nil
		}
		return signal.ValueBool, 0, nil
	case av.IntValue != nil:
		s := string(av.IntValue)
		if uq, err := strconv.Unquote(s); err == nil {
			s = uq
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("parse intValue: %w", err)
		}
		return signal.ValueInt, uint64(n), nil
	case av.DoubleValue != nil:
		f, err := parseJSONFloat(av.DoubleValue)
		return signal.ValueDouble, math.Float64bits(f), err
	case av.BytesValue != nil:
		raw, err := base64.StdEncoding.DecodeString(*av.BytesValue)
		if err != nil {
			return 0, 0, fmt.Errorf("parse bytesValue: %w", err)
		}
		return signal.ValueBytes, uint64(c.AppendBytes(raw)), nil
	case av.ArrayValue != nil || av.KvlistValue != nil:
		t := signal.ValueArray
		if av.KvlistValue != nil {
			t = signal.ValueMap
		}
		off := len(c.Buf)
		var err error
		c.Buf, err = otlp.AppendAnyValueProto(c.Buf, b)
		if err != nil {
			c.Buf = c.Buf[:off]
			return 0, 0, err
		}
		return t, uint64(signal.MakeStr(off, len(c.Buf)-off)), nil
	}
	return signal.ValueEmpty, 0, nil
}

func parseJSONFloat(b []byte) (float64, error) {
	s := string(b)
	switch s {
	case `"NaN"`:
		return math.NaN(), nil
	case `"Infinity"`:
		return math.Inf(1), nil
	case `"-Infinity"`:
		return math.Inf(-1), nil
	}
	if uq, err := strconv.Unquote(s); err == nil {
		s = uq
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("parse double: %w", err)
	}
	return f, nil
}

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

// msgSink appends split messages to a batch; a method value of a long-lived
// sink avoids a closure per row.
type msgSink struct{ c *signal.Common }

func (s *msgSink) add(msg []byte) { s.c.Msgs = append(s.c.Msgs, s.c.AppendBytes(msg)) }

// parseMsgsJSON appends each element of a JSON array of kind to c.Msgs as
// protobuf and returns their range.
func parseMsgsJSON(c *signal.Common, kind nestedKind, b []byte, sink *msgSink, add func([]byte)) (signal.Range, error) {
	start := uint32(len(c.Msgs))
	sink.c = c
	var err error
	switch kind {
	case nestedEvent:
		err = otlp.SplitEventsJSON(b, add)
	case nestedLink:
		err = otlp.SplitLinksJSON(b, add)
	default:
		err = otlp.SplitExemplarsJSON(b, add)
	}
	if err != nil {
		c.Msgs = c.Msgs[:start]
		return signal.Range{Start: start, End: start}, fmt.Errorf("parse %s JSON: %w", kind, err)
	}
	return signal.Range{Start: start, End: uint32(len(c.Msgs))}, nil
}
