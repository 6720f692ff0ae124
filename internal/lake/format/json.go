package format

import (
	"encoding/base64"
	"math"
	"strconv"

	"github.com/sluice-dev/sluice/internal/jsonw"
	"github.com/sluice-dev/sluice/internal/signal"
)

// AppendScalarJSON renders a scalar AnyValue in OTLP JSON, as overflow
// columns and nested values hold it: b for strings and bytes, v (as a batch
// holds it: two's complement, IEEE bits, 0/1) for the other types.
func AppendScalarJSON(dst []byte, t signal.ValueType, b []byte, v uint64) []byte {
	switch t {
	case signal.ValueString:
		dst = append(dst, `{"stringValue":`...)
		dst = AppendJSONString(dst, b)
		return append(dst, '}')
	case signal.ValueBool:
		if v != 0 {
			return append(dst, `{"boolValue":true}`...)
		}
		return append(dst, `{"boolValue":false}`...)
	case signal.ValueInt:
		dst = append(dst, `{"intValue":"`...)
		dst = strconv.AppendInt(dst, int64(v), 10)
		return append(dst, `"}`...)
	case signal.ValueDouble:
		dst = append(dst, `{"doubleValue":`...)
		dst = jsonw.AppendFloat(dst, math.Float64frombits(v))
		return append(dst, '}')
	case signal.ValueBytes:
		dst = append(dst, `{"bytesValue":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, b)
		return append(dst, `"}`...)
	}
	return append(dst, "{}"...) // empty
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a JSON string; bytes that are not valid
// UTF-8 are copied as they are (OTLP strings are UTF-8). It is not
// jsonw.AppendString, which replaces them and escapes differently: the
// overflow columns' bytes stay as every file written so far has them.
func AppendJSONString(dst, s []byte) []byte {
	dst = append(dst, '"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}
