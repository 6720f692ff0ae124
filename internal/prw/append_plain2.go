package prw

import (
	"hash/maphash"
	"math/bits"

	"github.com/sluice-dev/sluice/internal/signal"
)

// PlainAppender2 is PlainAppender for remote write 2.0 requests that the
// receiver's scan accepted (Scanner.ScanV2 returned true: the lake loop's
// encPRW2N records): one walk of the request (ScanTimesV2) reads the
// symbols, resolves each series' label references and reads its samples,
// metadata and created timestamp; AppendV2 appends the points straight
// into a lake partition's batch, column by column.
//
// A series is known to the partition (signal.Metrics.KnownSeries) by a key
// of its resolved label strings, not of its reference bytes (each request
// has its own symbols table): a 64-bit seeded maphash per symbol, computed
// once per request, the series' name and value hashes folded in order, and
// the label count (marked as 2.0's: v2Len) as the entry's check. A hit is
// trusted as PlainAppender trusts its key (2^-64 per pair). A request with
// a series the partition does not know is scanned whole by Scanner.ScanV2
// (which checks every series: sorted, unique, non-empty names and values,
// a __name__) and the unknown series interned as the decode and copy would
// intern them.
//
// Descriptors are not remembered per series: 2.0 metadata describes a
// metric per request (the decoder gives every descriptor of a family that
// has none yet the first metadata that names it, later series' metadata
// included), so AppendV2 works out each metric's descriptor of the request
// as the decoder does (a gauge named as the metric, described by the
// metadata that reached it first) and interns it by content.
//
// The result is the batch the lake writer's copy of DecodeV2's batch gives
// (TestPlainAppender2MatchesDecodeCopy, FuzzPlainAppender2). Use one per
// goroutine.
type PlainAppender2 struct {
	// Times is the time of every sample of the request of the last
	// ScanTimesV2 (nanoseconds), in request order.
	Times []int64
	// Labels counts the label pairs of the request (__name__ included):
	// with 2 per metric when there is metadata, an upper bound of the
	// attributes the batch gets.
	Labels int

	body   []byte
	vals   []uint64
	starts []int64 // per sample: its start time (0 when none)
	anyST  bool
	series []plain2Series
	skeys  []uint64 // per series: its key (see above)
	sym    [][]byte // alias body
	symKey []uint64 // per symbol: its maphash, 0 until asked for
	nameOf []int32  // per symbol: the request's metric index + 1
	metaAt []int32  // per symbol: len(names)+1 when its metadata was last applied
	names  []plain2Name
	byName map[string]int32
	nkey   []byte

	descOf []uint32 // per metric of the request: its descriptor in dst
	pDesc  []uint32
	pAttr  []signal.Range
	pID    []uint64

	known knownBlock
	sc    Scanner
	km    keyMemo
	keys  []signal.KeyID
	lvals [][]byte
	mkeys [2]signal.KeyID
	mvals [2][]byte
}

// plain2Series is one TimeSeries of the request: its packed label
// references are body[ls:le], its samples Times[s0:s1].
type plain2Series struct {
	ls, le int32
	s0, s1 int32
	name   int32 // the request's metric index
	nlab   uint32
}

// plain2Name is a metric of the request and the metadata that describes
// its descriptor (as the decoder's applyMetadata would).
type plain2Name struct {
	name       []byte // aliases body
	described  bool
	typ        uint64
	help, unit []byte // alias body
}

var metaSuffixes = [...]string{"", "_total", "_bucket", "_sum", "_count"}

func (x *PlainAppender2) symHash(r uint64) uint64 {
	h := x.symKey[r]
	if h == 0 {
		h = maphash.Bytes(plainSeed, x.sym[r]) | 1
		x.symKey[r] = h
	}
	return h
}

// ScanTimesV2 walks a remote write 2.0 request (snappy-decoded) once. It
// returns false when the request is not one ScanV2 takes as far as the
// walk can tell without the series' label strings (those of a series the
// batch does not know are checked by AppendV2's scan): the caller then
// decodes it. What it keeps aliases body.
func (x *PlainAppender2) ScanTimesV2(body []byte) bool {
	x.body = body
	x.Times, x.vals, x.starts, x.series, x.skeys, x.Labels, x.anyST = x.Times[:0], x.vals[:0], x.starts[:0], x.series[:0], x.skeys[:0], 0, false
	x.sym, x.names = x.sym[:0], x.names[:0]
	if x.byName == nil {
		x.byName = make(map[string]int32)
	}
	clear(x.byName)
	i, ok := 0, false
	if x.sym, i, ok = leadingSymbols(body, x.sym); !ok {
		return false
	}
	n := len(x.sym)
	if cap(x.symKey) < n {
		x.symKey = make([]uint64, n)
		x.nameOf = make([]int32, n)
		x.metaAt = make([]int32, n)
	}
	x.symKey, x.nameOf, x.metaAt = x.symKey[:n], x.nameOf[:n], x.metaAt[:n]
	clear(x.symKey)
	clear(x.nameOf)
	clear(x.metaAt)
	meta := false
	for i < len(body) {
		if body[i] != 5<<3|wtLen {
			return false
		}
		st, e := lenField(body, i+1)
		if st < 0 || !x.series2(body[:e], st) {
			return false
		}
		i = e
	}
	for _, nm := range x.names {
		meta = meta || nm.described
	}
	if meta {
		x.Labels += 2 * len(x.names)
	}
	return true
}

// series2 walks one TimeSeries b[i:len(b)] as Scanner.seriesV2 scans it,
// but for the checks of its label strings.
func (x *PlainAppender2) series2(b []byte, i int) bool {
	e := len(b)
	if i >= e || b[i] != 1<<3|wtLen {
		return false
	}
	ls, le := lenField(b, i+1)
	if ls < 0 {
		return false
	}
	nsym := uint64(len(x.sym))
	key := uint64(0x9E3779B97F4A7C15)
	nameRef := -1
	nlab := uint32(0)
	for p := ls; p < le; {
		nr, p1 := refAt(b[:le], p)
		if p1 < 0 || p1 >= le {
			return false
		}
		vr, p2 := refAt(b[:le], p1)
		if p2 < 0 || nr >= nsym || vr >= nsym {
			return false
		}
		p = p2
		key = bits.RotateLeft64((key^x.symHash(nr))*0xff51afd7ed558ccd, 29)
		key = bits.RotateLeft64((key^x.symHash(vr))*0xc4ceb9fe1a85ec53, 31)
		if string(x.sym[nr]) == nameLabel {
			nameRef = int(vr)
		}
		nlab++
	}
	if nameRef < 0 || len(x.sym[nameRef]) == 0 {
		return false
	}
	x.Labels += int(nlab)
	ni := x.nameOf[nameRef] - 1
	if ni < 0 {
		nb := x.sym[nameRef]
		v, ok := x.byName[string(nb)]
		if !ok {
			v = int32(len(x.names))
			x.names = append(x.names, plain2Name{name: nb})
			x.byName[string(nb)] = v
		}
		ni = v
		x.nameOf[nameRef] = ni + 1
	}
	ps := plain2Series{ls: int32(ls), le: int32(le), s0: int32(len(x.Times)), name: ni, nlab: nlab}
	meta, created := false, false
	var createdNs int64
	var typ uint64
	var help, unit []byte
	for i = le; i < e; {
		switch b[i] {
		case 2<<3 | wtLen:
			ss, se := lenField(b, i+1)
			var v uint64
			var ts, st int64
			if !sampleV2(b, ss, se, &v, &ts, &st) {
				return false
			}
			tn, ok := msToNs(ts)
			sn, ok2 := msToNs(st)
			if !ok || !ok2 {
				return false
			}
			x.Times = append(x.Times, tn)
			x.vals = append(x.vals, v)
			x.starts = append(x.starts, sn)
			i = se
		case 5<<3 | wtLen:
			ms, me := lenField(b, i+1)
			if meta || ms < 0 || !metadataV2(b[:me], ms, nsym) {
				return false
			}
			typ, help, unit = x.metaFields(b[:me], ms)
			meta = true
			i = me
		case 6<<3 | wtVarint:
			v, j := uvarint(b, i+1)
			if created || j < 0 {
				return false
			}
			tn, ok := msToNs(int64(v))
			if !ok {
				return false
			}
			created, createdNs = true, tn
			i = j
		default:
			return false
		}
	}
	ps.s1 = int32(len(x.Times))
	if ps.s1 == ps.s0 {
		return false
	}
	var ignored int // the receiver counted them (Scanner.StartsIgnored)
	for k := ps.s0; k < ps.s1; k++ {
		if x.starts[k] == 0 {
			x.starts[k] = createdNs
		}
		x.starts[k] = startOf(x.starts[k], x.Times[k], &ignored)
		if x.starts[k] != 0 {
			x.anyST = true
		}
	}
	x.series = append(x.series, ps)
	x.skeys = append(x.skeys, key)
	if meta && x.metaAt[nameRef] != int32(len(x.names))+1 {
		// As the decoder's metadataFor: every metric of the family
		// seen so far that has no metadata yet takes this one.
		x.metaAt[nameRef] = int32(len(x.names)) + 1
		nb := x.sym[nameRef]
		for _, suf := range metaSuffixes {
			x.nkey = append(append(x.nkey[:0], nb...), suf...)
			if v, ok := x.byName[string(x.nkey)]; ok && !x.names[v].described {
				x.names[v].described, x.names[v].typ, x.names[v].help, x.names[v].unit = true, typ, help, unit
			}
		}
	}
	return true
}

// metaFields reads a Metadata message b[i:len(b)] that metadataV2 checked:
// its type, and its help and unit symbols.
func (x *PlainAppender2) metaFields(b []byte, i int) (typ uint64, help, unit []byte) {
	var h, u uint64
	for i < len(b) {
		num, wt, j := tag(b, i)
		if num == 1 || num == 3 || num == 4 {
			var v uint64
			v, j = uvarint(b, j)
			switch num {
			case 1:
				typ = v
			case 3:
				h = v
			case 4:
				u = v
			}
		} else {
			j = skip(b, j, wt)
		}
		i = j
	}
	return typ, x.sym[h], x.sym[u]
}

// Bounds is PlainAppender.Bounds for the request of the last ScanTimesV2.
func (x *PlainAppender2) Bounds() (attrs, descs, arena int) {
	return x.Labels, len(x.names) + 1, len(x.body) + len(ScopeName) + len("2.0")
}

var v2Bytes = []byte("2.0")

// v2Len marks a known series' check as a 2.0 label count, so that no entry
// of PlainAppender's (a label byte length, below 2^31) is taken for one of
// PlainAppender2's or the other way round, whatever their keys: the
// PlainAppender trusts an entry's Desc, which PlainAppender2 leaves 0.
const v2Len = 1 << 31

// AppendV2 appends the points of the request of the last ScanTimesV2
// (which returned true; its body must still be valid) to dst. It returns
// false when the request has a series dst does not know and ScanV2 does
// not take the request: dst then holds part of it, and the caller must cut
// it back (signal.Metrics.Truncate) and decode the request instead.
func (x *PlainAppender2) AppendV2(dst *signal.Metrics) bool {
	defer x.forget()
	res, scope := dst.AddBareResourceScope(scopeNameBytes, v2Bytes)
	x.pDesc, x.pAttr, x.pID = x.pDesc[:0], x.pAttr[:0], x.pID[:0]
	scanned := false
	for j, ps := range x.series {
		ks, ok := x.known.lookup(dst, x.skeys, j, ps.nlab|v2Len)
		if !ok {
			if !scanned {
				if !x.sc.ScanV2(x.body) {
					return false
				}
				x.km.reset()
				scanned = true
			}
			ks = x.newSeries(dst, ps)
			dst.AddKnownSeries(x.skeys[j], ks)
		}
		for range ps.s1 - ps.s0 {
			x.pAttr = append(x.pAttr, ks.Attr)
			x.pID = append(x.pID, ks.ID)
		}
	}
	// The request's descriptors, once its metadata is known.
	c := &dst.Common
	descs := x.descs(dst, c)
	for _, ps := range x.series {
		d := descs[ps.name]
		for range ps.s1 - ps.s0 {
			x.pDesc = append(x.pDesc, d)
		}
	}
	p := dst.AppendDoublePoints(res, scope, x.pDesc, x.pAttr, x.pID, x.Times, x.vals)
	if x.anyST {
		copy(dst.StartTime[p:], x.starts)
	}
	return true
}

// descs interns the descriptor of each metric of the request in dst.
func (x *PlainAppender2) descs(dst *signal.Metrics, c *signal.Common) []uint32 {
	out := x.descOf[:0]
	for i := range x.names {
		nm := &x.names[i]
		if !nm.described {
			out = append(out, dst.InternGaugeDesc(nm.name))
			continue
		}
		x.mkeys[0], x.mvals[0] = c.Keys.IDString(AttrType), []byte(typeName(nm.typ))
		k := 1
		if len(nm.unit) > 0 {
			x.mkeys[1], x.mvals[1] = c.Keys.IDString(AttrUnit), nm.unit
			k = 2
		}
		meta := dst.InternStrAttrs(x.mkeys[:k], x.mvals[:k])
		out = append(out, dst.InternDescribedGauge(nm.name, nm.help, meta))
	}
	x.descOf = out
	return out
}

// newSeries interns series ps's set as the copy of the decoded request
// would, with the series id ScanV2 gave it.
func (x *PlainAppender2) newSeries(dst *signal.Metrics, ps plain2Series) signal.KnownSeries {
	c := &dst.Common
	b := x.body[:ps.le]
	keys, vals := x.keys[:0], x.lvals[:0]
	k := 0
	for p := int(ps.ls); p < len(b); {
		nr, p1 := refAt(b, p)
		vr, p2 := refAt(b, p1)
		p = p2
		n := x.sym[nr]
		if string(n) == nameLabel {
			continue
		}
		keys, vals = append(keys, x.km.id(c, k, n)), append(vals, x.sym[vr])
		k++
	}
	x.keys, x.lvals = keys, vals
	attr := dst.InternStrAttrs(keys, vals)
	return signal.KnownSeries{Attr: attr, ID: x.sc.ID[ps.s0], Len: ps.nlab | v2Len}
}

// forget drops what aliases the body.
func (x *PlainAppender2) forget() {
	clear(x.lvals[:cap(x.lvals)])
	x.mvals = [2][]byte{}
	x.km.forget()
	clear(x.sym[:cap(x.sym)])
	for i := range x.names {
		x.names[i] = plain2Name{}
	}
	clear(x.byName)
	x.sc.Names = x.sc.Names[:0]
	clear(x.sc.Names[:cap(x.sc.Names)])
	clear(x.sc.sym[:cap(x.sc.sym)])
}
