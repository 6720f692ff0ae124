package search

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/jsonw"
	"github.com/sluice-dev/sluice/internal/lake/format"
)

// row is one materialised row: the values of cols (indexes into lf.cols),
// cloned so that they outlive the page they came from.
type row struct {
	lf   *lakeFile
	cols []int
	vals []parquet.Value
}

func (r *row) get(name string) (parquet.Value, bool) {
	c := r.lf.col(name)
	if c < 0 {
		return parquet.Value{}, false
	}
	for i, x := range r.cols {
		if x == c {
			return r.vals[i], !r.vals[i].IsNull()
		}
	}
	return parquet.Value{}, false
}

func (r *row) str(name string) (string, bool) {
	v, ok := r.get(name)
	if !ok {
		return "", false
	}
	return string(v.ByteArray()), true
}

func (r *row) int(name string) (int64, bool) {
	v, ok := r.get(name)
	if !ok {
		return 0, false
	}
	if v.Kind() == parquet.Int32 {
		if name == format.ColFlags || strings.HasSuffix(name, "_count") {
			return int64(uint32(v.Int32())), true // UINT32 columns
		}
		return int64(v.Int32()), true
	}
	return v.Int64(), true
}

// materialise reads the rows of hits (grouped by file and row group, each
// file opened once) and returns them in the order of hits. colsOf picks
// the columns to read from a file.
func (h *Handler) materialise(ctx context.Context, req *scanReq, hits []hit, paths []string, colsOf func(*lakeFile) []int) ([]row, []*lakeFile, error) {
	out := make([]row, len(hits))
	byFile := map[int32][]int{}
	var files []int32
	for i := range hits {
		f := hits[i].file
		if _, ok := byFile[f]; !ok {
			files = append(files, f)
		}
		byFile[f] = append(byFile[f], i)
	}
	var opened []*lakeFile
	buf := make([]parquet.Value, 256)
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, opened, err
		}
		lf, err := h.files.acquire(paths[f], req.table, req.tenant)
		if err != nil {
			return nil, opened, err
		}
		opened = append(opened, lf)
		cols := colsOf(lf)
		idx := byFile[f]
		// Group by row group, rows ascending.
		byRG := map[int32][]int{}
		for _, i := range idx {
			byRG[hits[i].rg] = append(byRG[hits[i].rg], i)
		}
		for g, is := range byRG {
			sortByRow(is, hits)
			rows := make([]int64, len(is))
			for k, i := range is {
				rows[k] = hits[i].rgr
				out[i] = row{lf: lf, cols: cols, vals: make([]parquet.Value, len(cols))}
			}
			ccs := lf.pf.RowGroups()[g].ColumnChunks()
			for ci, c := range cols {
				err := valuesAt(ccs[c], buf, rows, func(k int, v parquet.Value) {
					out[is[k]].vals[ci] = v.Clone()
				})
				if err != nil {
					return nil, opened, err
				}
			}
		}
	}
	return out, opened, nil
}

func sortByRow(is []int, hits []hit) {
	for a := 1; a < len(is); a++ {
		for b := a; b > 0 && hits[is[b]].rgr < hits[is[b-1]].rgr; b-- {
			is[b], is[b-1] = is[b-1], is[b]
		}
	}
}

func allCols(lf *lakeFile) []int {
	cols := make([]int, 0, len(lf.cols))
	for i := range lf.cols {
		if lf.cols[i].name != "" {
			cols = append(cols, i)
		}
	}
	return cols
}

func appendTime(dst []byte, ns int64) []byte {
	dst = append(dst, '"')
	dst = time.Unix(0, ns).UTC().AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"')
}

// appendPlainValue appends an attribute value as plain JSON: strings,
// numbers, booleans, bytes as base64, arrays and maps as their OTLP JSON
// AnyValue, empty as null.
func appendPlainValue(dst []byte, vt valueType, v parquet.Value) []byte {
	switch vt {
	case vtString:
		return jsonw.AppendString(dst, string(v.ByteArray()))
	case vtInt:
		return strconv.AppendInt(dst, v.Int64(), 10)
	case vtDouble:
		return jsonw.AppendFloat(dst, v.Double())
	case vtBool:
		return strconv.AppendBool(dst, v.Boolean())
	case vtBytes:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, v.ByteArray())
		return append(dst, '"')
	case vtArray, vtMap:
		return append(dst, v.ByteArray()...)
	}
	return append(dst, "null"...)
}

// appendAnyValue appends an attribute value as an OTLP JSON AnyValue.
func appendAnyValue(dst []byte, vt valueType, v parquet.Value) []byte {
	switch vt {
	case vtString:
		dst = append(dst, `{"stringValue":`...)
		dst = jsonw.AppendString(dst, string(v.ByteArray()))
	case vtInt:
		dst = append(dst, `{"intValue":"`...)
		dst = strconv.AppendInt(dst, v.Int64(), 10)
		dst = append(dst, '"')
	case vtDouble:
		dst = append(dst, `{"doubleValue":`...)
		dst = jsonw.AppendFloat(dst, v.Double())
	case vtBool:
		dst = append(dst, `{"boolValue":`...)
		dst = strconv.AppendBool(dst, v.Boolean())
	case vtBytes:
		dst = append(dst, `{"bytesValue":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, v.ByteArray())
		dst = append(dst, '"')
	case vtArray, vtMap:
		return append(dst, v.ByteArray()...)
	default:
		return append(dst, "{}"...)
	}
	return append(dst, '}')
}

// appendAttrObject appends the attributes of prefix as a JSON object
// {"key": plain value}; for resources service_name is service.name.
func appendAttrObject(dst []byte, r *row, prefix string) []byte {
	dst = append(dst, '{')
	first := true
	if prefix == format.PrefixResource {
		if s, ok := r.str(format.ColServiceName); ok {
			dst = append(dst, `"service.name":`...)
			dst = jsonw.AppendString(dst, s)
			first = false
		}
	}
	for i, c := range r.cols {
		ci := &r.lf.cols[c]
		if !ci.attr || ci.prefix != prefix || r.vals[i].IsNull() {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = jsonw.AppendString(dst, ci.key)
		dst = append(dst, ':')
		dst = appendPlainValue(dst, ci.vt, r.vals[i])
	}
	if js, ok := r.overflow(prefix); ok {
		eachOverflow(js, func(key string, raw json.RawMessage) {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = jsonw.AppendString(dst, key)
			dst = append(dst, ':')
			dst = appendOverflowPlain(dst, raw)
		})
	}
	return append(dst, '}')
}

// overflow is the row's overflow object of attribute prefix, if the file
// has that column, the row read it and it is not null.
func (r *row) overflow(prefix string) ([]byte, bool) {
	v, ok := r.get(format.OverflowColumn(strings.TrimSuffix(prefix, ".")))
	if !ok {
		return nil, false
	}
	return v.ByteArray(), true
}

// appendKeyValues appends the attributes of prefix as an OTLP JSON
// KeyValue array.
func appendKeyValues(dst []byte, r *row, prefix string) []byte {
	dst = append(dst, '[')
	first := true
	if prefix == format.PrefixResource {
		if s, ok := r.str(format.ColServiceName); ok {
			dst = append(dst, `{"key":"service.name","value":{"stringValue":`...)
			dst = jsonw.AppendString(dst, s)
			dst = append(dst, "}}"...)
			first = false
		}
	}
	for i, c := range r.cols {
		ci := &r.lf.cols[c]
		if !ci.attr || ci.prefix != prefix || r.vals[i].IsNull() {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, `{"key":`...)
		dst = jsonw.AppendString(dst, ci.key)
		dst = append(dst, `,"value":`...)
		dst = appendAnyValue(dst, ci.vt, r.vals[i])
		dst = append(dst, '}')
	}
	if js, ok := r.overflow(prefix); ok {
		eachOverflow(js, func(key string, raw json.RawMessage) {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(dst, `{"key":`...)
			dst = jsonw.AppendString(dst, key)
			dst = append(dst, `,"value":`...)
			dst = append(dst, raw...) // the lake wrote an OTLP JSON AnyValue
			dst = append(dst, '}')
		})
	}
	return append(dst, ']')
}

// Helpers for "name":value members; each adds a leading comma.
func memberStr(dst []byte, r *row, col, name string) []byte {
	if s, ok := r.str(col); ok {
		dst = append(dst, ',', '"')
		dst = append(dst, name...)
		dst = append(dst, '"', ':')
		dst = jsonw.AppendString(dst, s)
	}
	return dst
}

func memberInt(dst []byte, r *row, col, name string, quoted bool) []byte {
	if n, ok := r.int(col); ok {
		dst = append(dst, ',', '"')
		dst = append(dst, name...)
		dst = append(dst, '"', ':')
		if quoted {
			dst = append(dst, '"')
		}
		dst = strconv.AppendInt(dst, n, 10)
		if quoted {
			dst = append(dst, '"')
		}
	}
	return dst
}

func memberTime(dst []byte, r *row, col, name string) []byte {
	if n, ok := r.int(col); ok {
		dst = append(dst, ',', '"')
		dst = append(dst, name...)
		dst = append(dst, '"', ':')
		dst = appendTime(dst, n)
	}
	return dst
}

// appendLogLine appends one log record as a flat JSON object and '\n'.
func appendLogLine(dst []byte, r *row) []byte {
	dst = append(dst, `{"timestamp":`...)
	if t, ok := r.int(format.ColTimestamp); ok {
		dst = appendTime(dst, t)
	} else {
		dst = append(dst, "null"...)
	}
	dst = memberTime(dst, r, format.ColObservedTimestamp, "observed_timestamp")
	dst = memberInt(dst, r, format.ColSeverityNumber, "severity_number", false)
	dst = memberStr(dst, r, format.ColSeverityText, "severity_text")
	if body, ok := r.str(format.ColBody); ok {
		dst = append(dst, `,"body":`...)
		if bt, ok := r.str(format.ColBodyType); ok {
			dst = append(dst, body...) // OTLP JSON AnyValue
			dst = append(dst, `,"body_type":`...)
			dst = jsonw.AppendString(dst, bt)
		} else {
			dst = jsonw.AppendString(dst, body)
		}
	}
	dst = memberStr(dst, r, format.ColServiceName, "service")
	dst = memberStr(dst, r, format.ColTraceID, "trace_id")
	dst = memberStr(dst, r, format.ColSpanID, "span_id")
	dst = memberInt(dst, r, format.ColFlags, "flags", false)
	dst = memberStr(dst, r, format.ColEventName, "event_name")
	dst = append(dst, `,"attributes":`...)
	dst = appendAttrObject(dst, r, format.PrefixRecord)
	dst = append(dst, `,"resource":`...)
	dst = appendAttrObject(dst, r, format.PrefixResource)
	dst = append(dst, `,"scope":{"name":`...)
	if s, ok := r.str(format.ColScopeName); ok {
		dst = jsonw.AppendString(dst, s)
	} else {
		dst = append(dst, `""`...)
	}
	dst = memberStr(dst, r, format.ColScopeVersion, "version")
	dst = append(dst, `,"attributes":`...)
	dst = appendAttrObject(dst, r, format.PrefixScope)
	return append(dst, "}}\n"...)
}

// spanSearchCols are the columns a span search returns.
var spanSearchCols = []string{format.ColTraceID, format.ColSpanID, format.ColParentSpanID, format.ColName, format.ColKind,
	format.ColServiceName, format.ColStartTimestamp, format.ColEndTimestamp, format.ColDurationNs, format.ColStatusCode,
	format.ColStatusMessage}

func colsNamed(names []string) func(*lakeFile) []int {
	return func(lf *lakeFile) []int {
		var cols []int
		for _, n := range names {
			if c := lf.col(n); c >= 0 {
				cols = append(cols, c)
			}
		}
		return cols
	}
}

var statusNames = [...]string{"unset", "ok", "error"}

// appendSpanLine appends one span search result and '\n'.
func appendSpanLine(dst []byte, r *row) []byte {
	dst = append(dst, `{"trace_id":`...)
	s, _ := r.str(format.ColTraceID)
	dst = jsonw.AppendString(dst, s)
	dst = memberStr(dst, r, format.ColSpanID, "span_id")
	dst = memberStr(dst, r, format.ColParentSpanID, "parent_span_id")
	dst = memberStr(dst, r, format.ColName, "name")
	dst = memberInt(dst, r, format.ColKind, "kind", false)
	dst = memberStr(dst, r, format.ColServiceName, "service")
	dst = memberTime(dst, r, format.ColStartTimestamp, "start")
	dst = memberTime(dst, r, format.ColEndTimestamp, "end")
	dst = memberInt(dst, r, format.ColDurationNs, "duration_ns", false)
	if c, ok := r.int(format.ColStatusCode); ok {
		dst = append(dst, `,"status":`...)
		if c >= 0 && c < int64(len(statusNames)) {
			dst = jsonw.AppendString(dst, statusNames[c])
		} else {
			dst = strconv.AppendInt(dst, c, 10)
		}
	}
	dst = memberStr(dst, r, format.ColStatusMessage, "status_message")
	return append(dst, "}\n"...)
}
