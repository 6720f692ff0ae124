package search

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/internal/jsonw"
	"github.com/sluice-dev/sluice/internal/lake/format"
)

var (
	logsParams  = []string{"start", "end", "service", "severity_min", "severity_text", "q", "limit", "cursor"}
	spansParams = []string{"start", "end", "service", "name", "min_duration", "max_duration", "status", "limit", "cursor"}
	attrParams  = []string{"attr.", "attr_re.", "resource.", "resource_re."}
)

// severityNames maps OTLP severity names to the lowest number of their range.
var severityNames = map[string]int64{"trace": 1, "debug": 5, "info": 9, "warn": 13, "warning": 13, "error": 17, "fatal": 21}

func (h *Handler) serveLogs(ctx context.Context, w http.ResponseWriter, r *http.Request, tenant string) (scanStats, error) {
	p, err := parseParams(r.URL.RawQuery, logsParams, attrParams)
	if err != nil {
		return scanStats{}, err
	}
	req, err := h.commonReq(p, "logs", tenant)
	if err != nil {
		return scanStats{}, err
	}
	req.timeCol, req.altTimeCol = format.ColTimestamp, format.ColObservedTimestamp
	if s := p.get("severity_min"); s != "" {
		n, ok := severityNames[strings.ToLower(s)]
		if !ok {
			v, err := strconv.ParseInt(s, 10, 32)
			if err != nil || v < 0 {
				return scanStats{}, badData("invalid parameter \"severity_min\": %q is neither a severity number nor one of trace, debug, info, warn, error, fatal", s)
			}
			n = v
		}
		req.preds = append(req.preds, pred{kind: predIntRange, col: format.ColSeverityNumber, lo: n, hi: 1<<31 - 1})
	}
	if s := p.get("severity_text"); s != "" {
		req.preds = append(req.preds, pred{kind: predStrEq, col: format.ColSeverityText, s: s})
	}
	if s := p.get("q"); s != "" {
		req.preds = append(req.preds, pred{kind: predSubstr, col: format.ColBody, s: s})
	}
	return h.run(ctx, w, req, allCols, appendLogLine)
}

func (h *Handler) serveSpans(ctx context.Context, w http.ResponseWriter, r *http.Request, tenant string) (scanStats, error) {
	p, err := parseParams(r.URL.RawQuery, spansParams, attrParams)
	if err != nil {
		return scanStats{}, err
	}
	req, err := h.commonReq(p, "traces", tenant)
	if err != nil {
		return scanStats{}, err
	}
	req.timeCol = format.ColStartTimestamp
	if s := p.get("name"); s != "" {
		req.preds = append(req.preds, pred{kind: predStrEq, col: format.ColName, s: s})
	}
	lo, hi := int64(0), int64(1<<63-1)
	for _, b := range [...]struct {
		name string
		dst  *int64
	}{{"min_duration", &lo}, {"max_duration", &hi}} {
		if s := p.get(b.name); s != "" {
			d, err := parseDuration(s)
			if err != nil {
				return scanStats{}, badData("invalid parameter %q: %v", b.name, err)
			}
			*b.dst = d
		}
	}
	if lo > hi {
		return scanStats{}, badData("invalid duration range: min_duration %d ns is above max_duration %d ns", lo, hi)
	}
	if lo > 0 || hi < 1<<63-1 {
		req.preds = append(req.preds, pred{kind: predIntRange, col: format.ColDurationNs, lo: lo, hi: hi})
	}
	if s := p.get("status"); s != "" {
		code := -1
		for i, n := range statusNames {
			if strings.EqualFold(s, n) {
				code = i
			}
		}
		if code < 0 {
			return scanStats{}, badData("invalid parameter \"status\": %q is not one of unset, ok, error", s)
		}
		req.preds = append(req.preds, pred{kind: predIntRange, col: format.ColStatusCode, lo: int64(code), hi: int64(code)})
	}
	return h.run(ctx, w, req, colsNamed(spanSearchCols), appendSpanLine)
}

// commonReq reads the parameters shared by both searches.
func (h *Handler) commonReq(p *params, table, tenant string) (*scanReq, error) {
	req := &scanReq{table: table, tenant: tenant, service: p.get("service"),
		maxRows: h.o.Limits.MaxRowsScanned, maxBytes: h.o.Limits.MaxBytesScanned}
	var err error
	if req.start, req.end, err = p.timeRange(h.o.Now()); err != nil {
		return nil, err
	}
	if req.limit, err = p.limit(h.o.Limits.MaxLimit); err != nil {
		return nil, err
	}
	if s := p.get("cursor"); s != "" {
		if req.after, err = decodeCursor(s); err != nil {
			return nil, err
		}
	}
	attrs, err := p.attrFilters()
	if err != nil {
		return nil, err
	}
	req.preds = append(req.preds, attrs...)
	return req, nil
}

// run scans, materialises the page and streams it as JSON lines, ending
// with a cursor line when more results exist, else a summary line.
func (h *Handler) run(ctx context.Context, w http.ResponseWriter, req *scanReq,
	colsOf func(*lakeFile) []int, line func([]byte, *row) []byte) (scanStats, error) {
	hits, paths, st, err := h.scan(ctx, req)
	if err != nil {
		return st, err
	}
	more := len(hits) > req.limit
	if more {
		hits = hits[:req.limit]
	}
	rows, files, err := h.materialise(ctx, req, hits, paths, colsOf)
	defer func() {
		for _, f := range files {
			h.files.release(f)
		}
	}()
	if err != nil {
		return st, err
	}
	w.Header().Set("Content-Type", ndjsonType)
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	var b []byte
	for i := range rows {
		b = line(b, &rows[i])
		if len(b) >= 64<<10 {
			if _, err := w.Write(b); err != nil {
				return st, nil // the client went away; nothing to report to it
			}
			b = b[:0]
		}
	}
	if more {
		last := hits[len(hits)-1]
		c := cursor{t: last.t, path: paths[last.file], row: last.row}
		b = append(b, `{"cursor":`...)
		b = jsonw.AppendString(b, c.encode())
		b = append(b, `,"scanned_rows":`...)
	} else {
		b = append(b, `{"done":true,"scanned_rows":`...)
	}
	b = strconv.AppendInt(b, st.rows, 10)
	b = append(b, "}\n"...)
	_, _ = w.Write(b)
	if fl != nil {
		fl.Flush()
	}
	return st, nil
}
