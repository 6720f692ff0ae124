package format

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// NestedKind names the nested OTLP messages that batches keep as raw
// protobuf and the lake stores as OTLP JSON arrays (package otlp converts):
// span events and links, exemplars.
type NestedKind uint8

const (
	NestedEvent    NestedKind = iota // Span.Event
	NestedLink                       // Span.Link
	NestedExemplar                   // Exemplar
)

func (k NestedKind) String() string {
	switch k {
	case NestedEvent:
		return "events"
	case NestedLink:
		return "links"
	}
	return "exemplars"
}

// AnyValueJSON is the decoded shape of an OTLP JSON AnyValue, as the
// overflow columns hold it; only one field is set. Raw messages are kept
// for ints and doubles (quoted or not) and for arrays and maps.
type AnyValueJSON struct {
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
	var av AnyValueJSON
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

// msgSink appends split messages to a batch; a method value of a long-lived
// sink avoids a closure per row.
type msgSink struct{ c *signal.Common }

func (s *msgSink) add(msg []byte) { s.c.Msgs = append(s.c.Msgs, s.c.AppendBytes(msg)) }

// parseMsgsJSON appends each element of a JSON array of kind to c.Msgs as
// protobuf and returns their range.
func parseMsgsJSON(c *signal.Common, kind NestedKind, b []byte, sink *msgSink, add func([]byte)) (signal.Range, error) {
	start := uint32(len(c.Msgs))
	sink.c = c
	var err error
	switch kind {
	case NestedEvent:
		err = otlp.SplitEventsJSON(b, add)
	case NestedLink:
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

// ParseNestedJSON appends each element of b, a JSON array of kind as the
// lake stores it, to c.Msgs as protobuf and returns their range.
func ParseNestedJSON(c *signal.Common, kind NestedKind, b []byte) (signal.Range, error) {
	var sink msgSink
	return parseMsgsJSON(c, kind, b, &sink, sink.add)
}
