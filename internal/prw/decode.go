package prw

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/snappy"

	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/unsafex"
)

// ScopeName is the instrumentation scope of every point decoded here, so
// that SQL over the lake tells remote-write data from OTLP.
const ScopeName = "sluice/prometheus-remote-write"

// Metadata attribute keys on a metric decoded from remote write.
const (
	AttrType = "prometheus.type"
	AttrUnit = "prometheus.unit"
)

// Stats counts what one Decode call appended and dropped.
type Stats struct {
	Series     int // series with at least one point appended
	Samples    int // float samples appended
	Histograms int // native histogram samples appended
	Exemplars  int // exemplars kept
	Dropped    int // series dropped for invalid data
	// Unsorted counts series whose label names arrived out of order (the
	// batch has them sorted; the request's bytes do not).
	Unsorted int
	// StartsIgnored counts 2.0 start (created) timestamps not before
	// their sample's or histogram's time, stored as none (startOf).
	StartsIgnored int
}

type label struct {
	name, value signal.Str
	ref         uint32 // 2.0: the value's symbol reference + 1 (0 in 1.0)
	nref        uint32 // 2.0: the name's symbol reference + 1 (0 in 1.0)
}

// descKinds are the metric types one remote-write name can map to.
const (
	descGauge = iota
	descExp
	descExplicit
	numDescKinds
)

type span struct {
	offset int32
	length uint32
}

// hist is one native histogram message, decoded to validate it before
// anything of its series is appended.
type hist struct {
	isFloat            bool
	countInt           uint64
	countFloat         float64
	sum                float64
	schema             int32
	zeroThreshold      float64
	zeroInt            uint64
	zeroFloat          float64
	negSpans, posSpans []span
	negDeltas          []int64
	posDeltas          []int64
	negCounts          []float64
	posCounts          []float64
	custom             []float64
	ts, start          int64
	hint               uint64 // reset_hint (14)
	// dense bucket counts (integer or float) and OTLP offsets, filled by
	// checkHist
	pos, neg       []uint64
	posF, negF     []float64
	posOff, negOff int32
}

func (h *hist) reset() {
	*h = hist{negSpans: h.negSpans[:0], posSpans: h.posSpans[:0], negDeltas: h.negDeltas[:0], posDeltas: h.posDeltas[:0],
		negCounts: h.negCounts[:0], posCounts: h.posCounts[:0], custom: h.custom[:0], pos: h.pos[:0], neg: h.neg[:0],
		posF: h.posF[:0], negF: h.negF[:0]}
}

// MaxBuckets bounds the dense buckets of one side of a native histogram
// (spans with huge gaps would otherwise expand without limit).
const MaxBuckets = 1 << 15

// Decoder decodes remote-write requests into metric batches. Its scratch
// space is reused across calls; use one per goroutine.
type Decoder struct {
	// MaxTime is the latest sample or histogram time (ms) accepted
	// (times.go); 0 accepts every time the lake stores.
	MaxTime int64

	m        *signal.Metrics
	c        *signal.Common
	b        []byte // the request's copy in the arena, from index 0 of the arena
	res, sc  uint32
	labels   []label
	exLabels []label
	names    map[string]uint32      // name -> index in descPool, per call
	descPool [][numDescKinds]uint32 // desc index + 1 per kind
	famHash  []uint64               // xxhash of each descPool family's name
	// sid is the series id of the series being appended (seriesID): its
	// points get it, so that no pass over the batch hashes them again.
	sid      uint64
	prevKeys []keyCache
	// The label names (sorted, unique) of the last series attrs appended,
	// and where __name__ is among them; prevOK says they are set (per call).
	prevNames    []signal.Str
	prevNRefs    []uint32    // 2.0: their symbol references + 1
	prevKnown    []knownName // 1.0: their framing words (newKnownName)
	prevNameIdx  int
	prevOK       bool
	same, strict bool // checkLabels: names as prevNames; names strictly increasing
	// The family of the last metric name looked up (per call).
	lastName  signal.Str
	lastFam   uint32
	lastFamOK bool
	// famMemo finds the family of a 1.0 metric name by its words (family);
	// call numbers the calls, so that entries of earlier calls are stale.
	famMemo [2 << famMemoBits]famSlot // 1 << famMemoBits sets of two
	call    uint32
	symbols []signal.Str
	symDesc []uint32 // 2.0: symbol -> index in descPool + 1, per call
	symSet  []uint32 // 2.0: the symbols whose symDesc (and metaAt) a call set
	spans   [][3]int // 2.0: the timeseries fields' [start, end) and length's offset, per call
	// The float samples of the series being appended (bufSample).
	sTime, sStart []int64
	sVal          []uint64
	nser          uint32   // series appended in this call (attrs)
	metaAt        []uint32 // 2.0: name symbol -> len(Descs)+1 when its metadata was last applied, per call (set only where symDesc is)
	h             hist
	ex            []byte
	meta          [][2]int // 1.0 metadata messages [start, end)
	// metaOnly is the metadata of the 2.0 series that had no point
	// (MetadataOnlyV1)
	metaOnly []byte
	key      []byte
	st       Stats
	perr     PartialError
	version  string
	// 2.0: some symbol of the request is not valid UTF-8 (per call).
	badUTF8 bool
	// ids is the series id memo (idmemo.go); idKey and idLab the key and
	// label fields' end of the series being decoded (idKey 0: none).
	ids   idBlock
	idKey uint64
	idLab int
	// symKey is the memo hash of each symbol (2.0, symbolKey), set per
	// call when the call uses the memo.
	symKey []uint64
	// preLabels holds the labels of the block of 2.0 series whose keys
	// the memo block holds (preV2).
	preLabels []label
}

// keyCache is what attrs keeps of the label at one position (among the
// labels other than __name__) of the last series it appended: its key and
// that key's hash, and the value and its term in the set hash, which the
// next series reuses when its value at that position is the same.
type keyCache struct {
	name  signal.Str
	val   signal.Str
	kh    uint64 // xxhash of the key
	term  uint64 // signal.SeriesPair of the key and val
	id    signal.KeyID
	nref  uint32 // 2.0: the name's symbol reference + 1
	vref  uint32 // 2.0: the value's symbol reference + 1
	valid bool   // name, id and kh are set
	// miss counts the value comparisons that failed in a row (saturating
	// below missNoTerm); missNoTerm: val, vref and term are not set.
	miss uint8
}

// reset prepares a call: dst's arena already holds the request at base.
func (d *Decoder) begin(dst *signal.Metrics, version string) {
	d.m, d.c = dst, &dst.Common
	d.st = Stats{}
	d.metaOnly = d.metaOnly[:0]
	d.perr = PartialError{}
	d.version = version
	if d.names == nil {
		d.names = make(map[string]uint32, 64)
	}
	clear(d.names)
	d.descPool, d.famHash = d.descPool[:0], d.famHash[:0]
	d.prevKeys = d.prevKeys[:0]
	d.prevNames, d.prevNRefs, d.prevKnown, d.prevOK = d.prevNames[:0], d.prevNRefs[:0], d.prevKnown[:0], false
	d.nser = 0
	d.lastFamOK = false
	if d.call++; d.call == 0 { // wrapped: entries numbered 1 could look current
		clear(d.famMemo[:])
		d.call = 1
	}
	d.meta = d.meta[:0]
	d.ids.begin()
	d.idKey = 0
}

// end drops references into the arena, so the decoder pins no batch.
func (d *Decoder) end() {
	clear(d.names)
	d.m, d.c, d.b = nil, nil, nil
}

type mark struct {
	n, descs, attrs, msgs, buf, u64, f64, res, scopes int
}

func (d *Decoder) mark() mark {
	m := d.m
	return mark{m.Len(), len(m.Descs), m.Attrs.Len(), len(m.Msgs), len(m.Buf), len(m.U64), len(m.F64), len(m.Resources), len(m.Scopes)}
}

func (d *Decoder) restore(k mark) {
	m := d.m
	truncate(m, k.n)
	m.Descs = m.Descs[:k.descs]
	m.Attrs.Key, m.Attrs.Type, m.Attrs.Val = m.Attrs.Key[:k.attrs], m.Attrs.Type[:k.attrs], m.Attrs.Val[:k.attrs]
	m.Msgs = m.Msgs[:k.msgs]
	m.Buf = m.Buf[:k.buf]
	m.U64, m.F64 = m.U64[:k.u64], m.F64[:k.f64]
	m.Resources, m.Scopes = m.Resources[:k.res], m.Scopes[:k.scopes]
}

func truncate(m *signal.Metrics, n int) {
	m.Desc, m.Resource, m.Scope = m.Desc[:n], m.Resource[:n], m.Scope[:n]
	m.StartTime, m.Time, m.Attr, m.Flags = m.StartTime[:n], m.Time[:n], m.Attr[:n], m.Flags[:n]
	m.Exemplars, m.SeriesID, m.NumberType, m.Number = m.Exemplars[:n], m.SeriesID[:n], m.NumberType[:n], m.Number[:n]
	m.Count, m.Sum, m.Min, m.Max, m.Has = m.Count[:n], m.Sum[:n], m.Min[:n], m.Max[:n], m.Has[:n]
	m.BucketCounts, m.Bounds, m.Scale = m.BucketCounts[:n], m.Bounds[:n], m.Scale[:n]
	m.ZeroCount, m.ZeroThreshold = m.ZeroCount[:n], m.ZeroThreshold[:n]
	m.PosOffset, m.PosCounts, m.NegOffset, m.NegCounts = m.PosOffset[:n], m.PosCounts[:n], m.NegOffset[:n], m.NegCounts[:n]
	m.Quantiles, m.FloatCounts = m.Quantiles[:n], m.FloatCounts[:n]
}

// start copies body into the arena and appends the resource and scope.
func (d *Decoder) start(body []byte) int {
	c := d.c
	scopeName := c.AppendString(ScopeName)
	ver := c.AppendString(d.version)
	a := uint32(c.Attrs.Len())
	c.Resources = append(c.Resources, signal.Resource{Attrs: signal.Range{Start: a, End: a}})
	c.Scopes = append(c.Scopes, signal.Scope{Name: scopeName, Version: ver, Attrs: signal.Range{Start: a, End: a}})
	d.res, d.sc = uint32(len(c.Resources)-1), uint32(len(c.Scopes)-1)
	base := len(c.Buf)
	c.Buf = append(c.Buf, body...)
	d.b = c.Buf
	return base
}

func (d *Decoder) finish(k mark) (Stats, error) {
	st := d.st
	if d.perr.Dropped > 0 {
		pe := d.perr
		pe.Problems = slices.Clone(pe.Problems)
		d.perr.Problems = d.perr.Problems[:0]
		return st, &pe
	}
	return st, nil
}

func (d *Decoder) drop(format string, a ...any) {
	d.st.Dropped++
	d.perr.Dropped++
	if len(d.perr.Problems) < maxProblems {
		d.perr.Problems = append(d.perr.Problems, fmt.Sprintf(format, a...))
	}
}

func (d *Decoder) str(s signal.Str) []byte {
	o := s.Off()
	return d.b[o : o+s.Len()]
}

// maxSeriesString bounds how much of a series an error message quotes: a
// hostile series of many long labels must not make a response of megabytes.
const maxSeriesString = 1024

// seriesString names the series being decoded in an error message. A label
// name that is not valid UTF-8 is quoted, as values are, so the message
// itself stays valid UTF-8.
func (d *Decoder) seriesString() string {
	var sb strings.Builder
	sb.WriteByte('{')
	for i, l := range d.labels {
		if sb.Len() > maxSeriesString {
			fmt.Fprintf(&sb, ", ... %d more labels", len(d.labels)-i)
			break
		}
		if i > 0 {
			sb.WriteString(", ")
		}
		if name := d.str(l.name); utf8.Valid(name) {
			sb.Write(name)
		} else {
			sb.WriteString(strconv.Quote(string(name)))
		}
		sb.WriteByte('=')
		v := d.str(l.value)
		if len(v) > maxSeriesString {
			sb.WriteString(strconv.Quote(string(v[:maxSeriesString])))
			fmt.Fprintf(&sb, "... (%d bytes)", len(v))
			continue
		}
		sb.WriteString(strconv.Quote(string(v)))
	}
	sb.WriteByte('}')
	return sb.String()
}

// checkLabels sorts d.labels by name and validates them. It returns the
// index of __name__, or a problem. 2.0 checks UTF-8 once per symbol
// instead, and 1.0 once per series when its labels are ASCII (checkUTF8
// false).
//
// sameNames says the caller found the names equal to the previous
// series' already (1.0 matches them as it reads them).
func (d *Decoder) checkLabels(checkUTF8, sameNames bool) (int, string) {
	ls := d.labels
	d.same, d.strict = false, false
	// Series of one request mostly have the label names of the series
	// before them: then they are sorted and unique as those were, and
	// attrs reuses their key ids (one comparison per label in all).
	if d.prevOK && len(ls) == len(d.prevNames) {
		same := true
		pn, pr := d.prevNames[:len(ls)], d.prevNRefs[:len(ls)]
		b := d.b
		if sameNames || sameRefs(ls, pr) {
			pn = pn[:0] // nothing left to compare
		}
		for i := range pn {
			if r := ls[i].nref; r != 0 && r == pr[i] {
				continue // 2.0: the same symbol
			}
			// d.eqStr, inline: a call per label costs its spills.
			x, y := ls[i].name, pn[i]
			n := x.Len()
			if n != y.Len() {
				same = false
				break
			}
			xo, yo := x.Off(), y.Off()
			if n >= 8 && n <= 16 {
				if binary.LittleEndian.Uint64(b[xo:xo+8]) == binary.LittleEndian.Uint64(b[yo:yo+8]) &&
					binary.LittleEndian.Uint64(b[xo+n-8:xo+n]) == binary.LittleEndian.Uint64(b[yo+n-8:yo+n]) {
					continue
				}
			} else if n < 8 && xo+8 <= len(b) && yo+8 <= len(b) {
				if (binary.LittleEndian.Uint64(b[xo:xo+8])^binary.LittleEndian.Uint64(b[yo:yo+8]))&(^uint64(0)>>(64-8*uint(n))) == 0 {
					continue
				}
			} else if bytes.Equal(b[xo:xo+n], b[yo:yo+n]) {
				continue
			}
			same = false
			break
		}
		if same {
			if checkUTF8 {
				for _, l := range ls {
					if !utf8.Valid(d.str(l.value)) {
						return -1, fmt.Sprintf("label %q: not valid UTF-8", d.str(l.name))
					}
				}
			}
			if ls[d.prevNameIdx].value.Len() == 0 {
				return -1, "empty __name__"
			}
			d.same, d.strict = true, true
			return d.prevNameIdx, ""
		}
	}
	// Fast path, the usual case: names strictly increasing (sorted, hence
	// unique; only the first can be empty), one comparison per pair.
	nameIdx := -1
	strict := true
	var prev []byte
	for i := range ls {
		n := d.str(ls[i].name)
		if i > 0 && bytes.Compare(prev, n) >= 0 {
			strict = false
			break
		}
		if len(n) == len(nameLabel) && string(n) == nameLabel {
			nameIdx = i
		}
		prev = n
	}
	d.strict = strict
	if !strict {
		d.st.Unsorted++
		slices.SortStableFunc(ls, func(a, b label) int { return bytes.Compare(d.str(a.name), d.str(b.name)) })
		nameIdx = -1
		for i, l := range ls {
			n := d.str(l.name)
			if i > 0 && bytes.Equal(n, d.str(ls[i-1].name)) {
				return -1, fmt.Sprintf("duplicate label name %q", n)
			}
			if string(n) == nameLabel {
				nameIdx = i
			}
		}
	}
	if len(ls) > 0 && ls[0].name.Len() == 0 {
		return -1, "empty label name"
	}
	if checkUTF8 {
		for _, l := range ls {
			if n := d.str(l.name); !utf8.Valid(n) || !utf8.Valid(d.str(l.value)) {
				return -1, fmt.Sprintf("label %q: not valid UTF-8", n)
			}
		}
	}
	if nameIdx < 0 {
		return -1, "no __name__ label"
	}
	if ls[nameIdx].value.Len() == 0 {
		return -1, "empty __name__"
	}
	return nameIdx, ""
}

const nameLabel = "__name__"

// sameRefs says every label of ls names the symbol at its place in pr
// (2.0: the previous series' names by reference), in a leaf loop of one
// compare a label; false for 1.0's labels (no references).
func sameRefs(ls []label, pr []uint32) bool {
	pr = pr[:len(ls)]
	for i := range ls {
		if r := ls[i].nref; r == 0 || r != pr[i] {
			return false
		}
	}
	return true
}

// dropEmptyValues removes the labels other than __name__ whose value is
// empty and reports whether there were any. Prometheus's data model has
// no such label (its TSDB drops them on append, labels.WithoutEmpty):
// {a=""} is the series without a, and PromQL's a="" matches both.
// A label named as another one stays, so that checkLabels refuses the
// duplicate as Prometheus does.
func (d *Decoder) dropEmptyValues() bool {
	ls := d.labels
	// The usual series has none: find the first empty value in a loop
	// that only tests lengths, and move nothing before it.
	k := 0
	for k < len(ls) && ls[k].value.Len() != 0 {
		k++
	}
	if k == len(ls) {
		return false
	}
	for i := k; i < len(ls); i++ {
		if ls[i].value.Len() == 0 && ls[i].name.Len() != 0 && string(d.str(ls[i].name)) != nameLabel && !d.named(i) {
			continue
		}
		if k != i {
			ls[k] = ls[i]
		}
		k++
	}
	d.labels = ls[:k]
	return k != len(ls)
}

// named reports whether another of d.labels has the name of label i.
func (d *Decoder) named(i int) bool {
	n := d.str(d.labels[i].name)
	for j, l := range d.labels {
		if j != i && bytes.Equal(d.str(l.name), n) {
			return true
		}
	}
	return false
}

// attrs appends the series' labels other than __name__ as attributes,
// into slots reserved at once, and returns them with their set hash
// (signal's order-free sum of per-pair terms, as ComputeSeriesIDs sums
// it). Series of one request mostly share their label names in the same
// order and many of their values (job, instance, ...): the key of the
// previous series' label at the same position is reused when the name is
// the same (checkLabels compared them all, when same), and its term when
// the value is too, without hashing it again. A position whose value
// keeps changing (an id, a per-series value) stops being compared, save
// every 16th series.
//
// hash false fills the slots without the set hash (a series whose id the
// memo holds): the cache's values and terms are left as they were, so
// that they still describe each other.
func (d *Decoder) attrs(nameIdx int, hash bool) (signal.Range, uint64) {
	c := d.c
	start := uint32(c.Attrs.Len())
	n := len(d.labels) - 1
	if len(d.prevKeys) < n {
		d.prevKeys = append(d.prevKeys, make([]keyCache, n-len(d.prevKeys))...)
	}
	keys, types, vals := c.Attrs.Extend(n)
	retry := d.nser&15 == 0
	d.nser++
	// The labels before and after __name__, each a run whose slots line
	// up with the cache's and the attributes' (no bounds checks inside).
	ls, pk := d.labels, d.prevKeys
	if !d.same {
		d.keyRun(ls[:nameIdx], pk[:nameIdx])
		d.keyRun(ls[nameIdx+1:], pk[nameIdx:n])
	}
	var set uint64
	if hash {
		set = d.attrRun(ls[:nameIdx], pk[:nameIdx], keys[:nameIdx], types[:nameIdx], vals[:nameIdx], retry)
		set += d.attrRun(ls[nameIdx+1:], pk[nameIdx:n], keys[nameIdx:], types[nameIdx:], vals[nameIdx:], retry)
	} else {
		attrFill(ls[:nameIdx], pk[:nameIdx], keys[:nameIdx], types[:nameIdx], vals[:nameIdx])
		attrFill(ls[nameIdx+1:], pk[nameIdx:n], keys[nameIdx:], types[nameIdx:], vals[nameIdx:])
	}
	// The names checkLabels compares the next series with: set here, with
	// prevKeys, so that both always describe the same series.
	if !d.same {
		d.prevOK = d.strict
		d.prevNameIdx = nameIdx
		d.prevNames, d.prevNRefs, d.prevKnown = d.prevNames[:0], d.prevNRefs[:0], d.prevKnown[:0]
		for _, l := range d.labels {
			d.prevNames = append(d.prevNames, l.name)
			d.prevNRefs = append(d.prevNRefs, l.nref)
			if l.nref == 0 { // 1.0: the words its label loop matches
				d.prevKnown = append(d.prevKnown, newKnownName(d.str(l.name)))
			}
		}
	}
	return signal.Range{Start: start, End: uint32(c.Attrs.Len())}, set
}

// missNoTerm is keyCache.miss for an entry without a value term.
const missNoTerm = 255

// keyRun sets the key of each position of the cache pk to the name of the
// label ls at that position, looking the key up when it is not the
// position's key already (a new key has no value term). attrs calls it
// only when the names are not the previous series' (d.same), apart from
// attrRun, whose loop then has one call in it (hashValue) and fewer
// registers to reload after it.
func (d *Decoder) keyRun(ls []label, pk []keyCache) {
	pk = pk[:len(ls)]
	for k := range ls {
		l := &ls[k]
		e := &pk[k]
		if !(e.valid && (l.nref != 0 && l.nref == e.nref || d.eqStr(e.name, l.name))) {
			id := d.c.Keys.ID(d.str(l.name))
			e.id, e.kh, e.valid, e.miss = id, d.c.Keys.Hash(id), true, missNoTerm
		}
		e.name, e.nref = l.name, l.nref
	}
}

// attrRun fills the attribute slots of the labels ls from the cache pk of
// the same positions (keyRun set their keys) and returns the sum of their
// terms.
func (d *Decoder) attrRun(ls []label, pk []keyCache, keys []signal.KeyID, types []signal.ValueType, vals []uint64, retry bool) uint64 {
	pk, keys, types, vals = pk[:len(ls)], keys[:len(ls)], types[:len(ls)], vals[:len(ls)]
	b := d.b
	var set uint64
	for k := range ls {
		l := &ls[k]
		e := &pk[k]
		keys[k], types[k], vals[k] = e.id, signal.ValueString, uint64(l.value)
		if m := e.miss; m < 4 || retry && m != missNoTerm {
			// d.eqStr with its 8-16 byte case inline
			x, y := l.value, e.val
			eq := l.ref != 0 && l.ref == e.vref
			if n := x.Len(); !eq && n == y.Len() {
				if xo, yo := x.Off(), y.Off(); n >= 8 && n <= 16 {
					eq = binary.LittleEndian.Uint64(b[xo:xo+8]) == binary.LittleEndian.Uint64(b[yo:yo+8]) &&
						binary.LittleEndian.Uint64(b[xo+n-8:xo+n]) == binary.LittleEndian.Uint64(b[yo+n-8:yo+n])
				} else {
					eq = d.eqStr(x, y)
				}
			}
			if eq {
				e.miss = 0
				e.val, e.vref = l.value, l.ref
				set += e.term
				continue
			}
			if m < missNoTerm-1 {
				e.miss = m + 1
			}
		} else if m == missNoTerm {
			e.miss = 0
		}
		vo := l.value.Off()
		e.term = signal.SeriesPair(e.kh, signal.ValueString, hashValue(b[vo:vo+l.value.Len()]))
		e.val, e.vref = l.value, l.ref
		set += e.term
	}
	return set
}

// attrFill is attrRun without the set hash: keys from the cache pk, the
// values from ls.
func attrFill(ls []label, pk []keyCache, keys []signal.KeyID, types []signal.ValueType, vals []uint64) {
	pk, keys, types, vals = pk[:len(ls)], keys[:len(ls)], types[:len(ls)], vals[:len(ls)]
	for k := range ls {
		keys[k], types[k], vals[k] = pk[k].id, signal.ValueString, uint64(ls[k].value)
	}
}

// eqStr says two strings of the arena hold the same bytes; strings of up
// to 16 bytes are compared with two word loads each, not a call.
func (d *Decoder) eqStr(x, y signal.Str) bool {
	n := x.Len()
	if n != y.Len() {
		return false
	}
	b := d.b
	xo, yo := x.Off(), y.Off()
	switch {
	case n == 0:
		return true
	case n < 8 && xo+8 <= len(b) && yo+8 <= len(b):
		mask := ^uint64(0) >> (64 - 8*uint(n))
		return (binary.LittleEndian.Uint64(b[xo:xo+8])^binary.LittleEndian.Uint64(b[yo:yo+8]))&mask == 0
	case n >= 8 && n <= 16:
		return binary.LittleEndian.Uint64(b[xo:xo+8]) == binary.LittleEndian.Uint64(b[yo:yo+8]) &&
			binary.LittleEndian.Uint64(b[xo+n-8:xo+n]) == binary.LittleEndian.Uint64(b[yo+n-8:yo+n])
	}
	return bytes.Equal(b[xo:xo+n], b[yo:yo+n])
}

// family returns the index in descPool of metric name, adding it on first
// sight in this call. ref (2.0: the name's symbol + 1) skips the hashing
// for a name seen before.
func (d *Decoder) family(name signal.Str, ref uint32) uint32 {
	if ref != 0 && d.symDesc[ref-1] != 0 {
		return d.symDesc[ref-1] - 1
	}
	// 1.0: a name of 8 bytes or more is looked up by its length and its
	// first and last words in a small table (famMemo) before the map: a
	// map lookup hashes the whole name and probes, several times the
	// instructions, and the names of a request's series alternate.
	if n, o := name.Len(), name.Off(); ref == 0 && n >= 8 && o+n <= len(d.b) {
		w0, w1 := binary.LittleEndian.Uint64(d.b[o:o+8]), binary.LittleEndian.Uint64(d.b[o+n-8:o+n])
		// Two ways a set: 50 names in 256 sets of one slot lost about a
		// quarter of their lookups to collisions, to the map.
		set := (*[2]famSlot)(d.famMemo[((w0^bits.RotateLeft64(w1, 29)^uint64(n))*famMemoMul)>>(64-famMemoBits)*2:])
		for k := range set {
			if sl := &set[k]; sl.call == d.call && sl.w0 == w0 && sl.w1 == w1 && sl.name.Len() == n &&
				(n <= 16 || bytes.Equal(d.str(sl.name), d.str(name))) {
				// (of 8 to 16 bytes, the two words are all of them)
				return sl.fam
			}
		}
		x := d.familyMap(name, 0)
		// The new name first; the one there, if of this call, second.
		if set[0].call == d.call {
			set[1] = set[0]
		}
		set[0] = famSlot{w0: w0, w1: w1, name: name, fam: x, call: d.call}
		return x
	}
	// 1.0: series of one family often follow each other (a target's
	// scrape order): compare with the last name before hashing.
	if ref == 0 && d.lastFamOK && bytes.Equal(d.str(d.lastName), d.str(name)) {
		return d.lastFam
	}
	return d.familyMap(name, ref)
}

// famSlot is an entry of Decoder.famMemo: a metric name's first and last
// words, the name, and its family, valid in the call numbered call.
type famSlot struct {
	w0, w1 uint64
	name   signal.Str
	fam    uint32
	call   uint32
}

const (
	famMemoBits = 8
	famMemoMul  = 0x9E3779B97F4A7C15
)

// familyMap is family's lookup in the names map.
func (d *Decoder) familyMap(name signal.Str, ref uint32) uint32 {
	key := unsafex.String(d.str(name)) // valid while the arena copy lives: the map is cleared at end
	x, ok := d.names[key]
	if !ok {
		x = uint32(len(d.descPool))
		d.descPool = append(d.descPool, [numDescKinds]uint32{})
		d.famHash = append(d.famHash, xxhash.Sum64(d.str(name)))
		d.names[key] = x
	}
	if ref != 0 {
		d.symDesc[ref-1] = x + 1
		d.symSet = append(d.symSet, ref-1)
	}
	d.lastName, d.lastFam, d.lastFamOK = name, x, true
	return x
}

// desc returns the descriptor of metric name (a Str of the arena) for a
// kind, adding it on first sight in this call.
func (d *Decoder) desc(name signal.Str, kind int) uint32 { return d.descRef(name, 0, kind) }

func (d *Decoder) descRef(name signal.Str, ref uint32, kind int) uint32 {
	return d.descOf(d.family(name, ref), name, kind)
}

// seriesAttrs appends the attributes of the series in d.labels (checked,
// with __name__ at nameIdx, its value name, ref as for family), sets its
// id d.sid, and returns the attributes and the name's family. key is the
// series' memo key (0: none): the id the memo holds under it, or the id
// computed and then remembered under it.
func (d *Decoder) seriesAttrs(nameIdx int, name signal.Str, ref uint32, key uint64) (signal.Range, uint32) {
	if key != 0 {
		if sid, ok := d.ids.lookup(key); ok {
			attr, _ := d.attrs(nameIdx, false)
			d.sid = sid
			return attr, d.family(name, ref)
		}
	}
	attr, set := d.attrs(nameIdx, true)
	fam := d.seriesID(name, ref, set)
	if key != 0 {
		d.ids.memo.insert(key, d.sid)
	}
	return attr, fam
}

// seriesID sets d.sid for the series of metric name (ref as for family)
// whose point attributes hash to set (attrs), and returns the name's
// family. The id is ComputeSeriesIDs's: remote write points have a
// resource without attributes.
func (d *Decoder) seriesID(name signal.Str, ref uint32, set uint64) uint32 {
	fam := d.family(name, ref)
	d.sid = signal.SeriesID(d.famHash[fam], seriesResHash, set)
	return fam
}

// descOf is descRef for the family fam of name.
func (d *Decoder) descOf(fam uint32, name signal.Str, kind int) uint32 {
	e := &d.descPool[fam]
	if e[kind] != 0 {
		return e[kind] - 1
	}
	md := signal.MetricDesc{Name: name, Type: signal.MetricGauge}
	switch kind {
	case descExp:
		md.Type, md.Temporality = signal.MetricExponentialHistogram, signal.TemporalityCumulative
	case descExplicit:
		md.Type, md.Temporality = signal.MetricHistogram, signal.TemporalityCumulative
	}
	d.m.Descs = append(d.m.Descs, md)
	e[kind] = uint32(len(d.m.Descs))
	return e[kind] - 1
}

var typeNames = [...]string{"unknown", "counter", "gauge", "histogram", "gaugehistogram", "summary", "info", "stateset"}

// typeName is the Prometheus type name of a remote-write metadata type
// (1.0's MetricMetadata.type and 2.0's Metadata.type number them alike);
// "unknown" for a number past the known ones.
func typeName(typ uint64) string {
	if typ < uint64(len(typeNames)) {
		return typeNames[typ]
	}
	return "unknown"
}

// applyMetadata sets help, type and unit on every descriptor of name that
// has none yet.
func (d *Decoder) applyMetadata(e *[numDescKinds]uint32, typ uint64, help, unit []byte) {
	c := d.c
	for _, v := range e {
		if v == 0 {
			continue
		}
		md := &d.m.Descs[v-1]
		if md.Metadata.Len() > 0 || md.Description.Len() > 0 {
			continue
		}
		describe(c, md, typeName(typ), unsafex.String(help), unsafex.String(unit))
	}
}

// msToNs converts a millisecond timestamp; false when it is not one the
// lake stores (tsRange): nanoseconds past 2^63-1, or before 1970 (the
// pipeline refuses a negative time whole, as OTLP's times are unsigned;
// here it drops only its series).
func msToNs(ms int64) (int64, bool) {
	const lim = math.MaxInt64 / 1_000_000
	if ms > lim || ms < 0 {
		return 0, false
	}
	return ms * 1e6, true
}

// tsRange ends the message of a timestamp msToNs refuses.
const tsRange = " (sluice stores times from 1970-01-01 to 2262-04-11)"

// bufSample holds a float sample of the series being appended; the
// series' samples are appended together (flushSamples), column by column.
func (d *Decoder) bufSample(ts, start int64, v uint64) {
	d.sTime = append(d.sTime, ts)
	d.sStart = append(d.sStart, start)
	d.sVal = append(d.sVal, v)
}

func (d *Decoder) resetSamples() {
	d.sTime, d.sStart, d.sVal = d.sTime[:0], d.sStart[:0], d.sVal[:0]
}

// flushSamples appends the held samples as points of descriptor desc with
// attributes attr and the series id d.sid, and returns the index of the
// last one (-1: none held). Called before a histogram, it keeps the
// points in the request's order; before an exemplar, it leaves the empty
// exemplar ranges of the points before it where AppendPoint row by row
// put them (the series' exemplars all go to its last point:
// attachExemplars).
func (d *Decoder) flushSamples(desc uint32, attr signal.Range) int {
	n := len(d.sTime)
	if n == 0 {
		return -1
	}
	p := d.m.AppendSeriesPoints(desc, d.res, d.sc, attr, d.sid, d.sTime, d.sStart, d.sVal)
	d.st.Samples += n
	d.resetSamples()
	return p + n - 1
}

// parseHist decodes a Histogram message b[s:e] into d.h; v2 adds
// start_timestamp (17). Wire errors return a negative index.
func (d *Decoder) parseHist(b []byte, s, e int) int {
	h := &d.h
	h.reset()
	b = b[:e]
	for i := s; i < e; {
		num, wt, j := tag(b, i)
		if j < 0 {
			return -1
		}
		var v uint64
		switch {
		case wt == wtVarint && (num == 1 || num == 4 || num == 6 || num == 14 || num == 15 || num == 17):
			if v, j = uvarint(b, j); j < 0 {
				return -1
			}
			switch num {
			case 1:
				h.countInt, h.isFloat = v, false
			case 4:
				h.schema = int32(zigzag(v))
			case 6:
				h.zeroInt = v
			case 14:
				h.hint = v
			case 15:
				h.ts = int64(v)
			case 17:
				h.start = int64(v)
			}
		case wt == wtI64 && (num == 2 || num == 3 || num == 5 || num == 7):
			if v, j = fixed64(b, j); j < 0 {
				return -1
			}
			f := math.Float64frombits(v)
			switch num {
			case 2:
				h.countFloat, h.isFloat = f, true
			case 3:
				h.sum = f
			case 5:
				h.zeroThreshold = f
			case 7:
				h.zeroFloat, h.isFloat = f, true
			}
		case wt == wtLen && (num == 8 || num == 11):
			ss, se := lenField(b, j)
			if ss < 0 {
				return -1
			}
			var sp span
			for k := ss; k < se; {
				n2, w2, k2 := tag(b[:se], k)
				if k2 < 0 || w2 != wtVarint {
					if k2 >= 0 {
						if k2 = skip(b[:se], k2, w2); k2 >= 0 {
							k = k2
							continue
						}
					}
					return -1
				}
				x, k3 := uvarint(b[:se], k2)
				if k3 < 0 {
					return -1
				}
				switch n2 {
				case 1:
					sp.offset = int32(zigzag(x))
				case 2:
					if x > math.MaxUint32 {
						return -1
					}
					sp.length = uint32(x)
				}
				k = k3
			}
			if num == 8 {
				h.negSpans = append(h.negSpans, sp)
			} else {
				h.posSpans = append(h.posSpans, sp)
			}
			j = se
		case (num == 9 || num == 12) && (wt == wtLen || wt == wtVarint):
			dst := &h.posDeltas
			if num == 9 {
				dst = &h.negDeltas
			}
			if j = packedVarints(b, j, wt, func(x uint64) { *dst = append(*dst, zigzag(x)) }); j < 0 {
				return -1
			}
		case (num == 10 || num == 13 || num == 16) && (wt == wtLen || wt == wtI64):
			dst := &h.posCounts
			switch num {
			case 10:
				dst = &h.negCounts
			case 16:
				dst = &h.custom
			}
			if j = packedDoubles(b, j, wt, dst); j < 0 {
				return -1
			}
		case num <= 17 && num != 14:
			return -1 // a known field with the wrong wire type
		default:
			if j = skip(b, j, wt); j < 0 {
				return -1
			}
		}
		i = j
	}
	return e
}

func packedVarints(b []byte, j, wt int, f func(uint64)) int {
	if wt == wtVarint {
		x, k := uvarint(b, j)
		if k >= 0 {
			f(x)
		}
		return k
	}
	s, e := lenField(b, j)
	if s < 0 {
		return -1
	}
	for s < e {
		var x uint64
		if x, s = uvarint(b[:e], s); s < 0 {
			return -1
		}
		f(x)
	}
	return e
}

func packedDoubles(b []byte, j, wt int, dst *[]float64) int {
	if wt == wtI64 {
		x, k := fixed64(b, j)
		if k >= 0 {
			*dst = append(*dst, math.Float64frombits(x))
		}
		return k
	}
	s, e := lenField(b, j)
	if s < 0 || (e-s)%8 != 0 {
		return -1
	}
	for ; s < e; s += 8 {
		x, _ := fixed64(b, s)
		*dst = append(*dst, math.Float64frombits(x))
	}
	return e
}

// expandSide turns spans and deltas (or float counts) into dense counts
// starting at the first bucket's Prometheus index: integer counts into
// dst, float counts into dstF. It returns the first index, the dense
// counts, the integer counts' total and a problem.
func expandSide(dst []uint64, dstF []float64, spans []span, deltas []int64, counts []float64, isFloat bool, side string) (int32, []uint64, []float64, uint64, string) {
	dst, dstF = dst[:0], dstF[:0]
	n := 0
	for _, s := range spans {
		n += int(s.length)
	}
	have := len(deltas)
	if isFloat {
		have = len(counts)
	}
	if n != have {
		return 0, dst, dstF, 0, fmt.Sprintf("%s spans hold %d buckets but %d counts are given", side, n, have)
	}
	if n == 0 {
		return 0, dst, dstF, 0, ""
	}
	var first, idx int64
	var cur int64
	var total uint64
	k := 0
	for si, s := range spans {
		if si == 0 {
			idx, first = int64(s.offset), int64(s.offset)
		} else {
			if s.offset < 0 {
				return 0, dst, dstF, 0, fmt.Sprintf("%s span %d has a negative offset", side, si)
			}
			idx += int64(s.offset)
		}
		for range s.length {
			pos := idx - first
			if pos >= MaxBuckets {
				return 0, dst, dstF, 0, fmt.Sprintf("%s buckets span more than %d indexes", side, MaxBuckets)
			}
			if isFloat {
				for int64(len(dstF)) < pos {
					dstF = append(dstF, 0)
				}
				f := counts[k]
				if f < 0 { // NaN is a count, as Prometheus's FloatHistogram.Validate has it
					return 0, dst, dstF, 0, fmt.Sprintf("%s bucket %d has a negative count %v", side, k, f)
				}
				dstF = append(dstF, f)
			} else {
				for int64(len(dst)) < pos {
					dst = append(dst, 0)
				}
				cur += deltas[k]
				if cur < 0 {
					return 0, dst, dstF, 0, fmt.Sprintf("%s bucket %d has a negative count %d", side, k, cur)
				}
				dst = append(dst, uint64(cur))
				total += uint64(cur)
			}
			k++
			idx++
		}
	}
	return int32(first), dst, dstF, total, ""
}

// reduceDense merges dense buckets whose first has Prometheus index first
// into the buckets of a schema by shift lower (each 2^shift buckets into
// one, bucket i into ((i-1) >> shift) + 1), as Prometheus's remote-write
// handler reduces schemas 9..52 to 8 (histogram.ReduceResolution). It
// works in place: a bucket never moves up.
func reduceDense(first int32, counts []uint64, countsF []float64, isFloat bool, shift uint) (int32, []uint64, []float64) {
	t0 := (first-1)>>shift + 1
	n := len(counts)
	if isFloat {
		n = len(countsF)
	}
	last := int32(-1)
	for j := range n {
		t := (first+int32(j)-1)>>shift + 1 - t0
		if isFloat {
			if c := countsF[j]; int(t) != j {
				countsF[j] = 0
				countsF[t] += c
			}
		} else if c := counts[j]; int(t) != j {
			counts[j] = 0
			counts[t] += c
		}
		last = t
	}
	if isFloat {
		return t0, counts, countsF[:last+1]
	}
	return t0, counts[:last+1], countsF
}

// checkHist validates d.h and expands its buckets. A float histogram's
// count is not held to its buckets' sum, as Prometheus does not (float
// rounding would refuse good histograms).
func (d *Decoder) checkHist() string {
	h := &d.h
	if h.isFloat {
		for _, f := range [2]float64{h.countFloat, h.zeroFloat} {
			if f < 0 { // NaN is a count, as Prometheus's FloatHistogram.Validate has it
				return fmt.Sprintf("histogram count %v is negative", f)
			}
		}
	}
	if h.hint > 3 {
		return fmt.Sprintf("histogram reset hint %d is not one of UNKNOWN, YES, NO, GAUGE", h.hint)
	}
	custom := h.schema == -53
	if !custom && (h.schema < -4 || h.schema > 52) {
		return fmt.Sprintf("histogram schema %d is not supported (want -4..8, 9..52 reduced to 8, or -53 for custom buckets)", h.schema)
	}
	if custom {
		if len(h.negSpans) > 0 || len(h.negDeltas) > 0 || len(h.negCounts) > 0 {
			return "custom-bucket histogram has negative buckets"
		}
		for i, b := range h.custom {
			if math.IsNaN(b) || math.IsInf(b, 0) {
				return fmt.Sprintf("custom-bucket histogram bound %v is not finite", b)
			}
			if i > 0 && !(b > h.custom[i-1]) {
				return "custom-bucket histogram bounds are not strictly increasing"
			}
		}
		// Prometheus refuses them too (histogram.Validate): a custom-bucket
		// histogram has no zero bucket, and its lake form has no place
		// for one.
		if h.zeroInt != 0 || h.zeroFloat != 0 || h.zeroThreshold != 0 {
			return "custom-bucket histogram has a zero bucket (zero_count and zero_threshold must be 0)"
		}
	} else if len(h.custom) > 0 {
		return fmt.Sprintf("histogram of schema %d has custom bucket bounds", h.schema)
	}
	var pt, nt uint64
	var p string
	var off int32
	if off, h.pos, h.posF, pt, p = expandSide(h.pos, h.posF, h.posSpans, h.posDeltas, h.posCounts, h.isFloat, "positive"); p != "" {
		return "histogram " + p
	}
	if h.schema > 8 {
		off, h.pos, h.posF = reduceDense(off, h.pos, h.posF, h.isFloat, uint(h.schema-8))
	}
	npos := len(h.pos)
	if h.isFloat {
		npos = len(h.posF)
	}
	h.posOff = off - 1 // OTLP bucket i is (base^i, base^(i+1)]; Prometheus's is (base^(i-1), base^i]
	if custom {
		if npos > 0 && (off < 0 || int(off)+npos > len(h.custom)+1) {
			return fmt.Sprintf("custom-bucket histogram has buckets outside its %d bounds", len(h.custom))
		}
		h.posOff = off
	}
	if off, h.neg, h.negF, nt, p = expandSide(h.neg, h.negF, h.negSpans, h.negDeltas, h.negCounts, h.isFloat, "negative"); p != "" {
		return "histogram " + p
	}
	if h.schema > 8 {
		off, h.neg, h.negF = reduceDense(off, h.neg, h.negF, h.isFloat, uint(h.schema-8))
		h.schema = 8
	}
	h.negOff = off - 1
	if h.isFloat {
		return ""
	}
	buckets := pt + nt + h.zeroInt
	if buckets > h.countInt || (!math.IsNaN(h.sum) && buckets != h.countInt) {
		return fmt.Sprintf("histogram count %d does not match its buckets (%d)", h.countInt, buckets)
	}
	return ""
}

// appendHist appends d.h (checked) as a point. A float histogram's
// exact counts go to FloatCounts (signal.Metrics.SetFloatCounts), its
// integer fields get them rounded.
func (d *Decoder) appendHist(name signal.Str, attr signal.Range, ts, start int64) {
	m, h := d.m, &d.h
	kind := descExp
	if h.schema == -53 {
		kind = descExplicit
	}
	p := m.AppendPoint(d.desc(name, kind), d.res, d.sc)
	m.Time[p], m.StartTime[p], m.Attr[p], m.SeriesID[p] = ts, start, attr, d.sid
	m.Count[p], m.Sum[p], m.Has[p] = h.countInt, h.sum, signal.HasSum|hintBits[h.hint]
	if kind == descExplicit {
		f := uint32(len(m.F64))
		m.F64 = append(m.F64, h.custom...)
		m.Bounds[p] = signal.Range{Start: f, End: uint32(len(m.F64))}
		if h.isFloat {
			// Dense counts over all len(custom)+1 buckets.
			b := h.negF[:0] // scratch: a custom-bucket histogram has no negative buckets
			for range h.posOff {
				b = append(b, 0)
			}
			b = append(b, h.posF...)
			for len(b) < len(h.custom)+1 {
				b = append(b, 0)
			}
			h.negF = b
			m.SetFloatCounts(p, false, h.countFloat, 0, b, 0)
		} else {
			u := uint32(len(m.U64))
			for range h.posOff {
				m.U64 = append(m.U64, 0)
			}
			m.U64 = append(m.U64, h.pos...)
			for len(m.U64)-int(u) < len(h.custom)+1 {
				m.U64 = append(m.U64, 0)
			}
			m.BucketCounts[p] = signal.Range{Start: u, End: uint32(len(m.U64))}
		}
	} else {
		m.Scale[p] = h.schema
		m.ZeroCount[p], m.ZeroThreshold[p] = h.zeroInt, h.zeroThreshold
		m.PosOffset[p], m.NegOffset[p] = h.posOff, h.negOff
		if h.isFloat {
			npos := len(h.posF)
			h.posF = append(h.posF, h.negF...)
			m.SetFloatCounts(p, true, h.countFloat, h.zeroFloat, h.posF, npos)
		} else {
			u := uint32(len(m.U64))
			m.U64 = append(m.U64, h.pos...)
			m.PosCounts[p] = signal.Range{Start: u, End: uint32(len(m.U64))}
			u = uint32(len(m.U64))
			m.U64 = append(m.U64, h.neg...)
			m.NegCounts[p] = signal.Range{Start: u, End: uint32(len(m.U64))}
		}
	}
	d.st.Histograms++
}

// hintBits maps remote write's ResetHint (UNKNOWN, YES, NO, GAUGE) to
// signal.Metrics.Has bits.
var hintBits = [4]uint8{0, signal.HintReset, signal.HintNoReset, signal.HintGauge}

// appendExemplar encodes an OTLP Exemplar from d.exLabels, value and
// timestamp and returns its Str in the arena.
func (d *Decoder) appendExemplar(v uint64, tsNs int64) signal.Str {
	e := d.ex[:0]
	for _, l := range d.exLabels {
		n, val := d.str(l.name), d.str(l.value)
		// KeyValue{1: key, 2: AnyValue{1: string_value}}
		anyLen := 1 + varintLen(uint64(len(val))) + len(val)
		kvLen := 1 + varintLen(uint64(len(n))) + len(n) + 1 + varintLen(uint64(anyLen)) + anyLen
		e = appendVarint(e, 7<<3|wtLen)
		e = appendVarint(e, uint64(kvLen))
		e = appendLenPrefix(e, 1, n)
		e = appendVarint(e, 2<<3|wtLen)
		e = appendVarint(e, uint64(anyLen))
		e = appendLenPrefix(e, 1, val)
	}
	e = appendFixed64(e, 2, uint64(tsNs))
	e = appendFixed64(e, 3, v)
	d.ex = e
	return d.c.AppendBytes(e)
}

// exemplarPoint appends a point without a value (NumberType ValueEmpty:
// value is null in the lake, and PromQL reads no sample from it) at ts,
// to carry the exemplars of a series sent without samples or histograms.
// That is how Prometheus sends every exemplar, in 1.0 and in 2.0: a
// TimeSeries of its own holding only exemplars. It returns the point.
func (d *Decoder) exemplarPoint(fam uint32, name signal.Str, attr signal.Range, ts int64) int {
	desc := d.descOf(fam, name, descGauge)
	d.resetSamples()
	d.bufSample(ts, 0, 0)
	p := d.m.AppendSeriesPoints(desc, d.res, d.sc, attr, d.sid, d.sTime, d.sStart, d.sVal)
	d.resetSamples()
	d.m.NumberType[p] = signal.ValueEmpty
	return p
}

// attachExemplars sets the exemplar range of the series' last point (p
// is -1 only for a series without points, hence without exemplars).
func (d *Decoder) attachExemplars(p int, start int) {
	if p < 0 {
		return
	}
	d.m.Exemplars[p] = signal.Range{Start: uint32(start), End: uint32(len(d.m.Msgs))}
}

func (d *Decoder) checkExLabels() string {
	for i, l := range d.exLabels {
		n := d.str(l.name)
		if len(n) == 0 {
			return "exemplar label with an empty name"
		}
		if !utf8.Valid(n) || !utf8.Valid(d.str(l.value)) {
			return fmt.Sprintf("exemplar label %q: not valid UTF-8", n)
		}
		for _, o := range d.exLabels[:i] {
			if bytes.Equal(d.str(o.name), n) {
				return fmt.Sprintf("exemplar has duplicate label name %q", n)
			}
		}
	}
	return ""
}

// MaxUnsnappyBytes bounds what Unsnappy decodes: a queued request was at
// most the receiver's max_request_bytes; a damaged length must not
// allocate without bound.
const MaxUnsnappyBytes = 1 << 30

// Unsnappy snappy-decodes a request queued as received into dst (grown as
// needed) and returns it.
func Unsnappy(dst, src []byte) ([]byte, error) {
	n, err := snappy.DecodedLen(src)
	if err != nil {
		return dst[:0], fmt.Errorf("%w: snappy: %v", ErrMalformed, err)
	}
	if n > MaxUnsnappyBytes {
		return dst[:0], fmt.Errorf("%w: snappy: decoded length %d", ErrMalformed, n)
	}
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	out, err := snappy.Decode(dst[:n], src)
	if err != nil {
		return dst[:0], fmt.Errorf("%w: snappy: %v", ErrMalformed, err)
	}
	return out, nil
}
