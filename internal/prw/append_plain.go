package prw

import (
	"hash/maphash"

	"github.com/sluice-dev/sluice/internal/signal"
)

// PlainAppender appends remote write 1.0 requests that the receiver's scan
// accepted (Scanner.ScanV1 returned true: the lake loop's encPRW1N
// records) straight into a lake partition's batch, decoding as little as
// it can: a series the partition holds already is found by a key of its
// label bytes as received (signal.Metrics.KnownSeries), so its labels are
// neither parsed, checked, hashed for its series id nor looked up by
// content; only its samples are read. A series the partition does not
// know is scanned as ScanV1 scans it (which checks it again) and appended
// as Appender.AppendV1 appends it, and remembered under its key.
//
// The key is a 64-bit maphash of the series' label fields, seeded per
// process, and the label bytes' length; a hit is trusted without a
// compare, as the lake trusts its 64-bit series id (signal/seriesid.go):
// two different label byte strings of one length take the same key with
// probability 2^-64 per pair, about 2.4e-11 for a partition of 30,000
// series, and the seed is not known outside the process. The same series
// written with different bytes (another field order or varint form) is
// two keys of one set: the set is still found by content.
//
// The result is the batch Appender.AppendV1 gives for the same request
// (TestPlainAppenderMatchesAppendV1). A PlainAppender holds scratch space
// reused across calls; use one per goroutine.
type PlainAppender struct {
	// Times is the time of every sample of the request of the last
	// ScanTimesV1 (nanoseconds), in request order.
	Times []int64
	// Labels counts the label fields of the request (__name__ included):
	// an upper bound of the attributes the batch gets.
	Labels int

	body   []byte
	vals   []uint64 // per sample: its value's bits
	series []plainSeries
	skeys  []uint64 // per series: its key (see above)
	// Per sample, in AppendV1: its series' descriptor, set and id.
	pDesc []uint32
	pAttr []signal.Range
	pID   []uint64

	known  knownBlock // AppendV1's lookups
	sc     Scanner    // scans the series a partition does not know
	descOf []uint32
	names  keyMemo
	keys   []signal.KeyID
	lvals  [][]byte
}

// plainSeries is one TimeSeries of the request: its label fields are
// body[st:lab], its samples Times[s0:s1].
type plainSeries struct {
	st, lab, end int32
	s0, s1       int32
}

var plainSeed = maphash.MakeSeed()

// ScanTimesV1 walks a remote write 1.0 request (snappy-decoded) once: per
// series its label fields (skipped, not parsed) and its float samples. It
// returns false when the request is not the plain case's shape (a field
// other than labels before float samples, a sample that does not parse or
// whose time the lake does not store, a series without samples): the
// caller then decodes it. What it keeps aliases body.
func (x *PlainAppender) ScanTimesV1(body []byte) bool {
	x.body = body
	x.Times, x.vals, x.series, x.skeys, x.Labels = x.Times[:0], x.vals[:0], x.series[:0], x.skeys[:0], 0
	for i := 0; i < len(body); {
		if body[i] != 1<<3|wtLen {
			return false
		}
		st, e := lenField(body, i+1)
		if st < 0 {
			return false
		}
		b := body[:e]
		p := st
		for p < e && b[p] == 1<<3|wtLen {
			_, le := lenField(b, p+1)
			if le < 0 {
				return false
			}
			p = le
			x.Labels++
		}
		ps := plainSeries{st: int32(st), lab: int32(p), end: int32(e), s0: int32(len(x.Times))}
		for p < e {
			if b[p] != 2<<3|wtLen {
				return false
			}
			ss, se := lenField(b, p+1)
			var v uint64
			var ts int64
			if !sampleV1(b, ss, se, &v, &ts) {
				return false
			}
			tn, ok := msToNs(ts)
			if !ok {
				return false
			}
			x.Times = append(x.Times, tn)
			x.vals = append(x.vals, v)
			p = se
		}
		ps.s1 = int32(len(x.Times))
		if ps.s1 == ps.s0 {
			return false
		}
		x.series = append(x.series, ps)
		x.skeys = append(x.skeys, maphash.Bytes(plainSeed, body[st:ps.lab]))
		i = e
	}
	return true
}

// Bounds returns upper bounds of the attributes, descriptors and arena
// bytes the request of the last ScanTimesV1 gives a batch decoded from it
// (every label field an attribute, a descriptor per 8 series, the body):
// with len(Times) they give the lake writer's size estimate
// (lake.EstimateMetricsBytes) without parsing the labels.
func (x *PlainAppender) Bounds() (attrs, descs, arena int) {
	return x.Labels, len(x.series)/8 + 1, len(x.body) + len(ScopeName) + len("1.0")
}

// AppendV1 appends the points of the request of the last ScanTimesV1
// (which returned true; its body must still be valid) to dst. It returns
// false when a series dst does not know fails the scan's checks (the
// request was not one ScanV1 accepts): dst then holds part of the request,
// and the caller must cut it back (signal.Metrics.Truncate, which also
// forgets the known series) and decode the request instead.
func (x *PlainAppender) AppendV1(dst *signal.Metrics) bool {
	res, scope := dst.AddBareResourceScope(scopeNameBytes, v1Bytes)
	x.descOf = x.descOf[:0]
	x.pDesc, x.pAttr, x.pID = x.pDesc[:0], x.pAttr[:0], x.pID[:0]
	scanned := false
	body := x.body
	for j, ps := range x.series {
		ks, ok := x.known.lookup(dst, x.skeys, j, uint32(ps.lab-ps.st))
		if !ok {
			if !scanned {
				x.sc.reset(body)
				x.names.reset()
				scanned = true
			}
			if ks, ok = x.newSeries(dst, ps); !ok {
				x.forget()
				return false
			}
			dst.AddKnownSeries(x.skeys[j], ks)
		}
		for range ps.s1 - ps.s0 {
			x.pDesc = append(x.pDesc, ks.Desc)
			x.pAttr = append(x.pAttr, ks.Attr)
			x.pID = append(x.pID, ks.ID)
		}
	}
	// The points column by column, once the request's sets are known.
	dst.AppendDoublePoints(res, scope, x.pDesc, x.pAttr, x.pID, x.Times, x.vals)
	x.forget()
	return true
}

// newSeries scans series ps as ScanV1 would and interns its set and
// descriptor in dst as Appender.AppendV1 does.
func (x *PlainAppender) newSeries(dst *signal.Metrics, ps plainSeries) (signal.KnownSeries, bool) {
	sc := &x.sc
	n0 := len(sc.ID)
	b := x.body[:ps.end]
	if !sc.seriesV1(b, int(ps.st)) || len(sc.ID) == n0 {
		return signal.KnownSeries{}, false
	}
	last := len(sc.ID) - 1
	id, ni := sc.ID[last], sc.Name[last]
	c := &dst.Common
	keys, vals := x.keys[:0], x.lvals[:0]
	k := 0
	for p := int(ps.st); p < int(ps.lab); {
		n, v, le := labelAt(b, p)
		if le < 0 {
			return signal.KnownSeries{}, false // the scan checked it: cannot happen
		}
		p = le
		if string(n) == nameLabel {
			continue
		}
		kid := x.names.id(c, k, n)
		k++
		keys, vals = append(keys, kid), append(vals, v)
	}
	x.keys, x.lvals = keys, vals
	attr := dst.InternStrAttrs(keys, vals)
	for int(ni) >= len(x.descOf) {
		x.descOf = append(x.descOf, 0)
	}
	if x.descOf[ni] == 0 {
		x.descOf[ni] = dst.InternGaugeDesc(sc.Names[ni]) + 1
	}
	return signal.KnownSeries{Attr: attr, ID: id, Desc: x.descOf[ni] - 1, Len: uint32(ps.lab - ps.st)}, true
}

// forget drops what aliases the body.
func (x *PlainAppender) forget() {
	clear(x.lvals[:cap(x.lvals)])
	x.names.forget()
	x.sc.Names = x.sc.Names[:0]
	clear(x.sc.Names[:cap(x.sc.Names)])
	clear(x.sc.prev[:cap(x.sc.prev)])
}
