package prw

import (
	"encoding/binary"
	"math"
	"math/bits"

	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/unsafex"
)

// DecodeV1 appends the series of a remote write 1.0 prometheus.WriteRequest
// (already snappy-decoded) to dst. See the package invariants for what an
// error leaves behind: *PartialError keeps the good series, an error
// wrapping ErrMalformed keeps nothing.
func (d *Decoder) DecodeV1(dst *signal.Metrics, body []byte) (Stats, error) {
	d.begin(dst, "1.0")
	defer d.end()
	k := d.mark()
	base := d.start(body)
	b := d.b
	for i := base; i < len(b); {
		num, wt, j := tag(b, i)
		if j < 0 {
			d.restore(k)
			return Stats{}, malformed("WriteRequest: bad tag", i-base)
		}
		switch {
		case num == 1 && wt == wtLen:
			s, e := lenField(b, j)
			if d.ids.on && s >= 0 {
				d.idKey, d.idLab = d.ids.next(b, i, s)
			}
			if s < 0 || !d.seriesV1(s, e) {
				d.restore(k)
				return Stats{}, malformed("WriteRequest.timeseries: bad encoding", j-base)
			}
			j = e
		case num == 3 && wt == wtLen:
			s, e := lenField(b, j)
			if s < 0 {
				d.restore(k)
				return Stats{}, malformed("WriteRequest.metadata: bad length", j-base)
			}
			d.meta = append(d.meta, [2]int{s, e})
			j = e
		case num == 1 || num == 3:
			d.restore(k)
			return Stats{}, malformed("WriteRequest: wrong wire type", i-base)
		default:
			if j = skip(b, j, wt); j < 0 {
				d.restore(k)
				return Stats{}, malformed("WriteRequest: bad field", i-base)
			}
		}
		i = j
	}
	for mi, r := range d.meta {
		if !d.metadataV1(mi, r[0], r[1]) {
			d.restore(k)
			return Stats{}, malformed("WriteRequest.metadata: bad encoding", r[0]-base)
		}
	}
	return d.finish(k)
}

// labelV1 decodes a Label message b[s:e] into d.labels or dst.
func (d *Decoder) labelV1(dst *[]label, s, e int) bool {
	b := d.b[:e]
	var l label
	for i := s; i < e; {
		num, wt, j := tag(b, i)
		if j < 0 {
			return false
		}
		if (num == 1 || num == 2) && wt == wtLen {
			ss, se := lenField(b, j)
			if ss < 0 {
				return false
			}
			if num == 1 {
				l.name = signal.MakeStr(ss, se-ss)
			} else {
				l.value = signal.MakeStr(ss, se-ss)
			}
			i = se
			continue
		}
		if num == 1 || num == 2 {
			return false
		}
		if j = skip(b, j, wt); j < 0 {
			return false
		}
		i = j
	}
	*dst = append(*dst, l)
	return true
}

// seriesV1 decodes one TimeSeries b[s:e]: a first pass collects and checks
// labels and histograms, a second appends. False means malformed.
func (d *Decoder) seriesV1(s, e int) bool {
	b := d.b[:e]
	idKey := d.idKey // DecodeV1's, for this series only
	d.idKey = 0
	d.labels = d.labels[:0]
	samples, hists, exemplars := 0, 0, 0
	problem := ""
	// The label fields' span, when they are contiguous (as every encoder
	// writes them): ASCII there (tags and short lengths included) means
	// every name and value is valid UTF-8, checked in one pass.
	labStart, labEnd, contig := -1, -1, true
	// The labels first, in the usual encoding (0x0a len {0x0a len name
	// 0x12 len value} with short strings), in a loop without calls; the
	// general loop below takes any other field and encoding.
	i := s
	ls := d.labels
	// Labels named as the previous series' at the same place, framing and
	// name checked with one or two word compares against words prepared
	// per name (the scan's knownLabels): when all of them are, and no
	// other label follows, checkLabels need not compare the names.
	pw := d.prevKnown
	k := 0
	if d.prevOK {
		if cap(ls) < len(pw) {
			ls = make([]label, 0, len(pw)+len(pw)/2)
		}
		i, k = knownLabelsV1(d.b, i, e, pw, ls[:len(pw)])
		ls = ls[:k]
	}
	sameNames := d.prevOK && k == len(pw)
	for i+2 < e && b[i] == 1<<3|wtLen && b[i+1] < 0x80 {
		le := i + 2 + int(b[i+1])
		if le > e || le-i < 6 || b[i+2] != 1<<3|wtLen || b[i+3] >= 0x80 {
			break
		}
		ne := i + 4 + int(b[i+3])
		if ne+2 > le || b[ne] != 2<<3|wtLen || b[ne+1] >= 0x80 || ne+2+int(b[ne+1]) != le {
			break
		}
		ls = append(ls, label{signal.MakeStr(i+4, ne-i-4), signal.MakeStr(ne+2, le-ne-2), 0, 0})
		i = le
	}
	d.labels = ls
	if i > s {
		labStart, labEnd = s, i
	}
	// The usual series: its labels, then one plain sample in range that
	// ends it: held now, and neither loop below reads it.
	held := false
	if i < e {
		if v, ts, se := plainSample(d.b, i, e); se == e {
			if tn, ok := timeNs(ts, d.MaxTime); ok {
				d.resetSamples()
				d.bufSample(tn, 0, v)
				samples, held, i = 1, true, e
			}
		}
	}
	for i < e {
		num, wt, j := tag(b, i)
		if j < 0 {
			return false
		}
		if num >= 1 && num <= 4 && wt != wtLen {
			return false
		}
		switch num {
		case 1:
			ls, le := lenField(b, j)
			if ls < 0 {
				return false
			}
			if labStart < 0 {
				labStart = i
			} else if i != labEnd {
				contig = false
			}
			labEnd = le
			// The usual encoding, 0x0a len name 0x12 len value with short
			// strings, without the general field loop.
			if le-ls >= 4 && b[ls] == 1<<3|wtLen && b[ls+1] < 0x80 {
				ns := ls + 2
				ne := ns + int(b[ls+1])
				if ne+2 <= le && b[ne] == 2<<3|wtLen && b[ne+1] < 0x80 && ne+2+int(b[ne+1]) == le {
					d.labels = append(d.labels, label{signal.MakeStr(ns, ne-ns), signal.MakeStr(ne+2, le-ne-2), 0, 0})
					j = le
					break
				}
			}
			if !d.labelV1(&d.labels, ls, le) {
				return false
			}
			j = le
		case 2, 3:
			_, le := lenField(b, j)
			if le < 0 {
				return false
			}
			if num == 2 {
				samples++
			} else {
				exemplars++
			}
			j = le
		case 4:
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
			j = he
		default:
			if j = skip(b, j, wt); j < 0 {
				return false
			}
		}
		i = j
	}
	sameNames = sameNames && len(d.labels) == len(pw)
	if d.dropEmptyValues() {
		sameNames = false
	}
	nameIdx, p := d.checkLabels(!contig || labStart < 0 || !ascii(b[labStart:labEnd]), sameNames)
	if p == "" {
		p = problem
	}
	if p != "" {
		// Wire errors in samples are found in the second pass; a series
		// dropped here is still checked for them so malformed stays whole.
		if !d.scanSamplesV1(s, e) {
			return false
		}
		d.drop("series %s: %s", d.seriesString(), p)
		return true
	}
	name := d.labels[nameIdx].value
	// The memo (idmemo.go) holds the id of a series whose label fields
	// are exactly the bytes its key hashed: then the values are not hashed.
	key := idKey
	if !contig || labStart != s || labEnd != d.idLab {
		key = 0
	}
	attr, fam := d.seriesAttrs(nameIdx, name, 0, key)
	desc := uint32(0)
	if samples > 0 {
		desc = d.descOf(fam, name, descGauge)
	}
	last := -1
	exTime := int64(math.MinInt64) // the series' latest exemplar
	msgStart := len(d.m.Msgs)
	n0 := d.m.Len()
	// The second pass appends samples, histograms and exemplars: when the
	// labels are the series' first fields and contiguous (as every
	// encoder writes them), it starts past them instead of skipping each.
	from := s
	switch {
	case held:
		from = e
	case contig && labStart == s:
		from = labEnd
	}
	if !held {
		d.resetSamples()
	}
	for i := from; i < e; {
		// The usual sample, {0x09 value, 0x10 timestamp} and nothing
		// else, without the field loops (plainSample).
		if v, ts, se := plainSample(d.b, i, e); se > 0 {
			if tn, ok := timeNs(ts, d.MaxTime); ok {
				d.bufSample(tn, 0, v)
				i = se
				continue
			}
		}
		num, wt, j := tag(b, i)
		switch {
		case num == 2 && wt == wtLen:
			ss, se := lenField(b, j)
			var v uint64
			var ts int64
			if !sampleV1(b, ss, se, &v, &ts) {
				return false
			}
			tn, ok := timeNs(ts, d.MaxTime)
			if !ok {
				d.rollbackSeries(n0, msgStart, attr)
				d.drop("series %s: %s", d.seriesString(), timeProblem("sample timestamp", ts, d.MaxTime))
				return true
			}
			d.bufSample(tn, 0, v)
			j = se
		case num == 4 && wt == wtLen:
			hs, he := lenField(b, j)
			d.parseHist(b, hs, he)
			d.checkHist()
			tn, _ := msToNs(d.h.ts)
			d.flushSamples(desc, attr)
			d.appendHist(name, attr, tn, 0)
			last = d.m.Len() - 1
			j = he
		case num == 3 && wt == wtLen:
			xs, xe := lenField(b, j)
			d.exLabels = d.exLabels[:0]
			var v uint64
			var ts int64
			for x := xs; x < xe; {
				n2, w2, x2 := tag(b[:xe], x)
				if x2 < 0 {
					return false
				}
				switch {
				case n2 == 1 && w2 == wtLen:
					ls, le := lenField(b[:xe], x2)
					if ls < 0 || !d.labelV1(&d.exLabels, ls, le) {
						return false
					}
					x2 = le
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
			if p := d.checkExLabels(); p != "" || !ok {
				if p == "" {
					p = "exemplar timestamp out of range" + tsRange
				}
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
	return true
}

// rollbackSeries forgets the points of a series dropped in the second pass.
func (d *Decoder) rollbackSeries(n0, msgStart int, attr signal.Range) {
	m := d.m
	d.resetSamples()
	for p := n0; p < m.Len(); p++ {
		if m.Descs[m.Desc[p]].Type == signal.MetricGauge {
			d.st.Samples--
		} else {
			d.st.Histograms--
		}
	}
	d.st.Exemplars -= len(m.Msgs) - msgStart
	truncate(m, n0)
	m.Msgs = m.Msgs[:msgStart]
	m.Attrs.Key, m.Attrs.Type, m.Attrs.Val = m.Attrs.Key[:attr.Start], m.Attrs.Type[:attr.Start], m.Attrs.Val[:attr.Start]
}

// scanSamplesV1 checks the wire format of a series' samples and exemplars.
func (d *Decoder) scanSamplesV1(s, e int) bool {
	b := d.b[:e]
	for i := s; i < e; {
		num, wt, j := tag(b, i)
		if num == 2 && wt == wtLen {
			ss, se := lenField(b, j)
			var v uint64
			var ts int64
			if !sampleV1(b, ss, se, &v, &ts) {
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

// plainSample reads a Sample field at b[i:e] written as every encoder
// writes it: 0x12, a one-byte length, 0x09 and the value's 8 bytes, 0x10
// and the timestamp's varint, nothing else. It returns the value's bits,
// the timestamp and the index after the field; 0 when the field is
// anything else (sampleV1 reads it then). b may go on past e (the arena):
// a timestamp of up to 8 bytes (times to 2^56 ms) is read from one word,
// not a byte at a time, when b has a word there.
func plainSample(b []byte, i, e int) (uint64, int64, int) {
	if i < 0 || e-i < 13 || e > len(b) {
		return 0, 0, 0
	}
	q := b[i : i+13]
	l := int(q[1])
	if q[0] != 2<<3|wtLen || q[2] != 1<<3|wtI64 || q[11] != 2<<3|wtVarint || l < 11 || l > 20 || e-i-2 < l {
		return 0, 0, 0
	}
	if n := l - 10; n <= 8 && len(b)-i >= 20 {
		// The varint's bytes have their top bit set but the last, which
		// must be the field's last byte.
		w := binary.LittleEndian.Uint64(b[i+12 : i+20])
		if bits.TrailingZeros64(^w&0x8080808080808080) != 8*n-1 {
			return 0, 0, 0
		}
		return binary.LittleEndian.Uint64(q[3:]), int64(varint8(w & (^uint64(0) >> (64 - 8*uint(n))))), i + 2 + l
	}
	ts, j := uvarint(b[:i+2+l], i+12)
	if j != i+2+l {
		return 0, 0, 0
	}
	return binary.LittleEndian.Uint64(q[3:]), int64(ts), j
}

// varint8 is the value of the varint whose bytes are w's, the last with
// its top bit clear and the bytes after it zero: the 7-bit groups
// gathered in three steps.
func varint8(w uint64) uint64 {
	w &= 0x7f7f7f7f7f7f7f7f
	w = w&0x007f007f007f007f | w>>1&0x3f803f803f803f80
	w = w&0x00003fff00003fff | w>>2&0x0fffc0000fffc000
	return w&0x000000000fffffff | w>>4&0x00fffffff0000000
}

// sampleV1 decodes a Sample {1: double value, 2: int64 timestamp}.
func sampleV1(b []byte, s, e int, v *uint64, ts *int64) bool {
	if s < 0 {
		return false
	}
	b = b[:e]
	for i := s; i < e; {
		// Fast path for the usual encoding: 0x09 value, 0x10 timestamp.
		switch b[i] {
		case 1<<3 | wtI64:
			x, j := fixed64(b, i+1)
			if j < 0 {
				return false
			}
			*v, i = x, j
			continue
		case 2<<3 | wtVarint:
			x, j := uvarint(b, i+1)
			if j < 0 {
				return false
			}
			*ts, i = int64(x), j
			continue
		}
		num, wt, j := tag(b, i)
		if j < 0 || num <= 2 {
			return false
		}
		if j = skip(b, j, wt); j < 0 {
			return false
		}
		i = j
	}
	return true
}

// metadataV1 decodes MetricMetadata b[s:e] {1: type, 2: family name,
// 4: help, 5: unit} and applies it to the descriptors of that family.
func (d *Decoder) metadataV1(mi, s, e int) bool {
	typ, name, help, unit, ok := parseMetadataV1(d.b[s:e])
	if !ok {
		return false
	}
	if len(name) == 0 {
		d.drop("metadata[%d]: no metric_family_name", mi)
		return true
	}
	d.metadataFor(name, typ, help, unit)
	return true
}

// parseMetadataV1 reads a MetricMetadata message {1: type, 2: family
// name, 4: help, 5: unit}; the slices alias b. ok is false when it is
// malformed.
func parseMetadataV1(b []byte) (typ uint64, name, help, unit []byte, ok bool) {
	for i := 0; i < len(b); {
		num, wt, j := tag(b, i)
		if j < 0 {
			return
		}
		switch {
		case num == 1 && wt == wtVarint:
			if typ, j = uvarint(b, j); j < 0 {
				return
			}
		case (num == 2 || num == 4 || num == 5) && wt == wtLen:
			ss, se := lenField(b, j)
			if ss < 0 {
				return
			}
			switch num {
			case 2:
				name = b[ss:se]
			case 4:
				help = b[ss:se]
			case 5:
				unit = b[ss:se]
			}
			j = se
		case num == 1 || num == 2 || num == 4 || num == 5:
			return
		default:
			if j = skip(b, j, wt); j < 0 {
				return
			}
		}
		i = j
	}
	return typ, name, help, unit, true
}

// metadataFor applies metadata of a family to the descriptors of its
// names: the family itself and, for histograms and summaries, _bucket,
// _sum and _count (a counter's family may also lack _total).
func (d *Decoder) metadataFor(name []byte, typ uint64, help, unit []byte) {
	if typ > math.MaxUint8 {
		typ = 0
	}
	for _, suf := range [...]string{"", "_total", "_bucket", "_sum", "_count"} {
		d.key = append(append(d.key[:0], name...), suf...)
		if x, ok := d.names[unsafex.String(d.key)]; ok {
			d.applyMetadata(&d.descPool[x], typ, help, unit)
		}
	}
}
