package search

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/format"
)

type predKind uint8

const (
	predStrEq    predKind = iota // fixed string column equals s
	predSubstr                   // fixed string column contains s
	predIntRange                 // fixed integer column in [lo, hi]
	predAttr                     // attribute prefix+key equals s (typed)
	predAttrRe                   // attribute prefix+key matches re (whole value)
)

// pred is one filter of a search; all of a search's preds must hold.
type pred struct {
	kind        predKind
	col         string // fixed column
	prefix, key string // attribute
	s           string
	re          *regexp.Regexp
	lo, hi      int64
}

// scanReq is one search over one table.
type scanReq struct {
	table       string
	timeCol     string
	altTimeCol  string // used where timeCol is null ("" for none)
	tenant      string
	start, end  int64 // [start, end)
	service     string
	preds       []pred
	limit       int
	after       *cursor
	maxRows     int64
	maxBytes    int64
	outputCols  func(lf *lakeFile) []int
	outputEmits func(lf *lakeFile, cols []int, vals []parquet.Value, dst []byte) []byte
}

type scanStats struct{ rows, bytes int64 }

// hit is a matching row: file indexes follow path order, so comparing them
// compares paths.
type hit struct {
	t    int64
	file int32
	rg   int32
	row  int64 // within the file
	rgr  int64 // within the row group
}

// before is the result order: time descending, then path, then row.
func before(a, b *hit) bool {
	if a.t != b.t {
		return a.t > b.t
	}
	if a.file != b.file {
		return a.file < b.file
	}
	return a.row < b.row
}

// topK keeps the first k hits in result order: a heap whose root is the
// last of them.
type topK struct {
	k int
	h []hit
}

func (q *topK) full() bool { return len(q.h) >= q.k }

func (q *topK) add(x hit) {
	if len(q.h) < q.k {
		q.h = append(q.h, x)
		for i := len(q.h) - 1; i > 0; {
			p := (i - 1) / 2
			if !before(&q.h[p], &q.h[i]) {
				break
			}
			q.h[p], q.h[i] = q.h[i], q.h[p]
			i = p
		}
		return
	}
	if !before(&x, &q.h[0]) {
		return
	}
	q.h[0] = x
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < len(q.h) && before(&q.h[m], &q.h[l]) {
			m = l
		}
		if r := l + 1; r < len(q.h) && before(&q.h[m], &q.h[r]) {
			m = r
		}
		if m == i {
			break
		}
		q.h[i], q.h[m] = q.h[m], q.h[i]
		i = m
	}
}

// scanner holds the per-query scratch reused across row groups.
type scanner struct {
	req   *scanReq
	st    scanStats
	top   topK
	buf   []parquet.Value
	match []bool
	hitv  []bool
	times []int64
	tmp   []byte
	reMem map[string]bool // regexp results by value, per pred column
}

// scan finds the first req.limit+1 matching rows, in result order, and the
// paths their file indexes refer to.
func (h *Handler) scan(ctx context.Context, req *scanReq) ([]hit, []string, scanStats, error) {
	f := catalog.Filter{Table: req.table, Tenant: req.tenant, From: req.start, To: req.end - 1, Service: req.service}
	if req.after != nil && req.after.t < req.end {
		f.To = req.after.t
	}
	segs, err := h.list(ctx, f)
	if err != nil {
		return nil, nil, scanStats{}, fmt.Errorf("list %s segments of tenant %q: %w", req.table, req.tenant, err)
	}
	slices.SortFunc(segs, func(a, b catalog.Segment) int { return cmp.Compare(a.Path, b.Path) })
	paths := make([]string, len(segs))
	for i := range segs {
		paths[i] = segs[i].Path
	}
	// Hour partitions, newest first.
	order := make([]int, len(segs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c := cmp.Compare(segs[b].Day, segs[a].Day); c != 0 {
			return c
		}
		return cmp.Compare(segs[b].Hour, segs[a].Hour)
	})
	s := &scanner{req: req, top: topK{k: req.limit + 1}, buf: make([]parquet.Value, 1024)}
	for _, i := range order {
		seg := &segs[i]
		if seg.Tenant != req.tenant || seg.Table != req.table {
			continue // invariant 1, whatever the catalog says
		}
		if s.top.full() && seg.MaxTime < s.top.h[0].t {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, nil, s.st, err
		}
		if err := s.file(ctx, h, int32(i), seg.Path); err != nil {
			return nil, nil, s.st, err
		}
	}
	out := s.top.h
	slices.SortFunc(out, func(a, b hit) int {
		if before(&a, &b) {
			return -1
		}
		return 1
	})
	return out, paths, s.st, nil
}

func (s *scanner) file(ctx context.Context, h *Handler, fi int32, p string) error {
	req := s.req
	lf, err := h.files.acquire(p, req.table, req.tenant)
	if err != nil {
		return err
	}
	defer h.files.release(lf)
	tc, ac, sc := lf.col(req.timeCol), -1, -1
	if tc < 0 {
		return fmt.Errorf("file %q has no %s column", p, req.timeCol)
	}
	if req.altTimeCol != "" {
		ac = lf.col(req.altTimeCol)
	}
	if req.service != "" {
		if sc = lf.col(format.ColServiceName); sc < 0 {
			return nil
		}
	}
	// Resolve predicates to columns; a pred with no column matches nothing.
	pcols := make([][]int, len(req.preds))
	for k := range req.preds {
		pr := &req.preds[k]
		switch pr.kind {
		case predAttr, predAttrRe:
			for c, ci := range lf.cols {
				if ci.attr && ci.prefix == pr.prefix && ci.key == pr.key {
					pcols[k] = append(pcols[k], c)
				}
			}
			if pr.prefix == format.PrefixResource && pr.key == "service.name" {
				if c := lf.col(format.ColServiceName); c >= 0 {
					pcols[k] = append(pcols[k], c)
				}
			}
			if c := lf.overflowCol(pr.prefix); c >= 0 {
				pcols[k] = append(pcols[k], c) // keys past the column cap
			}
		default:
			if c := lf.col(pr.col); c >= 0 {
				pcols[k] = []int{c}
			}
		}
		if len(pcols[k]) == 0 {
			return nil
		}
	}
	cmpPath := 0
	if req.after != nil {
		cmpPath = cmp.Compare(p, req.after.path)
	}
	var base int64
	for g, rg := range lf.pf.RowGroups() {
		n := rg.NumRows()
		gbase := base
		base += n
		// Statistics prune only when no row falls back to altTimeCol.
		if lo, hi, ok := lf.int64Stats(g, tc); ok {
			if hi < req.start || lo >= req.end {
				continue
			}
			if s.top.full() && hi < s.top.h[0].t {
				continue // older than every match kept
			}
			if req.after != nil && lo > req.after.t {
				continue // all on earlier pages
			}
		}
		if sc >= 0 {
			st, _ := lf.stats(g, sc)
			if st.NullCount == n {
				continue
			}
			if st.MinValue != nil && st.MaxValue != nil &&
				(req.service < string(st.MinValue) || req.service > string(st.MaxValue)) {
				continue
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.group(lf, g, rg, n, gbase, fi, tc, ac, sc, pcols, cmpPath); err != nil {
			return fmt.Errorf("scan %q row group %d: %w", p, g, err)
		}
	}
	return nil
}

func (s *scanner) charge(lf *lakeFile, g, col int) error {
	_, b := lf.stats(g, col)
	s.st.bytes += b
	if s.st.bytes > s.req.maxBytes {
		return limitErr("the query would read more than %d bytes of lake data (query limit max_bytes_scanned); narrow the time range or add a service filter", s.req.maxBytes)
	}
	return nil
}

func (s *scanner) group(lf *lakeFile, g int, rg parquet.RowGroup, n, gbase int64, fi int32,
	tc, ac, sc int, pcols [][]int, cmpPath int) error {
	req := s.req
	s.st.rows += n
	if s.st.rows > req.maxRows {
		return limitErr("the query would scan more than %d rows (query limit max_rows_scanned); narrow the time range or add a service filter", req.maxRows)
	}
	ccs := rg.ColumnChunks()
	s.match = resize(s.match, int(n))
	s.times = resize(s.times, int(n))
	if err := s.charge(lf, g, tc); err != nil {
		return err
	}
	missing := false
	err := eachValue(ccs[tc], s.buf, func(off int, vals []parquet.Value) error {
		for i, v := range vals {
			if v.IsNull() {
				s.times[off+i] = math.MinInt64
				missing = true
			} else {
				s.times[off+i] = v.Int64()
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read %s: %w", req.timeCol, err)
	}
	if missing && ac >= 0 {
		if err := s.charge(lf, g, ac); err != nil {
			return err
		}
		err := eachValue(ccs[ac], s.buf, func(off int, vals []parquet.Value) error {
			for i, v := range vals {
				if s.times[off+i] == math.MinInt64 && !v.IsNull() {
					s.times[off+i] = v.Int64()
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("read %s: %w", req.altTimeCol, err)
		}
	}
	any := false
	for i, t := range s.times {
		ok := t != math.MinInt64 && t >= req.start && t < req.end
		if ok && req.after != nil {
			ok = t < req.after.t || (t == req.after.t && (cmpPath > 0 || (cmpPath == 0 && gbase+int64(i) > req.after.row)))
		}
		if ok && s.top.full() {
			x := hit{t: t, file: fi, row: gbase + int64(i)}
			ok = before(&x, &s.top.h[0])
		}
		s.match[i] = ok
		any = any || ok
	}
	if any && sc >= 0 {
		if any, err = s.filterStr(lf, g, ccs[sc], func(b []byte) bool { return string(b) == req.service }); err != nil {
			return fmt.Errorf("read service_name: %w", err)
		}
	}
	for k := range req.preds {
		if !any {
			break
		}
		if any, err = s.filterPred(lf, g, ccs, &req.preds[k], pcols[k]); err != nil {
			return err
		}
	}
	if !any {
		return nil
	}
	for i, ok := range s.match {
		if ok {
			s.top.add(hit{t: s.times[i], file: fi, rg: int32(g), row: gbase + int64(i), rgr: int64(i)})
		}
	}
	return nil
}

// filterStr keeps the matching rows whose value of a string column is
// non-null and satisfies f.
func (s *scanner) filterStr(lf *lakeFile, g int, cc parquet.ColumnChunk, f func([]byte) bool) (bool, error) {
	if err := s.charge(lf, g, cc.Column()); err != nil {
		return false, err
	}
	any := false
	err := eachValue(cc, s.buf, func(off int, vals []parquet.Value) error {
		m := s.match[off : off+len(vals)]
		for i, v := range vals {
			if m[i] {
				m[i] = !v.IsNull() && f(v.ByteArray())
				any = any || m[i]
			}
		}
		return nil
	})
	return any, err
}

func (s *scanner) filterPred(lf *lakeFile, g int, ccs []parquet.ColumnChunk, pr *pred, cols []int) (bool, error) {
	switch pr.kind {
	case predStrEq:
		return s.filterStr(lf, g, ccs[cols[0]], func(b []byte) bool { return string(b) == pr.s })
	case predSubstr:
		needle := []byte(pr.s)
		return s.filterStr(lf, g, ccs[cols[0]], func(b []byte) bool { return bytes.Contains(b, needle) })
	case predIntRange:
		cc := ccs[cols[0]]
		if err := s.charge(lf, g, cc.Column()); err != nil {
			return false, err
		}
		any := false
		err := eachValue(cc, s.buf, func(off int, vals []parquet.Value) error {
			m := s.match[off : off+len(vals)]
			for i, v := range vals {
				if m[i] {
					x := v.Int64()
					if v.Kind() == parquet.Int32 {
						x = int64(v.Int32())
					}
					m[i] = !v.IsNull() && x >= pr.lo && x <= pr.hi
					any = any || m[i]
				}
			}
			return nil
		})
		return any, err
	}
	// Attributes: a row matches when any of the key's typed columns does.
	s.hitv = resize(s.hitv, len(s.match))
	clear(s.hitv)
	eq := newTypedEq(pr.s)
	for _, c := range cols {
		ci := &lf.cols[c]
		if ci.ovf {
			if err := s.charge(lf, g, c); err != nil {
				return false, err
			}
			if err := s.filterOverflow(ccs[c], pr, &eq); err != nil {
				return false, fmt.Errorf("read %s: %w", ci.name, err)
			}
			continue
		}
		if ci.name == format.ColServiceName {
			ci = &colInfo{name: ci.name, vt: vtString}
		}
		if pr.kind == predAttr && !eq.possible(ci.vt) {
			continue
		}
		if err := s.charge(lf, g, c); err != nil {
			return false, err
		}
		if pr.kind == predAttrRe && s.reMem == nil {
			s.reMem = map[string]bool{}
		}
		err := eachValue(ccs[c], s.buf, func(off int, vals []parquet.Value) error {
			m, hv := s.match[off:off+len(vals)], s.hitv[off:off+len(vals)]
			for i, v := range vals {
				if !m[i] || hv[i] || v.IsNull() {
					continue
				}
				if pr.kind == predAttr {
					hv[i] = eq.match(ci.vt, v)
					continue
				}
				s.tmp = appendPlain(s.tmp[:0], ci.vt, v)
				r, ok := s.reMem[string(s.tmp)]
				if !ok {
					r = pr.re.Match(s.tmp)
					if len(s.reMem) < 1<<16 {
						s.reMem[string(s.tmp)] = r
					}
				}
				hv[i] = r
			}
			return nil
		})
		if err != nil {
			return false, fmt.Errorf("read %s: %w", ci.name, err)
		}
	}
	clear(s.reMem)
	any := false
	for i := range s.match {
		s.match[i] = s.match[i] && s.hitv[i]
		any = any || s.match[i]
	}
	return any, nil
}

// typedEq compares attribute values of any type with one parameter value.
type typedEq struct {
	s      string
	i      int64
	iOK    bool
	f      float64
	fOK    bool
	b, bOK bool
}

func newTypedEq(s string) typedEq {
	e := typedEq{s: s}
	e.i, e.iOK = parseInt(s)
	f, err := strconv.ParseFloat(s, 64)
	e.f, e.fOK = f, err == nil
	b, err := strconv.ParseBool(s)
	e.b, e.bOK = b, err == nil && (s == "true" || s == "false")
	return e
}

func parseInt(s string) (int64, bool) {
	i, err := strconv.ParseInt(s, 10, 64)
	return i, err == nil
}

func (e *typedEq) possible(vt valueType) bool {
	switch vt {
	case vtString, vtArray, vtMap:
		return true
	case vtInt:
		return e.iOK
	case vtDouble:
		return e.fOK
	case vtBool:
		return e.bOK
	}
	return false
}

func (e *typedEq) match(vt valueType, v parquet.Value) bool {
	switch vt {
	case vtString, vtArray, vtMap:
		return string(v.ByteArray()) == e.s
	case vtInt:
		return v.Int64() == e.i
	case vtDouble:
		return v.Double() == e.f
	case vtBool:
		return v.Boolean() == e.b
	}
	return false
}

// appendPlain appends the text a regexp sees for an attribute value.
func appendPlain(dst []byte, vt valueType, v parquet.Value) []byte {
	switch vt {
	case vtInt:
		return strconv.AppendInt(dst, v.Int64(), 10)
	case vtDouble:
		return strconv.AppendFloat(dst, v.Double(), 'g', -1, 64)
	case vtBool:
		return strconv.AppendBool(dst, v.Boolean())
	case vtEmpty:
		return dst
	}
	return append(dst, v.ByteArray()...)
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
