package search

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/jsonw"
	"github.com/sluice-dev/sluice/internal/lake/format"
)

// Overflow columns (docs/schema.md, "Bounded schema"): a file past
// lake.max_attribute_columns keeps the rest of a row's attributes of one
// scope in one JSON object, key → OTLP JSON AnyValue. A filter on a key
// reads the key's columns and its scope's overflow column alike.

// overflowCol is the overflow column of attribute prefix ("attr.", ...),
// -1 when the file has none.
func (lf *lakeFile) overflowCol(prefix string) int {
	return lf.col(format.OverflowColumn(strings.TrimSuffix(prefix, ".")))
}

// overflowValue is one attribute of an overflow object as a filter sees
// it: its type and the text appendPlain would give for a column value.
func overflowValue(js []byte, key string) (vt valueType, plain string, ok bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(js, &obj) != nil {
		return 0, "", false
	}
	raw, ok := obj[key]
	if !ok {
		return 0, "", false
	}
	return anyValuePlain(raw)
}

// anyValuePlain is the type of one OTLP JSON AnyValue and the text
// appendPlain would give for a column value of that type.
func anyValuePlain(raw json.RawMessage) (vt valueType, plain string, ok bool) {
	var av format.AnyValueJSON
	if json.Unmarshal(raw, &av) != nil {
		return 0, "", false
	}
	unquote := func(b json.RawMessage) string {
		if s, err := strconv.Unquote(string(b)); err == nil {
			return s
		}
		return string(b)
	}
	switch {
	case av.StringValue != nil:
		return vtString, *av.StringValue, true
	case av.BoolValue != nil:
		return vtBool, strconv.FormatBool(*av.BoolValue), true
	case av.IntValue != nil:
		return vtInt, unquote(av.IntValue), true
	case av.DoubleValue != nil:
		s := unquote(av.DoubleValue)
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			s = strconv.FormatFloat(f, 'g', -1, 64)
		} else if s == "Infinity" || s == "-Infinity" || s == "NaN" {
			s = strconv.FormatFloat(map[string]float64{"Infinity": math.Inf(1), "-Infinity": math.Inf(-1), "NaN": math.NaN()}[s], 'g', -1, 64)
		}
		return vtDouble, s, true
	case av.BytesValue != nil:
		b, err := base64.StdEncoding.DecodeString(*av.BytesValue)
		return vtBytes, string(b), err == nil
	case av.ArrayValue != nil:
		return vtArray, string(raw), true // as an #array column stores it
	case av.KvlistValue != nil:
		return vtMap, string(raw), true
	}
	return vtEmpty, "", true
}

// overflowEq is typedEq.match for an overflow value.
func (e *typedEq) overflowEq(vt valueType, plain string) bool {
	switch vt {
	case vtString, vtArray, vtMap:
		return plain == e.s
	case vtInt:
		i, err := strconv.ParseInt(plain, 10, 64)
		return e.iOK && err == nil && i == e.i
	case vtDouble:
		f, err := strconv.ParseFloat(plain, 64)
		return e.fOK && err == nil && f == e.f
	case vtBool:
		return e.bOK && plain == strconv.FormatBool(e.b)
	}
	return false
}

// filterOverflow marks in s.hitv the rows whose overflow object (column
// c) has pr's key with a matching value.
func (s *scanner) filterOverflow(cc parquet.ColumnChunk, pr *pred, eq *typedEq) error {
	return eachValue(cc, s.buf, func(off int, vals []parquet.Value) error {
		m, hv := s.match[off:off+len(vals)], s.hitv[off:off+len(vals)]
		for i, v := range vals {
			if !m[i] || hv[i] || v.IsNull() {
				continue
			}
			vt, plain, ok := overflowValue(v.ByteArray(), pr.key)
			if !ok {
				continue
			}
			if pr.kind == predAttr {
				hv[i] = eq.overflowEq(vt, plain)
			} else {
				hv[i] = pr.re.MatchString(plain)
			}
		}
		return nil
	})
}

// eachOverflow calls fn for each attribute of an overflow object in the
// order the lake wrote them (the record's order); a malformed object
// yields what precedes the fault.
func eachOverflow(js []byte, fn func(key string, raw json.RawMessage)) {
	d := json.NewDecoder(bytes.NewReader(js))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return
	}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return
		}
		key, ok := t.(string)
		if !ok {
			return
		}
		var raw json.RawMessage
		if d.Decode(&raw) != nil {
			return
		}
		fn(key, raw)
	}
}

// appendOverflowPlain appends the overflow attribute raw (an OTLP JSON
// AnyValue) as appendPlainValue appends a column value of its type.
func appendOverflowPlain(dst []byte, raw json.RawMessage) []byte {
	vt, plain, ok := anyValuePlain(raw)
	if !ok {
		return append(dst, "null"...)
	}
	switch vt {
	case vtString:
		return jsonw.AppendString(dst, plain)
	case vtInt:
		if _, err := strconv.ParseInt(plain, 10, 64); err != nil {
			return jsonw.AppendString(dst, plain)
		}
		return append(dst, plain...)
	case vtDouble:
		f, err := strconv.ParseFloat(plain, 64)
		if err != nil {
			return jsonw.AppendString(dst, plain)
		}
		return jsonw.AppendFloat(dst, f)
	case vtBool:
		return append(dst, plain...)
	case vtBytes:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, []byte(plain))
		return append(dst, '"')
	case vtArray, vtMap:
		return append(dst, plain...)
	}
	return append(dst, "null"...)
}
