package prw

import (
	"bytes"
	"unicode/utf8"

	"github.com/sluice-dev/sluice/internal/signal"
)

// ScanV2 scans a remote write 2.0 io.prometheus.write.v2.Request
// (snappy-decoded) as ScanV1 scans 1.0: it returns false when the request
// is not the plain case, and the caller decodes it with DecodeV2.
//
// The plain 2.0 case: the symbols first (valid UTF-8, the first one
// empty), then the series, each with its label references first (one
// packed field, in range, in pairs, names sorted, unique, non-empty, a
// non-empty __name__), then float samples (timestamps the lake stores),
// optionally the series' metadata (references in range; applied when the
// record is decoded: Attrs counts its attributes as an upper bound) and
// created timestamp, and
// nothing else (no histograms or exemplars, no unknown fields). Symbols
// are hashed once per request however many series refer to them, so the
// series ids cost less than in 1.0. FuzzScanV2 checks the scan against
// DecodeV2.
func (s *Scanner) ScanV2(body []byte) bool {
	s.reset(body)
	s.v2 = true
	// s.sym aliases body, as s.body does, until the next call.
	var i int
	var ok bool
	if s.sym, i, ok = leadingSymbols(body, s.sym[:0]); !ok {
		return false // the decoder names it
	}
	n := len(s.sym)
	if cap(s.symHash) < n {
		s.symHash = make([]uint64, n)
		s.symName = make([]uint32, n)
	}
	s.symHash, s.symName = s.symHash[:n], s.symName[:n]
	clear(s.symHash)
	clear(s.symName)
	s.meta = false
	for i < len(body) {
		if body[i] != 5<<3|wtLen { // symbols after a series, unknown fields: the decoder
			return false
		}
		st, e := lenField(body, i+1)
		if st < 0 || !s.seriesV2(body[:e], st) {
			return false
		}
		i = e
	}
	if s.meta {
		// Metadata puts a type and a unit attribute on each metric
		// descriptor that has none yet, at most two per name: Attrs
		// is an upper bound then (the consumer's limit check decodes
		// when the bound is past the limit).
		s.Attrs += 2 * len(s.Names)
	}
	return true
}

// hashSym returns the xxhash of symbol x, computed once per call. A
// symbol whose hash is 0 is hashed each time it is asked for: still right.
func (s *Scanner) hashSym(x uint32) uint64 {
	h := s.symHash[x]
	if h == 0 {
		h = hashValue(s.sym[x])
		s.symHash[x] = h
	}
	return h
}

// refAt reads one label reference of the packed field b[i:e].
func refAt(b []byte, i int) (uint64, int) {
	if b[i] < 0x80 {
		return uint64(b[i]), i + 1
	}
	return uvarint(b, i)
}

// seriesV2 scans one 2.0 TimeSeries b[i:len(b)].
func (s *Scanner) seriesV2(b []byte, i int) bool {
	e := len(b)
	if i >= e || b[i] != 1<<3|wtLen {
		return false // no labels, or not first: the decoder
	}
	ls, le := lenField(b, i+1)
	if ls < 0 {
		return false
	}
	nsym := uint64(len(s.sym))
	var sum uint64
	nameRef := -1
	k, nAttrs := 0, 0
	same := true // the name references so far are those of the previous series
	var prev []byte
	fields := s.fields[:0]
	for p := ls; p < le; {
		nr, p1 := refAt(b[:le], p)
		if p1 < 0 || p1 >= le {
			return false // malformed or odd
		}
		vr, p2 := refAt(b[:le], p1)
		if p2 < 0 || nr >= nsym || vr >= nsym {
			return false
		}
		p = p2
		n := s.sym[nr]
		if same && k < len(s.prevRef) && s.prevRef[k] == uint32(nr) {
			// Sorted and unique as in the previous series.
		} else {
			if k > 0 && bytes.Compare(prev, n) >= 0 || len(n) == 0 {
				return false // unsorted, duplicate or empty: the decoder sorts or refuses
			}
			same = false
			if k < len(s.prevRef) {
				s.prevRef[k] = uint32(nr)
			} else {
				s.prevRef = append(s.prevRef, uint32(nr))
			}
		}
		if string(n) == nameLabel {
			nameRef = int(vr)
		} else {
			if len(s.sym[vr]) == 0 {
				return false // an empty value: the decoder drops the label
			}
			if !s.LabelKeys {
				sum += signal.SeriesPair(s.hashSym(uint32(nr)), signal.ValueString, s.hashSym(uint32(vr)))
			}
			nAttrs++
		}
		if s.LabelKeys {
			fields = appendLabelFieldShort(fields, n, s.sym[vr])
		}
		prev = n
		k++
	}
	if k != len(s.prevRef) {
		s.prevRef = s.prevRef[:k]
	}
	if nameRef < 0 || len(s.sym[nameRef]) == 0 {
		return false // no or empty __name__
	}
	lab := [2]int32{int32(ls), int32(le)}
	ni, nh := s.symNameIndex(uint32(nameRef))
	var id uint64
	if s.LabelKeys {
		s.fields = fields
		id = LabelsKey(fields)
	} else {
		id = signal.SeriesID(nh, seriesResHash, sum)
	}
	samples := 0
	meta, created := false, false
	// The start timestamps the decoder ignores (startOf): a sample's own,
	// or the series' created timestamp for a sample without one (stZero
	// of them so far, from s.Time[t0]).
	var createdMs int64
	t0, stZero := len(s.Time), 0
	for i = le; i < e; {
		switch b[i] {
		case 2<<3 | wtLen:
			ss, se := lenField(b, i+1)
			var v uint64
			var ts, st int64
			if !sampleV2(b, ss, se, &v, &ts, &st) {
				return false
			}
			tn, ok := timeNs(ts, s.MaxTime)
			if _, ok2 := msToNs(st); !ok || !ok2 {
				return false // the decoder drops the series
			}
			if st == 0 {
				stZero++
				st = createdMs
			}
			if st != 0 && st >= ts {
				s.StartsIgnored++
			}
			s.Name = append(s.Name, ni)
			s.ID = append(s.ID, id)
			s.Time = append(s.Time, tn)
			s.lab = append(s.lab, lab)
			samples++
			i = se
		case 5<<3 | wtLen:
			ms, me := lenField(b, i+1)
			if meta || ms < 0 || !metadataV2(b[:me], ms, nsym) {
				return false
			}
			meta, s.meta = true, true
			i = me
		case 6<<3 | wtVarint:
			v, j := uvarint(b, i+1)
			if created || j < 0 {
				return false
			}
			if _, ok := msToNs(int64(v)); !ok {
				return false
			}
			created, createdMs = true, int64(v)
			if stZero > 0 && createdMs != 0 {
				// After samples, as encoders write it: the samples so
				// far without a start of their own.
				if stZero == len(s.Time)-t0 {
					for _, tn := range s.Time[t0:] {
						if tn <= createdMs*1e6 {
							s.StartsIgnored++
						}
					}
				} else {
					s.StartsIgnored += startsAfter(b[:i], le, createdMs)
				}
			}
			i = j
		default: // histograms, exemplars, a second labels field, unknown fields
			return false
		}
	}
	if samples == 0 {
		return false // the decoder keeps its labels but no point
	}
	s.Attrs += nAttrs
	s.MaxAttrs = max(s.MaxAttrs, nAttrs)
	s.Series++
	return true
}

// startsAfter counts the samples of the series fields b[i:] (read
// already) without a start timestamp of their own whose time is not after
// created (ms): the decoder ignores created for them (startOf).
func startsAfter(b []byte, i int, created int64) int {
	n := 0
	for i < len(b) {
		num, wt, j := tag(b, i)
		if num == 2 && wt == wtLen {
			ss, se := lenField(b, j)
			var v uint64
			var ts, st int64
			if sampleV2(b, ss, se, &v, &ts, &st) && st == 0 && created >= ts {
				n++
			}
			i = se
			continue
		}
		if i = skip(b, j, wt); i < 0 {
			break // read already: cannot happen
		}
	}
	return n
}

// metadataV2 checks a 2.0 Metadata message b[i:len(b)] as the decoder
// reads it: type, help and unit references varints, the references within
// the symbols table, other fields skipped.
func metadataV2(b []byte, i int, nsym uint64) bool {
	var help, unit uint64
	for i < len(b) {
		num, wt, j := tag(b, i)
		if j < 0 {
			return false
		}
		if num == 1 || num == 3 || num == 4 {
			if wt != wtVarint {
				return false
			}
			var v uint64
			if v, j = uvarint(b, j); j < 0 {
				return false
			}
			switch num {
			case 3:
				help = v
			case 4:
				unit = v
			}
		} else if j = skip(b, j, wt); j < 0 {
			return false
		}
		i = j
	}
	return help < nsym && unit < nsym
}

// symNameIndex is nameIndex for a metric name given as a symbol.
func (s *Scanner) symNameIndex(ref uint32) (uint32, uint64) {
	if x := s.symName[ref]; x > 0 {
		return x - 1, s.nameHash[x-1]
	}
	name := s.sym[ref]
	// Another symbol with the same bytes (a sender that did not
	// deduplicate) is the same name.
	x, h := s.nameIndex(name)
	s.symName[ref] = x + 1
	return x, h
}

// labelsV2 is Labels for a 2.0 series: r is its packed label references.
func (s *Scanner) labelsV2(r [2]int32, dst []Label) []Label {
	b := s.body[:r[1]]
	for p := int(r[0]); p < len(b); {
		nr, p1 := refAt(b, p)
		vr, p2 := refAt(b, p1)
		p = p2
		if n := s.sym[nr]; string(n) != nameLabel {
			dst = append(dst, Label{n, s.sym[vr]})
		}
	}
	return dst
}

// leadingSymbols appends to dst the symbols table at the start of body (the
// plain case: every symbols field before the first series), checks that
// its first symbol is "" and every symbol valid UTF-8, and returns the
// table (aliasing body) and the offset of the field after it; false when
// a check fails (the decoder names the problem).
func leadingSymbols(body []byte, dst [][]byte) ([][]byte, int, bool) {
	i := 0
	symStart := -1
	for i < len(body) && body[i] == 4<<3|wtLen {
		st, e := lenField(body, i+1)
		if st < 0 {
			return dst, 0, false
		}
		if symStart < 0 {
			symStart = i
		}
		dst = append(dst, body[st:e])
		i = e
	}
	if len(dst) > 0 {
		if len(dst[0]) != 0 {
			return dst, 0, false
		}
		if !ascii(body[symStart:i]) {
			for _, sym := range dst {
				if !utf8.Valid(sym) {
					return dst, 0, false
				}
			}
		}
	}
	return dst, i, true
}
