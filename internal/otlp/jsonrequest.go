package otlp

import (
	"fmt"

	"github.com/sluice-dev/sluice/internal/signal"
)

// maxRequestJSONDepth bounds the nesting of an OTLP JSON request before
// pdata parses it, recursively and into objects several times the size of
// the text: deep enough for AnyValues at the protobuf decoder's limit
// (maxDepth; a kvlist level is 4 JSON levels) under the deepest record
// (an exemplar attribute is 14), which then names the problem itself.
const maxRequestJSONDepth = 4*maxDepth + 32

// PrepareJSONRequest readies the body of an OTLP/HTTP JSON request for
// pdata's parser: it must be exactly one JSON object (whitespace and a
// UTF-8 byte order mark around it allowed; anything after it would be
// silently ignored by pdata, a second request lost) nested no deeper than
// maxRequestJSONDepth. Members whose value is null are left out, since
// proto3 JSON reads null as the field's default and pdata refuses it for
// numbers. The result is js itself when nothing was left out, else a new
// buffer. n counts what CountRecords counts, for a limit checked before
// pdata builds an object for each: the records (elements of logRecords,
// dataPoints and spans lists) and the messages holding them (resources,
// scopes, metrics).
func PrepareJSONRequest(js []byte) (doc []byte, n JSONCounts, err error) {
	r := jsonReader{b: js}
	var out []byte
	doc, n, err = nextJSONDoc(&r, &out)
	if err != nil {
		return nil, n, err
	}
	if doc == nil {
		return nil, n, r.errorf("empty body: want a JSON object")
	}
	if r.ws(); r.i < len(r.b) {
		return nil, n, r.errorf("data after the request object (one export request per body)")
	}
	return doc, n, nil
}

// JSONCounts is what PrepareJSONRequest counts, and which signals' lists
// the request holds.
type JSONCounts struct {
	Records, Holders int
	// Kinds has bit 1<<k set for each signal k whose resource list
	// (resourceLogs, resourceMetrics, resourceSpans) is a member of the
	// request: pdata ignores the lists of other signals as unknown fields,
	// so traces posted to /v1/logs would be acknowledged and lost.
	Kinds uint8
}

// nextJSONDoc reads the next top-level JSON object of r (skipping
// whitespace and a byte order mark before it); nil at the end of the
// input. The object comes back without its null members: a subslice of
// r.b when it has none, else a copy into *out (reused); n counts as
// PrepareJSONRequest does.
func nextJSONDoc(r *jsonReader, out *[]byte) (doc []byte, n JSONCounts, err error) {
	r.ws()
	if len(r.b)-r.i >= 3 && r.b[r.i] == 0xef && r.b[r.i+1] == 0xbb && r.b[r.i+2] == 0xbf {
		r.i += 3
		r.ws()
	}
	if r.i >= len(r.b) {
		return nil, n, nil
	}
	start := r.i
	if r.b[start] != '{' {
		return nil, n, r.errorf("want an object")
	}
	c := nullCutter{r: r}
	if err := c.value(0, listNone); err != nil {
		return nil, n, err
	}
	if len(c.cuts) == 0 {
		return r.b[start:r.i], c.n, nil
	}
	o, from := (*out)[:0], start
	for k := 0; k < len(c.cuts); k += 2 {
		o = append(o, r.b[from:c.cuts[k]]...)
		from = c.cuts[k+1]
	}
	o = append(o, r.b[from:r.i]...)
	*out = o
	return o, c.n, nil
}

// nullCutter walks one JSON value and notes the byte ranges that leave out
// its null object members, each with the comma that separated it, and
// counts the records.
type nullCutter struct {
	r    *jsonReader
	cuts []int // [start, end) pairs in order
	n    JSONCounts
}

// What the elements of a list are, by the name of its member.
const (
	listNone = iota
	listRecords
	listHolders
)

// value reads one value; list says what its elements are if it is a list.
func (c *nullCutter) value(depth int, list int) error {
	r := c.r
	if depth > maxRequestJSONDepth {
		return r.errorf("nested deeper than %d levels", maxRequestJSONDepth)
	}
	switch r.peek() {
	case '{':
		r.i++
		kept := false // a member before this one stays
		for first := true; ; first = false {
			before := r.i // after '{' or the previous member
			more, err := r.more('}', first)
			if err != nil || !more {
				return err
			}
			afterComma := r.i
			key, err := r.key()
			if err != nil {
				return err
			}
			idLen, kind := idHexLen(key), uint8(0)
			if depth == 0 {
				kind = resourceListKind(key)
			}
			if r.peek() == 'n' && r.literal("null") {
				// From the end of the previous member: its comma goes
				// with it, or with the next member kept if it was first.
				c.cuts = append(c.cuts, before, r.i)
				continue
			}
			if !kept && !first {
				c.cuts = append(c.cuts, before, afterComma) // the members before were all null
			}
			kept = true
			c.n.Kinds |= kind
			if idLen > 0 && r.peek() == '"' {
				if err := checkHexID(r, idLen); err != nil {
					return err
				}
				continue
			}
			if err := c.value(depth+1, listOf(key)); err != nil {
				return err
			}
		}
	case '[':
		r.i++
		for first := true; ; first = false {
			more, err := r.more(']', first)
			if err != nil || !more {
				return err
			}
			switch list {
			case listRecords:
				c.n.Records++
			case listHolders:
				c.n.Holders++
			}
			if err := c.value(depth+1, listNone); err != nil {
				return err
			}
		}
	case 0:
		return r.errorf("unexpected end of input")
	default:
		return r.skip(0) // a scalar
	}
}

// resourceListKind is the bit of the signal whose resource list a
// request member named key is (0: none).
func resourceListKind(key []byte) uint8 {
	switch string(key) {
	case "resourceLogs", "resource_logs":
		return 1 << signal.KindLogs
	case "resourceMetrics", "resource_metrics":
		return 1 << signal.KindMetrics
	case "resourceSpans", "resource_spans":
		return 1 << signal.KindTraces
	}
	return 0
}

// listOf says what the elements of a member named key are.
func listOf(key []byte) int {
	switch string(key) {
	case "logRecords", "log_records", "dataPoints", "data_points", "spans":
		return listRecords
	case "resourceLogs", "resource_logs", "resourceMetrics", "resource_metrics", "resourceSpans", "resource_spans",
		"scopeLogs", "scope_logs", "scopeMetrics", "scope_metrics", "scopeSpans", "scope_spans", "metrics":
		return listHolders
	}
	return listNone
}

// idHexLen is the length in hex digits of the id a member named key
// holds (0: not an id).
func idHexLen(key []byte) int {
	switch string(key) {
	case "traceId", "trace_id":
		return 32
	case "spanId", "span_id", "parentSpanId", "parent_span_id":
		return 16
	}
	return 0
}

// checkHexID reads the string value of an id member and refuses it unless
// it is empty or n hex digits: OTLP/JSON ids are hex, where protobuf's
// JSON mapping (some exporters use it) writes base64. pdata would only
// say "length mismatch".
func checkHexID(r *jsonReader, n int) error {
	at := r.i
	v, err := r.string()
	if err != nil || len(v) == 0 {
		return err
	}
	ok := len(v) == n
	for _, c := range v {
		if !ok {
			break
		}
		ok = c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
	}
	if !ok {
		r.i = at
		return r.errorf("id %.40q is not %d hex digits (OTLP/JSON ids are hex, not base64)", v, n)
	}
	return nil
}

// describe is for errors that name a document of several.
func describe(doc int, err error) error { return fmt.Errorf("document %d: %w", doc, err) }
