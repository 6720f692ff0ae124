package search

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/bloom"

	"github.com/sluice-dev/sluice/internal/jsonw"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/format"
)

// serveTrace writes every span of one trace as an OTLP JSON
// ExportTraceServiceRequest, or 404 when the tenant has none.
func (h *Handler) serveTrace(ctx context.Context, w http.ResponseWriter, r *http.Request, tenant string) (scanStats, error) {
	var st scanStats
	p, err := parseParams(r.URL.RawQuery, []string{"start", "end"}, nil)
	if err != nil {
		return st, err
	}
	id := strings.ToLower(r.URL.Path[len(tracePrefix):])
	if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		return st, badData("invalid trace id %q: want 32 hex digits", r.URL.Path[len(tracePrefix):])
	}
	if id == strings.Repeat("0", 32) {
		return st, badData("invalid trace id %q: the all-zero id means no trace", id)
	}
	f := catalog.Filter{Table: "traces", Tenant: tenant}
	for _, b := range [...]struct {
		name string
		dst  *int64
	}{{"start", &f.From}, {"end", &f.To}} {
		if s := p.get(b.name); s != "" {
			if *b.dst, err = parseTime(s); err != nil {
				return st, badData("invalid parameter %q: %v", b.name, err)
			}
		}
	}
	if f.From != 0 && f.To != 0 && f.To < f.From {
		return st, badData("invalid time range: end (%s) is before start (%s)", fmtNs(f.To), fmtNs(f.From))
	}
	segs, err := h.list(ctx, f)
	if err != nil {
		return st, fmt.Errorf("list trace segments of tenant %q: %w", tenant, err)
	}
	var rows []row
	var files []*lakeFile
	defer func() {
		for _, lf := range files {
			h.files.release(lf)
		}
	}()
	buf := make([]parquet.Value, 1024)
	hash := bloom.XXH64{}.Sum64([]byte(id))
	for i := range segs {
		if segs[i].Tenant != tenant || segs[i].Table != "traces" {
			continue
		}
		if err := ctx.Err(); err != nil {
			return st, err
		}
		ix, err := h.traceIndexOf(segs[i].Path, tenant)
		if err != nil {
			return st, err
		}
		var groups []int
		for g := range ix.groups {
			if ix.mayHold(g, id, hash) {
				groups = append(groups, g)
			}
		}
		if len(groups) == 0 {
			continue
		}
		lf, err := h.files.acquire(segs[i].Path, "traces", tenant)
		if err != nil {
			return st, err
		}
		n0 := len(rows)
		if rows, err = h.traceRows(lf, id, groups, buf, rows, &st); err != nil {
			h.files.release(lf)
			return st, err
		}
		if len(rows) == n0 {
			h.files.release(lf)
		} else {
			files = append(files, lf)
		}
	}
	if len(rows) == 0 {
		return st, &apiError{http.StatusNotFound, errNotFound, fmt.Sprintf("trace %s not found", id)}
	}
	w.Header().Set("Content-Type", jsonType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(appendTraceJSON(nil, rows))
	return st, nil
}

// traceRows appends the spans of trace id in row groups groups of lf
// (those its traceIndex could not rule out).
func (h *Handler) traceRows(lf *lakeFile, id string, groups []int, buf []parquet.Value, out []row, st *scanStats) ([]row, error) {
	tc := lf.col(format.ColTraceID)
	if tc < 0 {
		return out, nil
	}
	cols := allCols(lf)
	for _, g := range groups {
		rg := lf.pf.RowGroups()[g]
		_, size := lf.stats(g, tc)
		ccs := rg.ColumnChunks()
		st.rows += rg.NumRows()
		st.bytes += size
		if st.rows > h.o.Limits.MaxRowsScanned {
			return out, limitErr("the trace lookup would scan more than %d rows (query limit max_rows_scanned); pass start and end to narrow it", h.o.Limits.MaxRowsScanned)
		}
		if st.bytes > h.o.Limits.MaxBytesScanned {
			return out, limitErr("the trace lookup would read more than %d bytes (query limit max_bytes_scanned); pass start and end to narrow it", h.o.Limits.MaxBytesScanned)
		}
		var rowsAt []int64
		err := eachValue(ccs[tc], buf, func(off int, vals []parquet.Value) error {
			for i, v := range vals {
				if !v.IsNull() && string(v.ByteArray()) == id {
					rowsAt = append(rowsAt, int64(off+i))
				}
			}
			return nil
		})
		if err != nil {
			return out, fmt.Errorf("read trace_id of %q row group %d: %w", lf.path, g, err)
		}
		if len(rowsAt) == 0 {
			continue
		}
		first := len(out)
		for range rowsAt {
			out = append(out, row{lf: lf, cols: cols, vals: make([]parquet.Value, len(cols))})
		}
		for ci, c := range cols {
			err := valuesAt(ccs[c], buf, rowsAt, func(k int, v parquet.Value) {
				out[first+k].vals[ci] = v.Clone()
			})
			if err != nil {
				return out, fmt.Errorf("read %s of %q row group %d: %w", lf.cols[c].name, lf.path, g, err)
			}
		}
	}
	return out, nil
}

// appendTraceJSON groups spans by resource and scope (first appearance
// order) into {"resourceSpans":[...]}.
func appendTraceJSON(dst []byte, rows []row) []byte {
	type scopeGroup struct {
		key   string
		spans []int
	}
	type resGroup struct {
		key    string
		scopes []*scopeGroup
	}
	var groups []*resGroup
	for i := range rows {
		r := &rows[i]
		rk := string(resourceJSON(nil, r))
		sk := string(scopeJSON(nil, r))
		gi := slices.IndexFunc(groups, func(g *resGroup) bool { return g.key == rk })
		if gi < 0 {
			groups = append(groups, &resGroup{key: rk})
			gi = len(groups) - 1
		}
		g := groups[gi]
		si := slices.IndexFunc(g.scopes, func(s *scopeGroup) bool { return s.key == sk })
		if si < 0 {
			g.scopes = append(g.scopes, &scopeGroup{key: sk})
			si = len(g.scopes) - 1
		}
		g.scopes[si].spans = append(g.scopes[si].spans, i)
	}
	dst = append(dst, `{"resourceSpans":[`...)
	for gi, g := range groups {
		if gi > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, g.key...)
		dst = append(dst, `,"scopeSpans":[`...)
		for si, s := range g.scopes {
			if si > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, s.key...)
			dst = append(dst, `,"spans":[`...)
			slices.SortStableFunc(s.spans, func(a, b int) int {
				x, _ := rows[a].int(format.ColStartTimestamp)
				y, _ := rows[b].int(format.ColStartTimestamp)
				return int(min(max(x-y, -1), 1))
			})
			for k, i := range s.spans {
				if k > 0 {
					dst = append(dst, ',')
				}
				dst = appendSpanJSON(dst, &rows[i])
			}
			dst = append(dst, "]}"...)
		}
		dst = append(dst, "]}"...)
	}
	return append(dst, "]}\n"...)
}

// resourceJSON is the opening of a ResourceSpans object (without its
// closing brace), also used as the grouping key.
func resourceJSON(dst []byte, r *row) []byte {
	dst = append(dst, `{"resource":{"attributes":`...)
	dst = appendKeyValues(dst, r, format.PrefixResource)
	dst = memberInt(dst, r, format.ColResourceDropped, "droppedAttributesCount", false)
	dst = append(dst, '}')
	return memberStr(dst, r, format.ColResourceSchemaURL, "schemaUrl")
}

// scopeJSON is the opening of a ScopeSpans object.
func scopeJSON(dst []byte, r *row) []byte {
	dst = append(dst, `{"scope":{"name":`...)
	s, _ := r.str(format.ColScopeName)
	dst = jsonw.AppendString(dst, s)
	dst = memberStr(dst, r, format.ColScopeVersion, "version")
	dst = append(dst, `,"attributes":`...)
	dst = appendKeyValues(dst, r, format.PrefixScope)
	dst = memberInt(dst, r, format.ColScopeDropped, "droppedAttributesCount", false)
	dst = append(dst, '}')
	return memberStr(dst, r, format.ColScopeSchemaURL, "schemaUrl")
}

func appendSpanJSON(dst []byte, r *row) []byte {
	dst = append(dst, `{"traceId":`...)
	s, _ := r.str(format.ColTraceID)
	dst = jsonw.AppendString(dst, s)
	dst = memberStr(dst, r, format.ColSpanID, "spanId")
	dst = memberStr(dst, r, format.ColTraceState, "traceState")
	dst = memberStr(dst, r, format.ColParentSpanID, "parentSpanId")
	dst = memberInt(dst, r, format.ColFlags, "flags", false)
	dst = memberStr(dst, r, format.ColName, "name")
	dst = memberInt(dst, r, format.ColKind, "kind", false)
	dst = memberInt(dst, r, format.ColStartTimestamp, "startTimeUnixNano", true)
	dst = memberInt(dst, r, format.ColEndTimestamp, "endTimeUnixNano", true)
	dst = append(dst, `,"attributes":`...)
	dst = appendKeyValues(dst, r, format.PrefixRecord)
	dst = memberInt(dst, r, format.ColDropped, "droppedAttributesCount", false)
	if ev, ok := r.str(format.ColEvents); ok {
		dst = append(dst, `,"events":`...)
		dst = append(dst, ev...)
	}
	dst = memberInt(dst, r, format.ColDroppedEventsCount, "droppedEventsCount", false)
	if ln, ok := r.str(format.ColLinks); ok {
		dst = append(dst, `,"links":`...)
		dst = append(dst, ln...)
	}
	dst = memberInt(dst, r, format.ColDroppedLinksCount, "droppedLinksCount", false)
	dst = append(dst, `,"status":{`...)
	code, hasCode := r.int(format.ColStatusCode)
	if hasCode {
		dst = append(dst, `"code":`...)
		dst = strconv.AppendInt(dst, code, 10)
	}
	if m, ok := r.str(format.ColStatusMessage); ok {
		if hasCode {
			dst = append(dst, ',')
		}
		dst = append(dst, `"message":`...)
		dst = jsonw.AppendString(dst, m)
	}
	return append(dst, "}}"...)
}

// traceIndexOf returns the cached traceIndex of a traces file, building it
// on first use.
func (h *Handler) traceIndexOf(p, tenant string) (*traceIndex, error) {
	if ix := h.traceIdx.get(p); ix != nil {
		return ix, nil
	}
	lf, err := h.files.acquire(p, "traces", tenant)
	if err != nil {
		return nil, err
	}
	defer h.files.release(lf)
	ix, err := buildTraceIndex(lf)
	if err != nil {
		return nil, err
	}
	h.traceIdx.put(p, ix)
	return ix, nil
}
