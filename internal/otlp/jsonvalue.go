package otlp

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/sluice-dev/sluice/internal/jsonw"
	"github.com/sluice-dev/sluice/internal/signal"
)

// The sub-message codecs convert nested OTLP messages kept as raw protobuf
// (AnyValue arrays and maps, span events and links, exemplars, key/value
// lists) to the OTLP JSON encoding and back. JSON keys follow the order of
// the protobuf fields and protobuf fields follow the order of the JSON keys,
// and a field is written only when it was present, so that
// protobuf → JSON → protobuf gives back the same bytes for any encoding
// without unknown or repeated singular fields. NaN payloads are not kept:
// JSON has only "NaN".

type jkind uint8

const (
	jString   jkind = iota // string
	jBytes                 // bytes as base64
	jHex                   // trace or span id as hex
	jMsg                   // a message (msg)
	jFixed64U              // fixed64 as a decimal string
	jFixed64S              // sfixed64 as a decimal string
	jDouble                // double: number, "NaN", "Infinity", "-Infinity"
	jVarintU               // uint32/enum varint as a number
	jVarintS               // int64 varint as a decimal string
	jBool                  // bool varint
	jFixed32               // fixed32 as a number
)

type jfield struct {
	num      int
	name     string // lowerCamelCase
	snake    string // also accepted on input
	kind     jkind
	repeated bool
	msg      *jmsg
}

type jmsg struct {
	name   string
	fields []jfield
}

func (m *jmsg) byNum(n uint64) *jfield {
	for k := range m.fields {
		if uint64(m.fields[k].num) == n {
			return &m.fields[k]
		}
	}
	return nil
}

func (m *jmsg) byName(s []byte) *jfield {
	for k := range m.fields {
		f := &m.fields[k]
		if string(s) == f.name || string(s) == f.snake {
			return f
		}
	}
	return nil
}

var jAnyValue, jKeyValue, jArrayValue, jKeyValueList, jEvent, jLink, jExemplar jmsg

func init() {
	jAnyValue = jmsg{"AnyValue", []jfield{
		{1, "stringValue", "string_value", jString, false, nil},
		{2, "boolValue", "bool_value", jBool, false, nil},
		{3, "intValue", "int_value", jVarintS, false, nil},
		{4, "doubleValue", "double_value", jDouble, false, nil},
		{5, "arrayValue", "array_value", jMsg, false, &jArrayValue},
		{6, "kvlistValue", "kvlist_value", jMsg, false, &jKeyValueList},
		{7, "bytesValue", "bytes_value", jBytes, false, nil},
	}}
	jKeyValue = jmsg{"KeyValue", []jfield{
		{1, "key", "key", jString, false, nil},
		{2, "value", "value", jMsg, false, &jAnyValue},
	}}
	jArrayValue = jmsg{"ArrayValue", []jfield{{1, "values", "values", jMsg, true, &jAnyValue}}}
	jKeyValueList = jmsg{"KeyValueList", []jfield{{1, "values", "values", jMsg, true, &jKeyValue}}}
	jEvent = jmsg{"Span.Event", []jfield{
		{1, "timeUnixNano", "time_unix_nano", jFixed64U, false, nil},
		{2, "name", "name", jString, false, nil},
		{3, "attributes", "attributes", jMsg, true, &jKeyValue},
		{4, "droppedAttributesCount", "dropped_attributes_count", jVarintU, false, nil},
	}}
	jLink = jmsg{"Span.Link", []jfield{
		{1, "traceId", "trace_id", jHex, false, nil},
		{2, "spanId", "span_id", jHex, false, nil},
		{3, "traceState", "trace_state", jString, false, nil},
		{4, "attributes", "attributes", jMsg, true, &jKeyValue},
		{5, "droppedAttributesCount", "dropped_attributes_count", jVarintU, false, nil},
		{6, "flags", "flags", jFixed32, false, nil},
	}}
	jExemplar = jmsg{"Exemplar", []jfield{
		{7, "filteredAttributes", "filtered_attributes", jMsg, true, &jKeyValue},
		{2, "timeUnixNano", "time_unix_nano", jFixed64U, false, nil},
		{3, "asDouble", "as_double", jDouble, false, nil},
		{6, "asInt", "as_int", jFixed64S, false, nil},
		{4, "spanId", "span_id", jHex, false, nil},
		{5, "traceId", "trace_id", jHex, false, nil},
	}}
}

func (k jkind) wireType() uint64 {
	switch k {
	case jFixed64U, jFixed64S, jDouble:
		return wtI64
	case jVarintU, jVarintS, jBool:
		return wtVarint
	case jFixed32:
		return wtI32
	}
	return wtLen
}

// appendMsgJSON writes the protobuf message b as a JSON object.
func appendMsgJSON(dst, b []byte, m *jmsg, depth int) ([]byte, error) {
	if depth > maxDepth {
		return dst, fmt.Errorf("%s: %w", m.name, ErrTooDeep)
	}
	if !isMessage(b) {
		return dst, fmt.Errorf("%s: %w", m.name, ErrMalformed)
	}
	dst = append(dst, '{')
	first := true
	var done uint32 // fields already written, by number
	for i := 0; i < len(b); {
		tag, j := uvarint(b, i)
		if j < 0 {
			return dst, fmt.Errorf("%s: tag: %w", m.name, posErr(j))
		}
		num := tag >> 3
		end := skipValue(b, j, tag, 0)
		if end < 0 {
			return dst, fmt.Errorf("%s: field %d: %w", m.name, num, posErr(end))
		}
		f := m.byNum(num)
		if f == nil || done&(1<<num) != 0 {
			i = end // unknown field, or a repeated one already written
			continue
		}
		if tag&7 != f.kind.wireType() {
			return dst, fmt.Errorf("%s: %s has wire type %d: %w", m.name, f.name, tag&7, ErrWireType)
		}
		done |= 1 << num
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = jsonw.AppendString(dst, f.name)
		dst = append(dst, ':')
		var err error
		if f.repeated {
			dst = append(dst, '[')
			for k, p := 0, i; p < len(b); {
				t, q := uvarint(b, p)
				pe := skipValue(b, q, t, 0)
				if t == tag {
					if k > 0 {
						dst = append(dst, ',')
					}
					k++
					if dst, err = appendFieldJSON(dst, b, q, f, depth); err != nil {
						return dst, err
					}
				}
				p = pe
			}
			dst = append(dst, ']')
		} else {
			// A singular field given twice: the last one counts, as in
			// protobuf.
			at := j
			for p := end; p < len(b); {
				t, q := uvarint(b, p)
				if t == tag {
					at = q
				}
				p = skipValue(b, q, t, 0)
			}
			if dst, err = appendFieldJSON(dst, b, at, f, depth); err != nil {
				return dst, err
			}
		}
		i = end
	}
	return append(dst, '}'), nil
}

// appendFieldJSON writes the value of field f whose tag ended at j.
func appendFieldJSON(dst, b []byte, j int, f *jfield, depth int) ([]byte, error) {
	switch f.kind {
	case jString, jBytes, jHex, jMsg:
		s, e := lenField(b, j)
		p := b[s:e]
		switch f.kind {
		case jString:
			if !utf8.Valid(p) {
				return dst, fmt.Errorf("%s: %w", f.name, ErrInvalidUTF8)
			}
			return jsonw.AppendString(dst, string(p)), nil
		case jBytes:
			dst = append(dst, '"')
			dst = base64.StdEncoding.AppendEncode(dst, p)
			return append(dst, '"'), nil
		case jHex:
			dst = append(dst, '"')
			dst = hex.AppendEncode(dst, p)
			return append(dst, '"'), nil
		}
		return appendMsgJSON(dst, p, f.msg, depth+1)
	case jFixed64U, jFixed64S, jDouble:
		v := binary.LittleEndian.Uint64(b[j:])
		switch f.kind {
		case jFixed64U:
			return append(strconv.AppendUint(append(dst, '"'), v, 10), '"'), nil
		case jFixed64S:
			return append(strconv.AppendInt(append(dst, '"'), int64(v), 10), '"'), nil
		}
		return jsonw.AppendFloat(dst, math.Float64frombits(v)), nil
	case jFixed32:
		return strconv.AppendUint(dst, uint64(binary.LittleEndian.Uint32(b[j:])), 10), nil
	}
	v, _ := uvarint(b, j)
	switch f.kind {
	case jVarintS:
		return append(strconv.AppendInt(append(dst, '"'), int64(v), 10), '"'), nil
	case jBool:
		return strconv.AppendBool(dst, v != 0), nil
	}
	return strconv.AppendUint(dst, v, 10), nil
}

// appendMsgProto parses a JSON object of message m and appends its protobuf
// encoding (without a tag or length) to dst.
func appendMsgProto(dst []byte, r *jsonReader, m *jmsg, depth int) ([]byte, error) {
	if depth > maxDepth {
		return dst, fmt.Errorf("%s: %w", m.name, ErrTooDeep)
	}
	if !r.consume('{') {
		return dst, fmt.Errorf("%s: %w", m.name, r.errorf("want an object"))
	}
	for first := true; ; first = false {
		more, err := r.more('}', first)
		if err != nil {
			return dst, fmt.Errorf("%s: %w", m.name, err)
		}
		if !more {
			return dst, nil
		}
		key, err := r.key()
		if err != nil {
			return dst, fmt.Errorf("%s: %w", m.name, err)
		}
		f := m.byName(key)
		if f == nil || r.literal("null") {
			if f == nil {
				if err := r.skip(depth); err != nil { // unknown key
					return dst, err
				}
			}
			continue
		}
		if !f.repeated {
			if dst, err = appendFieldProto(dst, r, f, depth); err != nil {
				return dst, fmt.Errorf("%s.%s: %w", m.name, f.name, err)
			}
			continue
		}
		if !r.consume('[') {
			return dst, fmt.Errorf("%s.%s: %w", m.name, f.name, r.errorf("want an array"))
		}
		for first := true; ; first = false {
			more, err := r.more(']', first)
			if err != nil {
				return dst, err
			}
			if !more {
				break
			}
			if dst, err = appendFieldProto(dst, r, f, depth); err != nil {
				return dst, fmt.Errorf("%s.%s: %w", m.name, f.name, err)
			}
		}
	}
}

// appendFieldProto parses one JSON value of field f and appends the field.
func appendFieldProto(dst []byte, r *jsonReader, f *jfield, depth int) ([]byte, error) {
	switch f.kind {
	case jMsg:
		dst, start := beginMsg(dst, f.num)
		dst, err := appendMsgProto(dst, r, f.msg, depth+1)
		if err != nil {
			return dst, err
		}
		return endMsg(dst, start), nil
	case jString, jBytes, jHex:
		s, err := r.string()
		if err != nil {
			return dst, err
		}
		switch f.kind {
		case jString:
			return appendBytesField(dst, f.num, s), nil
		case jBytes:
			dst = appendVarint(appendTag(dst, f.num, wtLen), 0) // length placeholder
			return appendDecoded(dst, s, func(out, in []byte) ([]byte, error) {
				if v, err := base64.StdEncoding.AppendDecode(out, in); err == nil {
					return v, nil
				}
				if v, err := base64.RawStdEncoding.AppendDecode(out, in); err == nil {
					return v, nil
				}
				if v, err := base64.URLEncoding.AppendDecode(out, in); err == nil {
					return v, nil
				}
				return base64.RawURLEncoding.AppendDecode(out, in)
			})
		default:
			want := 8
			if f.name == "traceId" {
				want = 16
			}
			if n := hex.DecodedLen(len(s)); n != want && len(s) != 0 {
				return dst, fmt.Errorf("%q has %d bytes, want %d or 0: %w", s, n, want, ErrIDLength)
			}
			dst = appendVarint(appendTag(dst, f.num, wtLen), 0)
			return appendDecoded(dst, s, hex.AppendDecode)
		}
	case jBool:
		switch {
		case r.literal("true"):
			return appendVarintField(dst, f.num, 1), nil
		case r.literal("false"):
			return appendVarintField(dst, f.num, 0), nil
		}
		return dst, r.errorf("want true or false")
	}
	txt, err := r.scalar()
	if err != nil {
		return dst, err
	}
	switch f.kind {
	case jDouble:
		v, err := parseJSONDouble(txt)
		if err != nil {
			return dst, err
		}
		return appendFixed64Field(dst, f.num, math.Float64bits(v)), nil
	case jFixed64U, jVarintU, jFixed32:
		v, err := strconv.ParseUint(string(txt), 10, 64)
		if err != nil {
			// Integers written as floats ("1e3", "5.0") are valid JSON numbers.
			fv, ferr := strconv.ParseFloat(string(txt), 64)
			if ferr != nil || fv < 0 || fv != math.Trunc(fv) || fv >= 1<<64 {
				return dst, fmt.Errorf("%q: %w", txt, ErrJSON)
			}
			v = uint64(fv)
		}
		switch f.kind {
		case jFixed64U:
			return appendFixed64Field(dst, f.num, v), nil
		case jFixed32:
			if v > math.MaxUint32 {
				return dst, fmt.Errorf("%q out of range: %w", txt, ErrJSON)
			}
			return appendFixed32Field(dst, f.num, uint32(v)), nil
		}
		return appendVarintField(dst, f.num, v), nil
	default: // jFixed64S, jVarintS
		v, err := strconv.ParseInt(string(txt), 10, 64)
		if err != nil {
			fv, ferr := strconv.ParseFloat(string(txt), 64)
			if ferr != nil || fv != math.Trunc(fv) || fv < -(1<<63) || fv >= 1<<63 {
				return dst, fmt.Errorf("%q: %w", txt, ErrJSON)
			}
			v = int64(fv)
		}
		if f.kind == jFixed64S {
			return appendFixed64Field(dst, f.num, uint64(v)), nil
		}
		return appendVarintField(dst, f.num, uint64(v)), nil
	}
}

// appendDecoded decodes s after a one-byte length placeholder at the end of
// dst and fixes the length up.
func appendDecoded(dst, s []byte, decode func(out, in []byte) ([]byte, error)) ([]byte, error) {
	start := len(dst)
	out, err := decode(dst, s)
	if err != nil {
		return dst, fmt.Errorf("%q: %v: %w", s, err, ErrJSON)
	}
	return endMsg(out, start), nil
}

func parseJSONDouble(txt []byte) (float64, error) {
	switch string(txt) {
	case "NaN":
		return math.NaN(), nil
	case "Infinity", "+Infinity":
		return math.Inf(1), nil
	case "-Infinity":
		return math.Inf(-1), nil
	}
	v, err := strconv.ParseFloat(string(txt), 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", txt, ErrJSON)
	}
	return v, nil
}

// AppendAnyValueJSON appends the OTLP JSON form of the AnyValue message pb
// (as stored for array and map attribute values and bodies) to dst.
func AppendAnyValueJSON(dst []byte, pb []byte) ([]byte, error) {
	return appendMsgJSON(dst, pb, &jAnyValue, 0)
}

// AppendAnyValueProto parses one OTLP JSON AnyValue and appends its
// protobuf message (no tag or length) to dst.
func AppendAnyValueProto(dst []byte, js []byte) ([]byte, error) {
	return appendOneProto(dst, js, &jAnyValue)
}

func appendOneProto(dst []byte, js []byte, m *jmsg) ([]byte, error) {
	r := jsonReader{b: js}
	n := len(dst)
	out, err := appendMsgProto(dst, &r, m, 0)
	if err == nil && r.peek() != 0 {
		err = r.errorf("trailing data")
	}
	if err != nil {
		return dst[:n], err
	}
	return out, nil
}

func appendListJSON(dst []byte, msgs [][]byte, m *jmsg) ([]byte, error) {
	n := len(dst)
	dst = append(dst, '[')
	for k, msg := range msgs {
		if k > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendMsgJSON(dst, msg, m, 0); err != nil {
			return dst[:n], fmt.Errorf("[%d]: %w", k, err)
		}
	}
	return append(dst, ']'), nil
}

// splitListJSON parses a JSON array of m and calls fn with the protobuf
// encoding of each element; the slice is reused after fn returns.
func splitListJSON(js []byte, m *jmsg, fn func(msg []byte)) error {
	r := jsonReader{b: js}
	if !r.consume('[') {
		if r.literal("null") && r.peek() == 0 {
			return nil
		}
		return r.errorf("want an array of %s", m.name)
	}
	var buf []byte
	for first := true; ; first = false {
		more, err := r.more(']', first)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		if buf, err = appendMsgProto(buf[:0], &r, m, 0); err != nil {
			return err
		}
		fn(buf)
	}
	if r.peek() != 0 {
		return r.errorf("trailing data")
	}
	return nil
}

// AppendEventsJSON appends a JSON array of the Span.Event messages msgs.
func AppendEventsJSON(dst []byte, msgs [][]byte) ([]byte, error) {
	return appendListJSON(dst, msgs, &jEvent)
}

// SplitEventsJSON parses a JSON array of span events and calls fn with each
// one's protobuf message, valid only during the call.
func SplitEventsJSON(js []byte, fn func(msg []byte)) error { return splitListJSON(js, &jEvent, fn) }

// AppendLinksJSON appends a JSON array of the Span.Link messages msgs.
func AppendLinksJSON(dst []byte, msgs [][]byte) ([]byte, error) {
	return appendListJSON(dst, msgs, &jLink)
}

// SplitLinksJSON is SplitEventsJSON for span links.
func SplitLinksJSON(js []byte, fn func(msg []byte)) error { return splitListJSON(js, &jLink, fn) }

// AppendExemplarsJSON appends a JSON array of the Exemplar messages msgs.
func AppendExemplarsJSON(dst []byte, msgs [][]byte) ([]byte, error) {
	return appendListJSON(dst, msgs, &jExemplar)
}

// SplitExemplarsJSON is SplitEventsJSON for exemplars.
func SplitExemplarsJSON(js []byte, fn func(msg []byte)) error {
	return splitListJSON(js, &jExemplar, fn)
}

// AppendKeyValuesJSON appends a JSON array of the KeyValue messages msgs.
func AppendKeyValuesJSON(dst []byte, msgs [][]byte) ([]byte, error) {
	return appendListJSON(dst, msgs, &jKeyValue)
}

// SplitKeyValuesJSON is SplitEventsJSON for a KeyValue list.
func SplitKeyValuesJSON(js []byte, fn func(msg []byte)) error {
	return splitListJSON(js, &jKeyValue, fn)
}

// AppendAttrsJSON appends the attributes r of c (such as a metric's
// metadata) as an OTLP JSON KeyValue array.
func AppendAttrsJSON(dst []byte, c *signal.Common, r signal.Range) ([]byte, error) {
	n := len(dst)
	dst = append(dst, '[')
	for i := int(r.Start); i < int(r.End); i++ {
		if i > int(r.Start) {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"key":`...)
		dst = jsonw.AppendString(dst, c.Keys.Name(c.Attrs.Key[i]))
		dst = append(dst, `,"value":`...)
		v := c.Attrs.Val[i]
		switch t := c.Attrs.Type[i]; t {
		case signal.ValueString:
			dst = append(dst, `{"stringValue":`...)
			dst = jsonw.AppendString(dst, c.AttrString(i))
			dst = append(dst, '}')
		case signal.ValueBool:
			dst = append(strconv.AppendBool(append(dst, `{"boolValue":`...), v != 0), '}')
		case signal.ValueInt:
			dst = append(strconv.AppendInt(append(dst, `{"intValue":"`...), int64(v), 10), `"}`...)
		case signal.ValueDouble:
			dst = append(jsonw.AppendFloat(append(dst, `{"doubleValue":`...), math.Float64frombits(v)), '}')
		case signal.ValueBytes:
			dst = base64.StdEncoding.AppendEncode(append(dst, `{"bytesValue":"`...), c.Bytes(signal.Str(v)))
			dst = append(dst, `"}`...)
		case signal.ValueArray, signal.ValueMap:
			var err error
			if dst, err = AppendAnyValueJSON(dst, c.Bytes(signal.Str(v))); err != nil {
				return dst[:n], fmt.Errorf("attribute %q: %w", c.Keys.Name(c.Attrs.Key[i]), err)
			}
		default:
			dst = append(dst, "{}"...)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']'), nil
}

// AppendAttrsFromJSON parses an OTLP JSON KeyValue array and appends the
// pairs to c's attributes, returning their range. Values are kept in c's
// arena (as the protobuf they convert to). On error c is left as it was.
func AppendAttrsFromJSON(c *signal.Common, js []byte) (signal.Range, error) {
	m := markCommon(c)
	start := uint32(c.Attrs.Len())
	d := decoder{c: c}
	n := 0
	var ferr error
	err := splitListJSON(js, &jKeyValue, func(msg []byte) {
		if ferr != nil {
			return
		}
		if ferr = arenaRoom(c, len(msg)); ferr != nil {
			return
		}
		off := len(c.Buf)
		c.Buf = append(c.Buf, msg...)
		if ferr = d.keyValue(c.Buf, off, &d.hints[ctxOther][n&(hintSlots-1)]); ferr != nil {
			ferr = fmt.Errorf("[%d]: %w", n, ferr)
		}
		n++
	})
	if err == nil {
		err = ferr
	}
	if err != nil {
		m.restore(c)
		return signal.Range{}, err
	}
	return signal.Range{Start: start, End: uint32(c.Attrs.Len())}, nil
}
