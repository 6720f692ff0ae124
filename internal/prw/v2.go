package prw

import (
	"math"
	"slices"
	"unicode/utf8"

	"github.com/sluice-dev/sluice/internal/signal"
)

// DecodeV2 appends the series of a remote write 2.0
// io.prometheus.write.v2.Request (already snappy-decoded) to dst. Errors
// as for DecodeV1.
func (d *Decoder) DecodeV2(dst *signal.Metrics, body []byte) (Stats, error) {
	d.begin(dst, "2.0")
	defer d.end()
	k := d.mark()
	base := d.start(body)
	b := d.b
	d.symbols = d.symbols[:0]
	// The symbols' span when they are contiguous (as encoders write them):
	// ASCII there means every symbol is valid UTF-8, checked in one pass.
	symStart, symEnd, contig := -1, -1, true
	// Symbols first: an encoder may write them after the series. The
	// series' spans are kept for the second loop.
	d.spans = d.spans[:0]
	syms := d.symbols
	for i := base; i < len(b); {
		// The usual symbols, 0x22 and a one-byte length, without tag().
		if b[i] == 4<<3|wtLen {
			// Room for the symbols of the next bytes, at most 4,096 at
			// a time: symbolRun stops when it is full, and is called again.
			syms = slices.Grow(syms, min((len(b)-i)/2, 4096))
			if e, more := symbolRun(b, i, syms); e > i {
				if symStart < 0 {
					symStart = i
				} else if i != symEnd {
					contig = false
				}
				symEnd, syms, i = e, more, e
				continue
			}
		}
		num, wt, j := tag(b, i)
		if j < 0 {
			d.restore(k)
			return Stats{}, malformed("Request: bad tag", i-base)
		}
		if num == 4 || num == 5 {
			if wt != wtLen {
				d.restore(k)
				return Stats{}, malformed("Request: wrong wire type", i-base)
			}
			s, e := lenField(b, j)
			if s < 0 {
				d.restore(k)
				return Stats{}, malformed("Request: bad length", j-base)
			}
			if num == 4 {
				if symStart < 0 {
					symStart = i
				} else if i != symEnd {
					contig = false
				}
				symEnd = e
				syms = append(syms, signal.MakeStr(s, e-s))
			} else {
				d.spans = append(d.spans, [3]int{s, e, j})
			}
			j = e
		} else if j = skip(b, j, wt); j < 0 {
			d.restore(k)
			return Stats{}, malformed("Request: bad field", i-base)
		}
		i = j
	}
	d.symbols = syms
	// A symbol that is not valid UTF-8 refuses the series that use it
	// (checkLabels, checkExLabels, the metadata's text), not the request:
	// as in 1.0, and as Prometheus's handler, the other series are kept.
	d.badUTF8 = false
	if symStart >= 0 && (!contig || !ascii(b[symStart:symEnd])) {
		for _, sym := range d.symbols {
			if !utf8.Valid(d.str(sym)) {
				d.badUTF8 = true
				break
			}
		}
	}
	// symDesc and metaAt are zero but where a call set them (the name
	// symbols in symSet): those are cleared, not the tables, two words a
	// symbol that would evict as much of the cache.
	sd, ma := d.symDesc[:cap(d.symDesc)], d.metaAt[:cap(d.metaAt)]
	for _, r := range d.symSet {
		sd[r], ma[r] = 0, 0
	}
	d.symSet = d.symSet[:0]
	if n := len(d.symbols); cap(sd) < n || cap(ma) < n {
		sd, ma = make([]uint32, n, n+n/4), make([]uint32, n, n+n/4)
	}
	d.symDesc, d.metaAt = sd[:len(d.symbols)], ma[:len(d.symbols)]
	if len(d.symbols) > 0 && d.symbols[0].Len() != 0 {
		d.restore(k)
		return Stats{}, malformed("Request.symbols: the first symbol is not the empty string", 0)
	}
	if d.ids.on {
		// The memo's hash of each symbol, once per call: the series'
		// keys (v2Key) are sums over their references.
		d.symKey = symbolKeys(d.symKey, b, d.symbols)
	}
	for si, sp := range d.spans {
		at := -1 // the series' place in the memo block
		if d.ids.on {
			if at = si % idBlockLen; at == 0 {
				d.preV2(d.spans[si:min(si+idBlockLen, len(d.spans))])
			}
		}
		if !d.seriesV2(sp[0], sp[1], at) {
			d.restore(k)
			return Stats{}, malformed("Request.timeseries: bad encoding", sp[2]-base)
		}
	}
	return d.finish(k)
}

// preV2 reads the label references of a block of series (spans, at
// most idBlockLen) ahead of their decoding, when they are the series'
// first field and one packed run of pairs (as every encoder writes them):
// their labels go to d.preLabels, where seriesV2 takes them, their keys
// (v2Key of the labels as sent) to the memo block, whose buckets are then
// loaded together, so that their cache misses overlap.
func (d *Decoder) preV2(spans [][3]int) {
	ib := &d.ids
	b := d.b
	d.preLabels = d.preLabels[:0]
	for k, sp := range spans {
		s, e := sp[0], sp[1]
		ib.lab[k], ib.key[k] = 0, 0
		if s+1 >= e || b[s] != 1<<3|wtLen {
			continue
		}
		fs, fe := lenField(b[:e], s+1)
		if fs < 0 {
			continue
		}
		a := len(d.preLabels)
		if ls, ok := refLabels(b[:fe], fs, d.symbols, d.preLabels); ok && len(ls) > a {
			d.preLabels = ls
			ib.lab[k], ib.key[k] = fe, v2Key(ls[a:], d.symKey)
			ib.pre[k] = [2]int32{int32(a), int32(len(ls))}
		}
	}
	ib.n, ib.at = len(spans), 0
	ib.touch()
}

// refLabels appends the label pairs of the packed references b[s:] to ls;
// false when one is out of syms, their count is odd or a varint is bad.
func refLabels(b []byte, s int, syms []signal.Str, ls []label) ([]label, bool) {
	s, ls = refPairs(b, s, syms, ls)
	// What refPairs left: references of three bytes or more.
	for n := uint64(len(syms)); s < len(b); {
		x, i := uvarint(b, s)
		if i < 0 {
			return ls, false
		}
		y, j := uvarint(b, i)
		if j < 0 || x >= n || y >= n {
			return ls, false
		}
		ls = append(ls, label{syms[x], syms[y], uint32(y) + 1, uint32(x) + 1})
		s = j
	}
	return ls, true
}

// refs appends label pairs from symbol references; false when a reference
// is out of range or the count is odd (the problem is set). A repeated
// field may come in several pieces (packed or not, as protobuf allows): a
// pair's name read at the end of one piece waits in *pend (*odd set) for
// its value at the start of the next.
func (d *Decoder) refs(dst *[]label, b []byte, j, wt int, odd *bool, pend *uint64, bad *bool) int {
	pending := *pend
	have := *odd
	if wt == wtLen {
		// Packed, as every encoder writes it: pairs in a leaf loop
		// (refPairs), no callback.
		s, e := lenField(b, j)
		if s < 0 {
			return -1
		}
		ls := *dst
		n := uint64(len(d.symbols))
		if have && s < e { // the pair a field before this one began
			var x uint64
			if x, s = uvarint(b[:e], s); s < 0 {
				return -1
			}
			if x >= n {
				*bad = true
			}
			if !*bad {
				ls = append(ls, label{d.symbols[pending], d.symbols[x], uint32(x) + 1, uint32(pending) + 1})
			}
			have = false
		}
		if !*bad {
			s, ls = refPairs(b[:e], s, d.symbols, ls)
		}
		*dst = ls
		// What refPairs left: an odd reference, one out of range, long or
		// malformed varints; read one at a time.
		for s < e {
			var x uint64
			if x, s = uvarint(b[:e], s); s < 0 {
				return -1
			}
			if x >= n {
				*bad = true
			}
			if !have {
				pending, have = x, true
				continue
			}
			if !*bad {
				*dst = append(*dst, label{d.symbols[pending], d.symbols[x], uint32(x) + 1, uint32(pending) + 1})
			}
			have = false
		}
		*odd, *pend = have, pending
		return e
	}
	return packedVarints(b, j, wt, func(x uint64) {
		if x >= uint64(len(d.symbols)) {
			*bad = true
		}
		if !have {
			pending, have = x, true
		} else {
			if !*bad {
				*dst = append(*dst, label{d.symbols[pending], d.symbols[x], uint32(x) + 1, uint32(pending) + 1})
			}
			have = false
		}
		*odd, *pend = have, pending
	})
}

// symbolRun appends the symbols at b[i:] written as 0x22, a one-byte
// length and the bytes to syms, as many as its capacity has room for, and
// returns the index after the last: a leaf loop without appends (a
// request of per-series values has about as many symbols as labels).
func symbolRun(b []byte, i int, syms []signal.Str) (int, []signal.Str) {
	out := syms[len(syms):cap(syms)]
	k := 0
	for ; k < len(out) && i+1 < len(b) && b[i] == 4<<3|wtLen && b[i+1] < 0x80; k++ {
		e := i + 2 + int(b[i+1])
		if e > len(b) {
			break
		}
		out[k] = signal.MakeStr(i+2, e-i-2)
		i = e
	}
	return i, syms[:len(syms)+k]
}

// refPairs appends the label pairs of the packed references at b[s:] to
// ls while both references of a pair are of one or two bytes and inside
// syms, and returns the index after the last pair appended. A leaf loop:
// the references are most of a 2.0 series' bytes.
func refPairs(b []byte, s int, syms []signal.Str, ls []label) (int, []label) {
	n := uint64(len(syms))
	for s+1 < len(b) {
		i := s
		x := uint64(b[i])
		if x >= 0x80 {
			if i+2 >= len(b) || b[i+1] >= 0x80 {
				break
			}
			x = x&0x7f | uint64(b[i+1])<<7
			i++
		}
		i++
		y := uint64(b[i])
		if y >= 0x80 {
			if i+1 >= len(b) || b[i+1] >= 0x80 {
				break
			}
			y = y&0x7f | uint64(b[i+1])<<7
			i++
		}
		i++
		if x >= n || y >= n {
			break
		}
		ls = append(ls, label{syms[x], syms[y], uint32(y) + 1, uint32(x) + 1})
		s = i
	}
	return s, ls
}

// seriesV2 decodes one v2 TimeSeries b[s:e]. False means malformed. k is
// its place in the memo block (-1: the call does not use the memo).
func (d *Decoder) seriesV2(s, e, k int) bool {
	b := d.b[:e]
	// The labels preV2 read from the leading references, and their key:
	// the key holds when they are all the series' labels.
	preEnd, labelFields := 0, 0
	if k >= 0 {
		preEnd = d.ids.lab[k]
	}
	d.labels = d.labels[:0]
	var odd, bad bool
	var pend uint64
	var created int64
	hists, samples := 0, 0
	problem := ""
	var metaType uint64
	var helpRef, unitRef uint64
	hasMeta := false
	// The second loop starts past the label references when they are the
	// series' first field (as every encoder writes them): it skips them.
	from := s
	// plain: every sample so far is a plainSample in range, held already
	// (its start is set when created is known); no histogram or exemplar.
	// Then the second loop is not needed.
	plain := true
	d.resetSamples()
	fields := s // where the field loop starts
	if preEnd > 0 {
		// The usual series, read without the field loop: the references
		// preV2 read, one plain sample in range, and its metadata (which
		// most encoders write, even empty), nothing else.
		if v, ts, se := plainSample(d.b, preEnd, e); se > 0 {
			if tn, ok := timeNs(ts, d.MaxTime); ok {
				var typ, help, unit uint64
				end, meta := se, false
				if se < e && b[se] == 5<<3|wtLen {
					if ms, me := lenField(b, se+1); ms >= 0 && readMetadataV2(b, ms, me, &typ, &help, &unit) {
						end, meta = me, true
					}
				}
				if end == e {
					pr := d.ids.pre[k]
					d.labels = append(d.labels, d.preLabels[pr[0]:pr[1]]...)
					d.bufSample(tn, 0, v)
					labelFields, samples, fields = 1, 1, e
					hasMeta, metaType, helpRef, unitRef = meta, typ, help, unit
				}
			}
		}
	}
	for i := fields; i < e; {
		// tag(), inline for a one-byte tag: a call a field costs more
		// than it does.
		num, wt, j := int(b[i]>>3), int(b[i]&7), i+1
		if b[i] >= 0x80 || num == 0 {
			num, wt, j = tag(b, i)
		}
		if j < 0 {
			return false
		}
		switch {
		case num == 1 && (wt == wtLen || wt == wtVarint):
			labelFields++
			if i == s && preEnd > 0 {
				pr := d.ids.pre[k]
				d.labels = append(d.labels, d.preLabels[pr[0]:pr[1]]...)
				j = preEnd
			} else if j = d.refs(&d.labels, b, j, wt, &odd, &pend, &bad); j < 0 {
				return false
			}
			if i == s {
				from = j
			}
		case (num == 2 || num == 4) && wt == wtLen:
			if num == 2 {
				samples++
				if plain {
					if v, ts, se := plainSample(d.b, i, e); se > 0 {
						if tn, ok := timeNs(ts, d.MaxTime); ok {
							d.bufSample(tn, 0, v)
							j = se
							break
						}
					}
				}
			}
			plain = false
			if _, j = lenField(b, j); j < 0 {
				return false
			}
		case num == 3 && wt == wtLen:
			hs, he := lenField(b, j)
			if hs < 0 || d.parseHist(b, hs, he) < 0 {
				return false
			}
			if problem == "" {
				if p := d.checkHist(); p != "" {
					problem = p
				} else if _, ok := timeNs(d.h.ts, d.MaxTime); !ok {
					problem = timeProblem("histogram timestamp", d.h.ts, d.MaxTime)
				}
			}
			hists++
			plain = false
			j = he
		case num == 5 && wt == wtLen:
			ms, me := lenField(b, j)
			if ms < 0 {
				return false
			}
			hasMeta = true
			if !readMetadataV2(b, ms, me, &metaType, &helpRef, &unitRef) {
				return false
			}
			j = me
		case num == 6 && wt == wtVarint:
			var v uint64
			if v, j = uvarint(b, j); j < 0 {
				return false
			}
			created = int64(v)
		case num >= 1 && num <= 6:
			return false
		default:
			if j = skip(b, j, wt); j < 0 {
				return false
			}
		}
		i = j
	}
	p := ""
	switch {
	case bad:
		p = "label reference out of the symbols table"
	case odd:
		p = "odd number of label references"
	case hasMeta && (helpRef >= uint64(len(d.symbols)) || unitRef >= uint64(len(d.symbols))):
		p = "metadata reference out of the symbols table"
	case samples > 0 && hists > 0:
		p = "series has both float samples and histograms"
	}
	nameIdx := -1
	if p == "" {
		d.dropEmptyValues()
		nameIdx, p = d.checkLabels(d.badUTF8, false)
		if p != "" && hasMeta && samples == 0 && hists == 0 {
			p = "metadata of a series with " + p
		}
	}
	if p == "" {
		p = problem
	}
	if p == "" && hasMeta && d.badUTF8 && (!utf8.Valid(d.str(d.symbols[helpRef])) || !utf8.Valid(d.str(d.symbols[unitRef]))) {
		p = "metadata help or unit: not valid UTF-8"
	}
	createdNs, ok := msToNs(created)
	if p == "" && !ok {
		p = "created timestamp out of range" + tsRange
	}
	if p != "" {
		if !d.scanSamplesV2(s, e) {
			return false
		}
		if len(d.labels) > 0 || bad || odd {
			d.drop("series %s: %s", d.seriesString(), p)
		} else {
			d.drop("series with no labels: %s", p)
		}
		return true
	}
	name, nameRef := d.labels[nameIdx].value, d.labels[nameIdx].ref
	key := uint64(0)
	if preEnd > 0 && labelFields == 1 {
		key = d.ids.key[k]
	}
	attr, fam := d.seriesAttrs(nameIdx, name, nameRef, key)
	var desc uint32
	if samples > 0 {
		desc = d.descOf(fam, name, descGauge)
	}
	last := -1
	exTime := int64(math.MinInt64) // the series' latest exemplar
	msgStart := len(d.m.Msgs)
	n0 := d.m.Len()
	ignored := 0 // start timestamps not before their sample's (startOf)
	if plain {
		if createdNs != 0 {
			for i, tn := range d.sTime {
				d.sStart[i] = startOf(createdNs, tn, &ignored)
			}
		}
		from = e
	} else {
		d.resetSamples()
	}
	for i := from; i < e; {
		// The usual sample: {0x09 value, 0x10 timestamp} and nothing else
		// (plainSample; a start timestamp takes the general loop).
		if v, ts, se := plainSample(d.b, i, e); se > 0 {
			if tn, ok := timeNs(ts, d.MaxTime); ok {
				d.bufSample(tn, startOf(createdNs, tn, &ignored), v)
				i = se
				continue
			}
		}
		num, wt, j := tag(b, i)
		switch {
		case num == 2 && wt == wtLen:
			ss, se := lenField(b, j)
			var v uint64
			var ts, st int64
			if !sampleV2(b, ss, se, &v, &ts, &st) {
				return false
			}
			tn, ok1 := timeNs(ts, d.MaxTime)
			sn, ok2 := msToNs(st)
			if !ok1 || !ok2 {
				d.rollbackSeries(n0, msgStart, attr)
				if !ok1 {
					d.drop("series %s: %s", d.seriesString(), timeProblem("sample timestamp", ts, d.MaxTime))
				} else {
					d.drop("series %s: sample start timestamp %d out of range"+tsRange, d.seriesString(), st)
				}
				return true
			}
			if sn == 0 {
				sn = createdNs
			}
			d.bufSample(tn, startOf(sn, tn, &ignored), v)
			j = se
		case num == 3 && wt == wtLen:
			hs, he := lenField(b, j)
			d.parseHist(b, hs, he)
			d.checkHist()
			tn, _ := msToNs(d.h.ts)
			sn, ok := msToNs(d.h.start)
			if !ok {
				d.rollbackSeries(n0, msgStart, attr)
				d.drop("series %s: histogram start timestamp out of range"+tsRange, d.seriesString())
				return true
			}
			if sn == 0 {
				sn = createdNs
			}
			d.flushSamples(desc, attr)
			d.appendHist(name, attr, tn, startOf(sn, tn, &ignored))
			last = d.m.Len() - 1
			j = he
		case num == 4 && wt == wtLen:
			xs, xe := lenField(b, j)
			d.exLabels = d.exLabels[:0]
			var v uint64
			var ts int64
			var xodd, xbad bool
			var xpend uint64
			for x := xs; x < xe; {
				n2, w2, x2 := tag(b[:xe], x)
				if x2 < 0 {
					return false
				}
				switch {
				case n2 == 1 && (w2 == wtLen || w2 == wtVarint):
					if x2 = d.refs(&d.exLabels, b[:xe], x2, w2, &xodd, &xpend, &xbad); x2 < 0 {
						return false
					}
				case n2 == 2 && w2 == wtI64:
					if v, x2 = fixed64(b[:xe], x2); x2 < 0 {
						return false
					}
				case n2 == 3 && w2 == wtVarint:
					var u uint64
					if u, x2 = uvarint(b[:xe], x2); x2 < 0 {
						return false
					}
					ts = int64(u)
				case n2 <= 3:
					return false
				default:
					if x2 = skip(b[:xe], x2, w2); x2 < 0 {
						return false
					}
				}
				x = x2
			}
			tn, ok := msToNs(ts)
			p := d.checkExLabels()
			switch {
			case xbad:
				p = "exemplar label reference out of the symbols table"
			case xodd:
				p = "exemplar has an odd number of label references"
			case p == "" && !ok:
				p = "exemplar timestamp out of range" + tsRange
			}
			if p != "" {
				d.rollbackSeries(n0, msgStart, attr)
				d.drop("series %s: %s", d.seriesString(), p)
				return true
			}
			if p := d.flushSamples(desc, attr); p >= 0 {
				last = p // the series' last point so far
			}
			d.m.Msgs = append(d.m.Msgs, d.appendExemplar(v, tn))
			d.st.Exemplars++
			exTime = max(exTime, tn)
			j = xe
		default:
			j = skip(b, j, wt)
		}
		i = j
	}
	if p := d.flushSamples(desc, attr); p >= 0 {
		last = p
	}
	if last < 0 && len(d.m.Msgs) > msgStart {
		last = d.exemplarPoint(fam, name, attr, exTime)
	}
	d.attachExemplars(last, msgStart)
	if last >= 0 {
		d.st.Series++
	}
	d.st.StartsIgnored += ignored
	if last < 0 && hasMeta {
		// No sample, histogram or exemplar: no point to carry the
		// metadata (MetadataOnlyV1).
		help, unit := d.str(d.symbols[helpRef]), d.str(d.symbols[unitRef])
		if metaType != 0 || len(help) > 0 || len(unit) > 0 {
			d.metaOnly = AppendMetricMetadata(d.metaOnly, metaType, d.str(name), help, unit)
		}
	}
	// Metadata gives every descriptor of its families that has none its
	// type, unit and help, so after one call for a name another is a no-op
	// until a descriptor is added: skip the five family lookups then
	// (every series carries metadata, even empty, in most encoders).
	if hasMeta && d.metaAt[nameRef-1] != uint32(len(d.m.Descs))+1 {
		key := d.str(name)
		d.metadataFor(key, metaType, d.str(d.symbols[helpRef]), d.str(d.symbols[unitRef]))
		d.metaAt[nameRef-1] = uint32(len(d.m.Descs)) + 1
	}
	return true
}

// readMetadataV2 reads a Metadata message b[s:e] {1: type, 3: help_ref,
// 4: unit_ref}, setting those it holds (a later message merges into an
// earlier one, as protobuf's); false when it is malformed.
func readMetadataV2(b []byte, s, e int, typ, help, unit *uint64) bool {
	b = b[:e]
	for x := s; x < e; {
		n, w, x2 := tag(b, x)
		if x2 < 0 {
			return false
		}
		if n == 1 || n == 3 || n == 4 {
			if w != wtVarint {
				return false
			}
			var v uint64
			if v, x2 = uvarint(b, x2); x2 < 0 {
				return false
			}
			switch n {
			case 1:
				*typ = v
			case 3:
				*help = v
			case 4:
				*unit = v
			}
		} else if x2 = skip(b, x2, w); x2 < 0 {
			return false
		}
		x = x2
	}
	return true
}

// MetadataOnlyV1 returns the metadata of the series of the last DecodeV2
// that had metadata but no sample, histogram or exemplar (none of them
// with an empty Metadata message: no metadata), as a remote write 1.0
// WriteRequest of MetricMetadata, the family name being the series'
// __name__: the batch has no point to carry it, and a consumer keeps it
// as it keeps 1.0 metadata sent without series. Valid until the next
// call; empty when there is none.
func (d *Decoder) MetadataOnlyV1() []byte { return d.metaOnly }

func (d *Decoder) scanSamplesV2(s, e int) bool {
	b := d.b[:e]
	for i := s; i < e; {
		num, wt, j := tag(b, i)
		if num == 2 && wt == wtLen {
			ss, se := lenField(b, j)
			var v uint64
			var ts, st int64
			if !sampleV2(b, ss, se, &v, &ts, &st) {
				return false
			}
			j = se
		} else {
			j = skip(b, j, wt)
		}
		i = j
	}
	return true
}

// sampleV2 decodes a v2 Sample {1: double value, 2: int64 timestamp,
// 3: int64 start_timestamp}.
func sampleV2(b []byte, s, e int, v *uint64, ts, st *int64) bool {
	if s < 0 {
		return false
	}
	b = b[:e]
	for i := s; i < e; {
		switch b[i] {
		case 1<<3 | wtI64:
			x, j := fixed64(b, i+1)
			if j < 0 {
				return false
			}
			*v, i = x, j
			continue
		case 2<<3 | wtVarint, 3<<3 | wtVarint:
			x, j := uvarint(b, i+1)
			if j < 0 {
				return false
			}
			if b[i] == 2<<3|wtVarint {
				*ts = int64(x)
			} else {
				*st = int64(x)
			}
			i = j
			continue
		}
		num, wt, j := tag(b, i)
		if j < 0 || num <= 3 {
			return false
		}
		if j = skip(b, j, wt); j < 0 {
			return false
		}
		i = j
	}
	return true
}
