package sqlq

import (
	"bufio"
	"encoding/base64"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/sluice-dev/sluice/internal/jsonw"
)

// Formats names the output formats ResultWriter accepts.
var Formats = []string{"table", "csv", "json", "jsonl"}

// ResultWriter renders a result row by row.
//
// Values render the same way in every format: NULL as NULL in tables, an
// empty field in CSV and null in JSON; timestamps as RFC 3339 in UTC with
// nanoseconds, DATE as YYYY-MM-DD, TIME as HH:MM:SS[.fff]; doubles in the
// shortest form that round-trips, NaN and ±Inf as "NaN", "Infinity",
// "-Infinity" (JSON strings, as OTLP JSON does); BLOBs as standard base64;
// UUIDs in their 8-4-4-4-12 form; INTERVALs as ISO 8601 durations; DECIMAL
// and HUGEINT exactly; LIST, STRUCT and MAP as JSON (in tables and CSV as
// JSON text).
type ResultWriter interface {
	// Row writes one row; vals are as Rows.Values returns them.
	Row(vals []any) error
	// Close finishes the output: the table is printed with a row count
	// footer that says when rows were cut; the JSON array is closed.
	Close(truncated bool) error
}

// NewResultWriter returns a writer of format ("table", "csv", "json" or
// "jsonl") for a result with cols.
func NewResultWriter(w io.Writer, format string, cols []Column) (ResultWriter, error) {
	switch format {
	case "table":
		explain := len(cols) == 2 && cols[0].Name == "explain_key" && cols[1].Name == "explain_value"
		return &tableWriter{w: w, cols: cols, explain: explain}, nil
	case "csv":
		cw := csv.NewWriter(w)
		names := make([]string, len(cols))
		for i, c := range cols {
			names[i] = c.Name
		}
		if err := cw.Write(names); err != nil {
			return nil, err
		}
		return &csvWriter{w: cw, cols: cols, rec: make([]string, len(cols))}, nil
	case "json", "jsonl":
		jw := &jsonWriter{w: bufio.NewWriter(w), cols: cols, array: format == "json"}
		jw.keys = make([][]byte, len(cols))
		for i, c := range cols {
			jw.keys[i] = jsonw.AppendString(nil, c.Name)
		}
		return jw, nil
	}
	return nil, fmt.Errorf("unknown format %q (want %s)", format, strings.Join(Formats, ", "))
}

// appendText renders v as text for tables and CSV.
func appendText(b []byte, v any, typ string) []byte {
	switch x := v.(type) {
	case string:
		return append(b, x...)
	case []byte:
		if typ == "UUID" && len(x) == 16 {
			return appendUUID(b, x)
		}
		return base64.StdEncoding.AppendEncode(b, x)
	case []any, map[string]any, duckdb.OrderedMap, duckdb.Map, duckdb.Union:
		return appendJSON(b, v, "")
	}
	return appendScalar(b, v, typ, false)
}

// appendScalar renders the values that are not strings, blobs or nested;
// quote marks strings for JSON (non-finite doubles, times, intervals).
func appendScalar(b []byte, v any, typ string, quote bool) []byte {
	str := func(s string) []byte {
		if quote {
			return jsonw.AppendString(b, s)
		}
		return append(b, s...)
	}
	switch x := v.(type) {
	case bool:
		return strconv.AppendBool(b, x)
	case int8:
		return strconv.AppendInt(b, int64(x), 10)
	case int16:
		return strconv.AppendInt(b, int64(x), 10)
	case int32:
		return strconv.AppendInt(b, int64(x), 10)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case int:
		return strconv.AppendInt(b, int64(x), 10)
	case uint8:
		return strconv.AppendUint(b, uint64(x), 10)
	case uint16:
		return strconv.AppendUint(b, uint64(x), 10)
	case uint32:
		return strconv.AppendUint(b, uint64(x), 10)
	case uint64:
		return strconv.AppendUint(b, x, 10)
	case float32:
		return appendFloat(b, float64(x), 32, quote)
	case float64:
		return appendFloat(b, x, 64, quote)
	case *big.Int:
		return x.Append(b, 10)
	case duckdb.Decimal:
		return append(b, x.String()...)
	case time.Time:
		switch typ {
		case "DATE":
			return str(x.UTC().Format("2006-01-02"))
		case "TIME", "TIME WITH TIME ZONE", "TIMETZ", "TIME_NS":
			return str(x.UTC().Format("15:04:05.999999999"))
		}
		return str(x.UTC().Format(time.RFC3339Nano))
	case duckdb.Interval:
		return str(isoInterval(x))
	case duckdb.UUID:
		return str(string(appendUUID(nil, x[:])))
	}
	return str(fmt.Sprint(v))
}

// appendFloat writes the shortest round-tripping form, in plain notation
// for 1e-6 <= |f| < 1e21 (as encoding/json does).
func appendFloat(b []byte, f float64, bits int, quote bool) []byte {
	var s string
	switch {
	case math.IsNaN(f):
		s = "NaN"
	case math.IsInf(f, 1):
		s = "Infinity"
	case math.IsInf(f, -1):
		s = "-Infinity"
	}
	if s != "" {
		if quote {
			return jsonw.AppendString(b, s)
		}
		return append(b, s...)
	}
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		return strconv.AppendFloat(b, f, 'e', -1, bits)
	}
	return strconv.AppendFloat(b, f, 'f', -1, bits)
}

func appendUUID(b, u []byte) []byte {
	const hex = "0123456789abcdef"
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hex[c>>4], hex[c&15])
	}
	return b
}

// isoInterval renders an interval as an ISO 8601 duration, e.g. P1M2DT3H.
func isoInterval(iv duckdb.Interval) string {
	var b strings.Builder
	b.WriteByte('P')
	if iv.Months != 0 {
		fmt.Fprintf(&b, "%dM", iv.Months)
	}
	if iv.Days != 0 {
		fmt.Fprintf(&b, "%dD", iv.Days)
	}
	if iv.Micros != 0 {
		b.WriteByte('T')
		us := iv.Micros
		neg := us < 0
		if neg {
			us = -us
		}
		sign := ""
		if neg {
			sign = "-"
		}
		h, m, s, frac := us/3_600_000_000, us/60_000_000%60, us/1_000_000%60, us%1_000_000
		if h != 0 {
			fmt.Fprintf(&b, "%s%dH", sign, h)
		}
		if m != 0 {
			fmt.Fprintf(&b, "%s%dM", sign, m)
		}
		if s != 0 || frac != 0 {
			fmt.Fprintf(&b, "%s%d", sign, s)
			if frac != 0 {
				b.WriteString(strings.TrimRight(fmt.Sprintf(".%06d", frac), "0"))
			}
			b.WriteByte('S')
		}
	}
	if b.Len() == 1 {
		return "PT0S"
	}
	return b.String()
}

// appendJSONObject appends a JSON object of keys, in order, and the
// value of each key i.
func appendJSONObject(b []byte, keys []string, value func(i int) any) []byte {
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonw.AppendString(b, k)
		b = append(b, ':')
		b = appendJSON(b, value(i), "")
	}
	return append(b, '}')
}

// appendJSON writes v as a JSON value. typ is the column type for
// top-level values ("" inside nested values).
func appendJSON(b []byte, v any, typ string) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...)
	case string:
		return jsonw.AppendString(b, x)
	case []byte:
		if typ == "UUID" && len(x) == 16 {
			b = append(b, '"')
			return append(appendUUID(b, x), '"')
		}
		b = append(b, '"')
		return append(base64.StdEncoding.AppendEncode(b, x), '"')
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSON(b, e, "")
		}
		return append(b, ']')
	case map[string]any: // STRUCT: Go maps lose field order; sort for stable output
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return appendJSONObject(b, keys, func(i int) any { return x[keys[i]] })
	case duckdb.OrderedMap:
		keys, vals := x.Keys(), x.Values()
		names := make([]string, len(keys))
		for i, k := range keys {
			names[i] = string(appendText(nil, k, ""))
		}
		return appendJSONObject(b, names, func(i int) any { return vals[i] })
	case duckdb.Map:
		keys := make([]string, 0, len(x))
		byKey := make(map[string]any, len(x))
		for k, v := range x {
			s := string(appendText(nil, k, ""))
			keys = append(keys, s)
			byKey[s] = v
		}
		slices.Sort(keys)
		return appendJSONObject(b, keys, func(i int) any { return byKey[keys[i]] })
	case duckdb.Union:
		return appendJSON(b, x.Value, "")
	case *big.Int, duckdb.Decimal:
		return appendScalar(b, v, typ, false) // exact, as a JSON number
	}
	return appendScalar(b, v, typ, true)
}

type csvWriter struct {
	w    *csv.Writer
	cols []Column
	rec  []string
	buf  []byte
}

func (c *csvWriter) Row(vals []any) error {
	for i, v := range vals {
		if v == nil {
			c.rec[i] = ""
			continue
		}
		c.buf = appendText(c.buf[:0], v, c.cols[i].Type)
		c.rec[i] = string(c.buf)
	}
	return c.w.Write(c.rec)
}

func (c *csvWriter) Close(bool) error {
	c.w.Flush()
	return c.w.Error()
}

type jsonWriter struct {
	w     *bufio.Writer
	cols  []Column
	keys  [][]byte
	array bool
	rows  int
	buf   []byte
}

func (j *jsonWriter) Row(vals []any) error {
	b := j.buf[:0]
	if j.array {
		if j.rows == 0 {
			b = append(b, "[\n"...)
		} else {
			b = append(b, ",\n"...)
		}
	}
	b = append(b, '{')
	for i, v := range vals {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, j.keys[i]...)
		b = append(b, ':')
		b = appendJSON(b, v, j.cols[i].Type)
	}
	b = append(b, '}')
	if !j.array {
		b = append(b, '\n')
	}
	j.buf = b
	j.rows++
	_, err := j.w.Write(b)
	return err
}

func (j *jsonWriter) Close(bool) error {
	if j.array {
		if j.rows == 0 {
			j.w.WriteString("[]\n")
		} else {
			j.w.WriteString("\n]\n")
		}
	}
	return j.w.Flush()
}

// tableWriter buffers the cells to align them.
type tableWriter struct {
	w       io.Writer
	cols    []Column
	cells   [][]string
	buf     []byte
	explain bool // EXPLAIN's result: print the drawn plan as is
}

// plan prints EXPLAIN's drawn plans as DuckDB draws them, which escaping
// the newlines into one cell would make unreadable.
func (t *tableWriter) plan() error {
	bw := bufio.NewWriter(t.w)
	for _, row := range t.cells {
		v := row[1]
		bw.WriteString(v)
		if !strings.HasSuffix(v, "\n") {
			bw.WriteByte('\n')
		}
	}
	return bw.Flush()
}

func (t *tableWriter) Row(vals []any) error {
	row := make([]string, len(vals))
	for i, v := range vals {
		if v == nil {
			row[i] = "NULL"
			continue
		}
		t.buf = appendText(t.buf[:0], v, t.cols[i].Type)
		if t.explain {
			row[i] = string(t.buf)
		} else {
			row[i] = escapeCell(t.buf)
		}
	}
	t.cells = append(t.cells, row)
	return nil
}

// escapeCell keeps one row on one line: control characters are escaped
// the way Go writes them in string literals.
func escapeCell(b []byte) string {
	clean := true
	for _, c := range b {
		if c < 0x20 || c == 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return string(b)
	}
	var s strings.Builder
	for _, c := range b {
		switch {
		case c == '\n':
			s.WriteString(`\n`)
		case c == '\r':
			s.WriteString(`\r`)
		case c == '\t':
			s.WriteString(`\t`)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&s, `\x%02x`, c)
		default:
			s.WriteByte(c)
		}
	}
	return s.String()
}

// numeric reports whether a column's cells are right-aligned.
func numeric(typ string) bool {
	switch typ {
	case "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
		"UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE":
		return true
	}
	return strings.HasPrefix(typ, "DECIMAL")
}

func (t *tableWriter) Close(truncated bool) error {
	if t.explain {
		return t.plan()
	}
	widths := make([]int, len(t.cols))
	for i, c := range t.cols {
		widths[i] = utf8.RuneCountInString(c.Name)
	}
	for _, row := range t.cells {
		for i, s := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(s))
		}
	}
	bw := bufio.NewWriter(t.w)
	line := func(cells []string, right func(int) bool) {
		for i, s := range cells {
			pad := widths[i] - utf8.RuneCountInString(s)
			last := i == len(cells)-1
			if i > 0 {
				bw.WriteString("  ")
			}
			if right(i) {
				bw.WriteString(strings.Repeat(" ", pad))
				bw.WriteString(s)
			} else {
				bw.WriteString(s)
				if !last {
					bw.WriteString(strings.Repeat(" ", pad))
				}
			}
		}
		bw.WriteByte('\n')
	}
	names := make([]string, len(t.cols))
	rules := make([]string, len(t.cols))
	for i, c := range t.cols {
		names[i] = c.Name
		rules[i] = strings.Repeat("-", widths[i])
	}
	right := func(i int) bool { return numeric(t.cols[i].Type) }
	line(names, right)
	line(rules, right)
	for _, row := range t.cells {
		line(row, right)
	}
	switch n := len(t.cells); {
	case truncated:
		fmt.Fprintf(bw, "(first %d rows; more were cut by --max-rows)\n", n)
	case n == 1:
		bw.WriteString("(1 row)\n")
	default:
		fmt.Fprintf(bw, "(%d rows)\n", n)
	}
	return bw.Flush()
}
