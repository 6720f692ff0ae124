package prw

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"

	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/unsafex"
)

// Scanner checks a remote write 1.0 request without decoding it into a
// batch, for a receiver that queues the request as received and needs no
// batch (no processing rule reads it): per sample it keeps only what the
// live statistics need, its metric name, series id and time.
//
// The scan takes only the plain case, the one Prometheus and vmagent send
// in steady state: every series has its labels first (sorted by name,
// unique, valid UTF-8, a non-empty __name__), then one or more float
// samples with timestamps the lake stores, and nothing else (no
// histograms, exemplars, metadata or unknown fields). Anything else makes
// ScanV1 return false, and the caller runs the Decoder, which finds and
// names every problem as before; so the scan never answers differently
// from the decoder, it only answers the plain case faster. FuzzScanV1
// checks that a request the scan accepts decodes without error into
// exactly the samples, names, ids and times the scan found.
//
// A Scanner holds scratch space reused across calls; use one per
// goroutine. What ScanV1 returns aliases body: valid while body is.
type Scanner struct {
	// Names are the distinct metric names of the request, aliasing body.
	Names [][]byte
	// Per sample: its name (index in Names), its series id (as
	// signal.Metrics.ComputeSeriesIDs computes it for the decoded point;
	// with LabelKeys its series' LabelsKey instead) and its time in
	// nanoseconds.
	Name []uint32
	ID   []uint64
	Time []int64
	// LabelKeys makes ID hold each series' LabelsKey (labelskey.go), all
	// the live statistics need, instead of its lake series id: one hash of
	// the series' label fields instead of one per label value and a mix
	// per label. The scan then also takes only labels in canonical
	// encoding (minimal varints), which the key assumes; others go to the
	// decoder. Set it before a scan; the lake's own scans (PlainAppender)
	// need the ids and leave it unset.
	LabelKeys bool
	// Attrs is the attribute count the decoded batch would hold (labels
	// other than __name__ over all series; in 2.0 with metadata an upper
	// bound, ScanV2); MaxAttrs the most of one series. The consumer checks
	// its attribute limits with them.
	Attrs, MaxAttrs int
	// Series is the number of series (TimeSeries messages).
	Series int
	// StartsIgnored counts 2.0 start (created) timestamps not before
	// their sample's time, which the decoder and PlainAppender2 store as
	// none (Stats.StartsIgnored).
	StartsIgnored int
	// MaxTime is the latest sample time (ms) the scan takes (times.go; 0:
	// no bound): a later one leaves the request to the decoder, which
	// refuses its series with the same MaxTime.
	MaxTime int64

	lab  [][2]int32 // per sample: its series' label fields in body
	body []byte
	// Metric names seen in any call (owned keys, so lookups need no
	// copy and the map is not refilled per request): name -> nameTab.
	names    map[string]uint32
	nameTab  []nameEntry
	nameMemo [256]uint32 // nameTab index + 1 by memoSlot, 0 empty (nameIndex)
	call     uint32      // stamps the nameTab entries used in this call
	nameHash []uint64    // per Names entry
	prev     []prevLabel // the labels of the previous series
	vals     []valSpan   // the label values of the series scanned
	// prevNameAt is the place of __name__ among prev (-1: none).
	prevNameAt int
	last       uint32 // the Names entry of the previous series

	// 2.0 (scan2.go): lab holds a series' packed label references.
	v2      bool
	sym     [][]byte // the symbols, aliasing body
	symHash []uint64 // xxhash per symbol, 0 until computed
	symName []uint32 // per symbol: index in Names + 1, 0 until looked up
	prevRef []uint32 // label name references of the previous series
	fields  []byte   // a series' label fields in canonical encoding (LabelKeys)
	meta    bool     // a series had metadata
}

// Samples is the number of float samples the scan found.
func (s *Scanner) Samples() int { return len(s.ID) }

// NameHashes is xxhash.Sum64 of each Names entry (the statistics take it
// instead of hashing the names again); aliases the Scanner's scratch.
func (s *Scanner) NameHashes() []uint64 { return s.nameHash }

// seriesResHash is the resource part of a remote-write point's series id:
// the decoder appends one resource without attributes.
var seriesResHash = signal.SeriesResource(0)

// ScanV1 scans a remote write 1.0 prometheus.WriteRequest (snappy-decoded).
// It returns false when the request is not the plain case (see Scanner):
// the caller must then decode it with a Decoder, which reports what is
// wrong with it, if anything.
func (s *Scanner) ScanV1(body []byte) bool {
	s.reset(body)
	for i := 0; i < len(body); {
		if body[i] != 1<<3|wtLen { // a TimeSeries; metadata and the rest go to the decoder
			return false
		}
		st, e := lenField(body, i+1)
		if st < 0 || !s.seriesV1(body[:e], st) {
			return false
		}
		i = e
	}
	return true
}

// reset prepares a scan of body.
func (s *Scanner) reset(body []byte) {
	s.Names, s.Name, s.ID, s.Time, s.lab = s.Names[:0], s.Name[:0], s.ID[:0], s.Time[:0], s.lab[:0]
	s.nameHash, s.prev, s.prevRef = s.nameHash[:0], s.prev[:0], s.prevRef[:0]
	s.prevNameAt = -1
	s.Attrs, s.MaxAttrs, s.Series, s.last, s.StartsIgnored = 0, 0, 0, 0, 0
	s.body, s.v2 = body, false
	if s.names == nil || len(s.nameTab) >= maxScanNames {
		s.names, s.nameTab = make(map[string]uint32, 64), s.nameTab[:0]
		clear(s.nameMemo[:])
	}
	if s.call++; s.call == 0 { // wrapped: no stamp may look current
		for i := range s.nameTab {
			s.nameTab[i].stamp = 0
		}
		s.call = 1
	}
}

// maxScanNames bounds the metric names a Scanner remembers across calls;
// past it the table starts again (at the next call).
const maxScanNames = 1 << 14

// nameEntry is a remembered metric name: its hash, and its index in Names
// when stamp is the current call.
type nameEntry struct {
	hash       uint64
	stamp, idx uint32
	name       string // the map's key
}

// labelAt decodes the Label message at b[i] (a field 1 tag) in the only
// form the scan takes: name then value, both present. It returns the name
// and value and the end of the field, or end < 0.
func labelAt(b []byte, i int) (name, value []byte, end int) {
	// The usual encoding, short strings: 0x0a len 0x0a len name 0x12 len value.
	if i+4 < len(b) && b[i+1] < 0x80 && b[i+2] == 1<<3|wtLen && b[i+3] < 0x80 {
		le := i + 2 + int(b[i+1])
		ne := i + 4 + int(b[i+3])
		if le <= len(b) && ne+2 <= le && b[ne] == 2<<3|wtLen && b[ne+1] < 0x80 && ne+2+int(b[ne+1]) == le {
			return b[i+4 : ne], b[ne+2 : le], le
		}
	}
	ls, le := lenField(b, i+1)
	if ls < 0 || ls >= le || b[ls] != 1<<3|wtLen {
		return nil, nil, -1
	}
	ns, ne := lenField(b[:le], ls+1)
	if ns < 0 || ne >= le || b[ne] != 2<<3|wtLen {
		return nil, nil, -1
	}
	vs, ve := lenField(b[:le], ne+1)
	if vs < 0 || ve != le {
		return nil, nil, -1
	}
	return b[ns:ne], b[vs:ve], le
}

// seriesV1 scans one TimeSeries b[i:len(b)].
//
// The label loop calls nothing in the usual case: a call spills the
// loop's live registers and reloads them after it (Go's calling
// convention saves none across a call), which cost more instructions per
// label than the work itself. The label's name is compared with the
// previous series' in words prepared once (prevLabel), and the values are
// hashed afterwards in a loop of their own (vals).
func (s *Scanner) seriesV1(b []byte, i int) bool {
	e := len(b)
	labStart := i
	var name []byte
	k := 0
	same := true // the names so far are those of the previous series
	var prev []byte
	vals := s.vals[:0]
	for i < e && b[i] == 1<<3|wtLen {
		if same && k < len(s.prev) {
			// The usual case: labels named as the previous series'.
			k0, n0 := k, len(vals)
			i, k, vals = knownLabels(b, i, k, s.prev, vals)
			if at := s.prevNameAt; at >= k0 && at < k {
				// __name__ is among them: its value is the name, not an
				// attribute (start -1: the hash loop skips it).
				v := &vals[n0+at-k0]
				name, v.start = b[v.start:v.end], -1
			}
			if k > k0 {
				prev = s.prev[k-1].name
			}
			if i >= e || b[i] != 1<<3|wtLen {
				break
			}
		}
		n, v, le := labelAt(b, i)
		if le < 0 || s.LabelKeys && le-i != labelFieldLen(len(n), len(v)) {
			s.vals = vals
			return false // malformed, or a varint longer than it needs (the key hashes the bytes)
		}
		var kh uint64
		if same && k < len(s.prev) && sameName(s.prev[k].name, n) {
			// Sorted and unique as in the previous series.
			kh = s.prev[k].hash
		} else {
			if k > 0 && bytes.Compare(prev, n) >= 0 || len(n) == 0 {
				s.vals = vals
				return false // unsorted, duplicate or empty: the decoder sorts or refuses
			}
			same = false
			kh = xxhash.Sum64(n)
			if k < len(s.prev) {
				s.prev[k] = newPrevLabel(n, kh)
			} else {
				s.prev = append(s.prev, newPrevLabel(n, kh))
			}
		}
		if string(n) == nameLabel {
			name = v
			s.prevNameAt = k
		} else {
			vals = append(vals, valSpan{int32(le - len(v)), int32(le), kh}) // the value ends the field (labelAt)
		}
		prev = n
		k++
		i = le
	}
	s.vals = vals
	var sum uint64
	nAttrs := 0
	if s.LabelKeys {
		for _, v := range vals {
			if v.start >= 0 {
				if v.start == v.end {
					return false // an empty value: the decoder drops the label
				}
				nAttrs++
			}
		}
	} else {
		for _, v := range vals {
			if v.start >= 0 {
				if v.start == v.end {
					return false
				}
				sum += signal.SeriesPair(v.nameHash, signal.ValueString, hashValue(b[v.start:v.end]))
				nAttrs++
			}
		}
	}
	// ASCII over the label fields (tags and lengths included) means every
	// name and value is valid UTF-8: one pass for the usual case.
	if !ascii(b[labStart:i]) && !s.validUTF8(b[labStart:i]) {
		return false
	}
	if k != len(s.prev) {
		s.prev = s.prev[:k]
	}
	if len(name) == 0 {
		return false // no or empty __name__
	}
	lab := [2]int32{int32(labStart), int32(i)}
	ni, nh := s.nameIndex(name)
	var id uint64
	if s.LabelKeys {
		id = LabelsKey(b[labStart:i])
	} else {
		id = signal.SeriesID(nh, seriesResHash, sum)
	}
	samples := 0
	for i < e {
		if b[i] != 2<<3|wtLen { // histograms, exemplars, labels after samples, unknown fields
			return false
		}
		ss, se := lenField(b, i+1)
		var v uint64
		var ts int64
		if !sampleV1(b, ss, se, &v, &ts) {
			return false
		}
		tn, ok := timeNs(ts, s.MaxTime)
		if !ok { // the decoder drops the series
			return false
		}
		s.Name = append(s.Name, ni)
		s.ID = append(s.ID, id)
		s.Time = append(s.Time, tn)
		s.lab = append(s.lab, lab)
		samples++
		i = se
	}
	if samples == 0 {
		return false // the decoder keeps its labels but no point
	}
	s.Attrs += nAttrs
	s.MaxAttrs = max(s.MaxAttrs, nAttrs)
	s.Series++
	return true
}

// knownLabels scans the labels from b[i] on that have the names the
// previous series had from place k on, in the usual encoding (one-byte
// lengths, names of at most 13 bytes): the bytes after a field's length up
// to its value's length (tag, name length, name, tag) are those of
// prev[k], one or two word compares, and the name's hash is prev[k]'s. It
// appends every value to vals (__name__'s too: the caller takes it out)
// and returns where it stopped (the first label it does not take), the
// place there, and vals. It calls nothing in its loop, and keeps few
// values live: a call there spilled the loop's registers and reloaded them
// after it, per label (Go's calling convention keeps no register across a
// call), which cost more instructions than the label's own work.
func knownLabels(b []byte, i, k int, prev []prevLabel, vals []valSpan) (int, int, []valSpan) {
	if need := len(vals) + len(prev) - k; need > cap(vals) {
		vals = append(make([]valSpan, 0, need+need/2), vals...)
	}
	out := vals[len(vals):cap(vals)]
	j := 0
	for ; k < len(prev) && i+10 <= len(b) && b[i] == 1<<3|wtLen; k++ {
		p := &prev[k]
		fl := p.fixed
		if fl == 0 || i+3+fl > len(b) {
			break
		}
		w := binary.LittleEndian.Uint64(b[i+2:])
		if fl <= 8 {
			if w&p.mask != p.w0 {
				break
			}
		} else if w != p.w0 || binary.LittleEndian.Uint64(b[i+2+fl-8:]) != p.w1 {
			break
		}
		l, vl := int(b[i+1]), int(b[i+2+fl])
		le := i + 2 + l
		if l >= 0x80 || vl >= 0x80 || le != i+3+fl+vl {
			break
		}
		out[j] = valSpan{int32(i + 3 + fl), int32(le), p.hash}
		j++
		i = le
	}
	return i, k, vals[:len(vals)+j]
}

// prevLabel is a label name of the previous series: the name (aliasing
// the body scanned), its xxhash and, for names of at most 13 bytes, the
// bytes a Label field with that name has after the field's length and
// before the value's length (0x0a, the name's length, the name, 0x12),
// fixed bytes long: its first 8 bytes in w0 (mask keeps fixed of them
// when fewer) and its last 8 in w1.
type prevLabel struct {
	name   []byte
	hash   uint64
	w0, w1 uint64
	mask   uint64
	fixed  int // 0: the name is too long for the word compare
}

func newPrevLabel(name []byte, hash uint64) prevLabel {
	p := prevLabel{name: name, hash: hash}
	if fixed, w0, m0, w1, ok := labelFrame(name); ok {
		p.fixed, p.w0, p.mask, p.w1 = fixed, w0, m0, w1
	}
	return p
}

// labelFrame is the fixed start of a Label message named name, as every
// encoder writes it: the name's tag, its one-byte length, its bytes and
// the value's tag (fixed bytes: the name's length plus 3). w0 is its first 8 bytes as a
// little-endian word, masked (m0) to fewer when it is shorter; w1 the 8
// bytes ending at its end when it is longer than 8. ok is false for a name
// of more than 13 bytes, whose start does not fit two words.
func labelFrame(name []byte) (fixed int, w0, m0, w1 uint64, ok bool) {
	if len(name) > 13 {
		return 0, 0, 0, 0, false
	}
	var f [16]byte
	f[0], f[1] = 1<<3|wtLen, byte(len(name))
	copy(f[2:], name)
	f[2+len(name)] = 2<<3 | wtLen
	fixed = len(name) + 3
	w0, m0 = binary.LittleEndian.Uint64(f[:]), ^uint64(0)
	if fixed < 8 {
		m0 = 1<<(8*fixed) - 1
		w0 &= m0
	}
	if fixed > 8 {
		w1 = binary.LittleEndian.Uint64(f[fixed-8:])
	}
	return fixed, w0, m0, w1, true
}

// valSpan is a label value of the series being scanned: its place in the
// series' bytes and its name's hash.
type valSpan struct {
	start, end int32
	nameHash   uint64
}

// validUTF8 checks every name and value of the label fields b.
func (s *Scanner) validUTF8(b []byte) bool {
	for p := 0; p < len(b); {
		n, v, le := labelAt(b, p)
		if le < 0 || !utf8.Valid(n) || !utf8.Valid(v) {
			return false
		}
		p = le
	}
	return true
}

// nameIndex returns the index in Names of name and its hash, adding it on
// first sight in this call.
func (s *Scanner) nameIndex(name []byte) (uint32, uint64) {
	// Series of one family often follow each other.
	if int(s.last) < len(s.Names) && bytes.Equal(s.Names[s.last], name) {
		return s.last, s.nameHash[s.last]
	}
	// Then a direct-mapped memo of the names table, by a cheap hash of
	// the name's first and last words: a load and a compare instead of
	// the map's hash of the whole name and probe (a 1,500-series request
	// of 50 interleaved names asked the map for nearly every series).
	m := &s.nameMemo[memoSlot(name)]
	t := *m - 1
	if *m == 0 || string(name) != s.nameTab[t].name {
		var ok bool
		t, ok = s.names[unsafex.String(name)] // a lookup: the key is not kept
		if !ok {
			t = uint32(len(s.nameTab))
			key := string(name)
			s.names[key] = t
			s.nameTab = append(s.nameTab, nameEntry{hash: xxhash.Sum64(name), name: key})
		}
		*m = t + 1
	}
	e := &s.nameTab[t]
	if e.stamp != s.call {
		e.stamp, e.idx = s.call, uint32(len(s.Names))
		s.Names = append(s.Names, name)
		s.nameHash = append(s.nameHash, e.hash)
	}
	s.last = e.idx
	return e.idx, e.hash
}

// memoSlot is the nameMemo slot of name.
func memoSlot(name []byte) uint8 {
	var x uint64
	if n := len(name); n >= 8 {
		x = binary.LittleEndian.Uint64(name) ^ bits.RotateLeft64(binary.LittleEndian.Uint64(name[n-8:]), 29)
	} else {
		for _, c := range name {
			x = x<<8 | uint64(c)
		}
	}
	return uint8((x ^ uint64(len(name))) * 0x9E3779B97F4A7C15 >> 56)
}

// Label is one label of a scanned series, aliasing the scanned body.
type Label struct{ Name, Value []byte }

// Labels appends the labels of sample i's series other than __name__,
// sorted by name, to dst. Valid after a ScanV1 or ScanV2 that returned
// true, while its body is.
func (s *Scanner) Labels(i int, dst []Label) []Label {
	r := s.lab[i]
	if s.v2 {
		return s.labelsV2(r, dst)
	}
	b := s.body[:r[1]]
	for p := int(r[0]); p < len(b); {
		n, v, le := labelAt(b, p)
		if le < 0 {
			break // the scan checked it: cannot happen
		}
		if string(n) != nameLabel {
			dst = append(dst, Label{n, v})
		}
		p = le
	}
	return dst
}
