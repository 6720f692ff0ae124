package prwexporter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/s2"
	"github.com/prometheus/prometheus/prompb"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/exporter/sending"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/unsafex"
)

// Splitting remote-write records by series, without decoding them: the
// pass-through of lanes (Config.Concurrency above 1) and of shard mode.
// A group of consecutive records of one version and tenant (up to
// maxRawBytes snappy-decoded) is cut into parts, part b being lane b%nl
// of endpoint b/nl in shard mode and lane b of every endpoint otherwise;
// each series goes to the part of its labels' hash (sorted by name,
// hashed as seriesHash hashes the convert path's series: laneOf for the
// lane, the ring's pick for the endpoint), so a series is in the same
// lane and on the same endpoint whichever path carried it, in every batch
// and after a restart.
//
//   - 1.0: a TimeSeries field is copied as its bytes (its exemplars and
//     histograms in it); the other fields of the request (metadata, per
//     metric family) go to lane 0 of every endpoint, alone where no series
//     does (Prometheus sends metadata in requests without series).
//   - 2.0: each part has a symbols table of its own, "" first, holding the
//     symbols its series use, added as they first appear, each once
//     across the group's records (the specification's SHOULD; groupID); a series is
//     copied with its label references, its exemplars' and its metadata's
//     help and unit references rewritten into its part's table, every
//     other field (samples, histograms, created timestamp) as its bytes.
//     Fields of the request other than symbols and series are dropped,
//     as a decoder skips them.
//
// Each part is snappy-encoded once and sent to its endpoints in parallel;
// the group is done when every part is (sendSplit), and the next group
// goes after it, so a series' samples never overtake each other.

var errBadRecord = errors.New("remote-write record does not parse")

// splitter cuts a group of records into parts (see above).
type splitter struct {
	v2    bool
	nl    int // lanes per endpoint
	shard bool
	// only: with shard, the one endpoint whose parts are filled (the
	// exporter of one endpoint, Config.Only); the others' series are
	// hashed and skipped, not copied or rewritten. -1: every endpoint's.
	only  int
	ring  *sending.Ring
	parts []splitPart
	meta  []byte // 1.0: the non-series fields, for lane 0 of every endpoint
	marks []splitMark

	// 2.0: the group's symbols, each once, by their bytes (keys alias
	// garena, which only grows until reset clears the map: a key's bytes
	// never change while it is in the map) -> group id; gid is a symbol
	// of the record at hand -> its group id, plus 1 (0: not looked up
	// yet). A part's table holds a symbol once across the group's records
	// (splitPart.pref).
	gsym   map[string]uint32
	garena []byte
	gid    []uint32

	// Scratch.
	syms [][]byte // 2.0: the symbols of the record at hand
	refs []uint32 // 2.0: a series' label references
	// 2.0: the label reference fields of the series hashV2 read (1: one
	// packed list, the encoders' form)
	labelFields int
	lbls        []prompb.Label // a series' labels (aliasing the record)
	hbuf        []byte         // the labels, as hashed
	ts, sub     []byte         // 2.0: a rewritten series, one of its messages
	rb          []byte         // 2.0: rewritten packed references
}

// splitPart is one request of a group.
type splitPart struct {
	body  []byte   // 1.0: TimeSeries fields (and metadata); 2.0: the symbols, then the series
	ser   []byte   // 2.0: TimeSeries fields
	nsym  uint64   // 2.0: symbols in body
	remap []uint32 // 2.0: a symbol reference of the record at hand -> this part's, plus 1 (0: not in it yet)
	// 2.0: a group symbol id -> this part's reference, plus 1 (0: not in
	// it yet), and the other way (refG[0] is "", no group symbol)
	pref, refG []uint32
	series     int
	payload    []byte // snappy
}

// splitMark is a part's state before the record at hand, to undo it.
type splitMark struct {
	body, ser, series int
	nsym              uint64
}

// newSplitter returns a splitter of nl lanes per endpoint, over the ring's
// endpoints when shard.
func newSplitter(nl int, shard bool, ring *sending.Ring, neps int) *splitter {
	n := nl
	if shard {
		n *= neps
	}
	return &splitter{nl: nl, shard: shard, only: -1, ring: ring, parts: make([]splitPart, n), marks: make([]splitMark, n)}
}

// skips reports whether part b is another exporter's (only).
func (s *splitter) skips(b int) bool { return s.only >= 0 && s.shard && b/s.nl != s.only }

// reset empties the parts for a group of records of version 2 (v2) or 1.
func (s *splitter) reset(v2 bool) {
	s.v2 = v2
	for i := range s.parts {
		p := &s.parts[i]
		if cap(p.body) > 4*maxRawBytes || cap(p.ser) > 4*maxRawBytes || cap(p.payload) > 4*maxRawBytes {
			p.body, p.ser, p.payload = nil, nil, nil
		}
		p.body, p.ser, p.nsym, p.series = p.body[:0], p.ser[:0], 0, 0
		clear(p.pref)
		p.pref, p.refG = p.pref[:0], p.refG[:0]
	}
	s.meta = s.meta[:0]
	clear(s.gsym) // before garena is written again
	if cap(s.garena) > 4*maxRawBytes {
		s.garena, s.gsym = nil, nil
	}
	s.garena = s.garena[:0]
}

// partOf is the part of a series of label hash h.
func (s *splitter) partOf(h uint64) int {
	l := 0
	if s.nl > 1 {
		l = laneOf(h, s.nl)
	}
	if s.shard {
		return s.ring.Pick(h)*s.nl + l
	}
	return l
}

// add splits the snappy-decoded record body into the parts; a record
// that does not parse leaves them as they were.
func (s *splitter) add(body []byte) error {
	for i := range s.parts {
		p := &s.parts[i]
		s.marks[i] = splitMark{body: len(p.body), ser: len(p.ser), series: p.series, nsym: p.nsym}
	}
	meta := len(s.meta)
	var err error
	if s.v2 {
		err = s.addV2(body)
	} else {
		err = s.addV1(body)
	}
	if err != nil {
		for i := range s.parts {
			p, m := &s.parts[i], s.marks[i]
			if s.v2 && len(p.refG) > int(m.nsym) {
				for _, g := range p.refG[max(m.nsym, 1):] { // the record's symbols leave the part
					p.pref[g] = 0
				}
				p.refG = p.refG[:m.nsym]
			}
			p.body, p.ser, p.series, p.nsym = p.body[:m.body], p.ser[:m.ser], m.series, m.nsym
		}
		s.meta = s.meta[:meta]
	}
	return err
}

func (s *splitter) addV1(body []byte) error {
	for b := body; len(b) > 0; {
		var field, msg []byte
		if b[0] == 1<<3|byte(protowire.BytesType) { // a TimeSeries
			rest := b
			var ok bool
			if msg, rest, ok = lenValue(b[1:]); !ok {
				return errBadRecord
			}
			field, b = b[:len(b)-len(rest)], rest
		} else {
			f, err := nextField(b)
			if err != nil {
				return fmt.Errorf("%w: WriteRequest %w", errBadRecord, err)
			}
			field = b[:f.end]
			if f.num != 1 || f.typ != protowire.BytesType {
				s.meta = append(s.meta, field...)
				b = b[f.end:]
				continue
			}
			msg, b = f.bytes(b), b[f.end:]
		}
		h, ok := s.hashV1(msg)
		if !ok {
			return errBadRecord
		}
		b := s.partOf(h)
		if s.skips(b) {
			continue
		}
		p := &s.parts[b]
		p.body = append(p.body, field...)
		p.series++
	}
	return nil
}

// uvarint reads a varint, the common one-byte case inline.
func uvarint(b []byte) (uint64, int) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	return protowire.ConsumeVarint(b)
}

// field splits the length-delimited value at the front of b (after its
// tag) off b: the value, the rest, false when it runs past b.
func lenValue(b []byte) (v, rest []byte, ok bool) {
	l, n := uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return nil, nil, false
	}
	return b[n : n+int(l)], b[n+int(l):], true
}

// label reads a 1.0 Label message: name and value as a decoder reads them
// (the last of each field, "" when absent).
func label(lb []byte) (name, value []byte, ok bool) {
	// Every encoder's form: name, then value, nothing else.
	if len(lb) > 0 && lb[0] == 1<<3|byte(protowire.BytesType) {
		if n, rest, ok := lenValue(lb[1:]); ok && len(rest) > 0 && rest[0] == 2<<3|byte(protowire.BytesType) {
			if v, rest, ok := lenValue(rest[1:]); ok && len(rest) == 0 {
				return n, v, true
			}
		}
	}
	for len(lb) > 0 {
		f, err := nextField(lb)
		if err != nil {
			return nil, nil, false
		}
		if f.typ == protowire.BytesType && (f.num == 1 || f.num == 2) {
			if f.num == 1 {
				name = f.bytes(lb)
			} else {
				value = f.bytes(lb)
			}
		}
		lb = lb[f.end:]
	}
	return name, value, true
}

// emptyLabel: a label whose value is empty is no label (Prometheus and
// this project's decoders drop it), so the split hashes leave it out, as
// the convert path's seriesHash of the decoded labels does: a series sent
// with one is in the lane and on the endpoint of the series without it,
// whichever path carried it.

// hashV1 hashes the labels of the 1.0 TimeSeries message msg: in one pass
// when they are sorted by name, as senders send them.
func (s *splitter) hashV1(msg []byte) (uint64, bool) {
	h := s.hbuf[:0]
	var prev []byte
	sorted := true
	for i := 0; i < len(msg); {
		var name, value []byte
		// The usual encoding, short strings: 0x0a len 0x0a len name 0x12 len value.
		if i+4 < len(msg) && msg[i] == 1<<3|byte(protowire.BytesType) && msg[i+1] < 0x80 &&
			msg[i+2] == 1<<3|byte(protowire.BytesType) && msg[i+3] < 0x80 {
			le, ne := i+2+int(msg[i+1]), i+4+int(msg[i+3])
			if le <= len(msg) && ne+2 <= le && msg[ne] == 2<<3|byte(protowire.BytesType) && ne+2+int(msg[ne+1]) == le {
				name, value = msg[i+4:ne], msg[ne+2:le]
				i = le
				goto got
			}
		}
		{
			f, err := nextField(msg[i:])
			if err != nil {
				return 0, false
			}
			fb := msg[i:]
			i += f.end
			if f.num != 1 || f.typ != protowire.BytesType {
				continue
			}
			var ok bool
			if name, value, ok = label(f.bytes(fb)); !ok {
				return 0, false
			}
		}
	got:
		if sorted && before(name, prev) {
			sorted = false
		}
		prev = name
		if len(value) == 0 {
			continue // no label: decoders drop it (emptyLabel)
		}
		h = appendHashed(h, name, value)
	}
	s.hbuf = h
	if sorted {
		return xxhash.Sum64(s.hbuf), true
	}
	// Unsorted: sorted by name first, as the convert path's are.
	s.lbls = s.lbls[:0]
	for b := msg; len(b) > 0; {
		f, err := nextField(b)
		if err != nil {
			return 0, false // read above: cannot happen
		}
		if f.num == 1 && f.typ == protowire.BytesType {
			if name, value, _ := label(f.bytes(b)); len(value) > 0 { // else no label (emptyLabel)
				s.lbls = append(s.lbls, prompb.Label{Name: unsafex.String(name), Value: unsafex.String(value)}) // for the hash only
			}
		}
		b = b[f.end:]
	}
	return s.labelsHash(), true
}

// labelsHash is seriesHash of s.lbls sorted by name, in one call.
func (s *splitter) labelsHash() uint64 {
	if !slices.IsSortedFunc(s.lbls, cmpLabel) {
		slices.SortFunc(s.lbls, cmpLabel)
	}
	s.hbuf = s.hbuf[:0]
	for _, l := range s.lbls {
		s.hbuf = appendHashed(s.hbuf, l.Name, l.Value)
	}
	return xxhash.Sum64(s.hbuf)
}

// appendHashed appends a label to h as seriesHash hashes it (name, 0xff,
// value, 0xff): a series' hash on the split is the convert path's.
func appendHashed[T string | []byte](h []byte, name, value T) []byte {
	h = append(h, name...)
	h = append(h, 0xff)
	h = append(h, value...)
	return append(h, 0xff)
}

// before reports whether a label name sorts before prev, the name read
// before it (the labels are not sorted); the first bytes decide it in the
// common case, without the string compare. An empty prev (none yet) is
// before nothing.
func before(name, prev []byte) bool {
	return (len(prev) == 0 || len(name) == 0 || prev[0] >= name[0]) && string(prev) > string(name)
}

func (s *splitter) addV2(body []byte) error {
	s.syms = s.syms[:0]
	for b := body; len(b) > 0; {
		if b[0] == 4<<3|byte(protowire.BytesType) || b[0] == 5<<3|byte(protowire.BytesType) { // a symbol, a series
			v, rest, ok := lenValue(b[1:])
			if !ok {
				return errBadRecord
			}
			if b[0] == 4<<3|byte(protowire.BytesType) {
				s.syms = append(s.syms, v)
			}
			b = rest
			continue
		}
		f, err := nextField(b)
		if err != nil {
			return fmt.Errorf("%w: Request %w", errBadRecord, err)
		}
		if f.num == 4 && f.typ == protowire.BytesType {
			s.syms = append(s.syms, f.bytes(b))
		}
		b = b[f.end:]
	}
	for i := range s.parts {
		p := &s.parts[i]
		p.remap = slices.Grow(p.remap[:0], len(s.syms))[:len(s.syms)]
		clear(p.remap)
	}
	s.gid = slices.Grow(s.gid[:0], len(s.syms))[:len(s.syms)]
	clear(s.gid)
	for b := body; len(b) > 0; {
		var msg []byte
		if b[0] == 5<<3|byte(protowire.BytesType) { // a series
			msg, b, _ = lenValue(b[1:]) // the first loop checked the framing
		} else {
			f, err := nextField(b)
			if err != nil {
				return errBadRecord // the first loop read it: cannot happen
			}
			fb := b
			b = b[f.end:]
			if f.num != 5 || f.typ != protowire.BytesType {
				continue
			}
			msg = f.bytes(fb)
		}
		h, ok := s.hashV2(msg)
		if !ok {
			return errBadRecord
		}
		pb := s.partOf(h)
		if s.skips(pb) {
			continue
		}
		p := &s.parts[pb]
		if len(p.body) == 0 {
			p.body = append(p.body, 4<<3|byte(protowire.BytesType), 0) // symbols[0] = ""
			p.nsym = 1
			p.refG = append(p.refG[:0], 0)
		}
		if !s.rewriteV2(p, msg) {
			return errBadRecord
		}
		p.ser = protowire.AppendTag(p.ser, 5, protowire.BytesType)
		p.ser = protowire.AppendBytes(p.ser, s.ts)
		p.series++
	}
	return nil
}

// appendRefs appends the references of a packed (BytesType) or single
// (VarintType) references field's value v to refs.
func appendRefs(refs []uint32, typ protowire.Type, v []byte) ([]uint32, bool) {
	if typ == protowire.VarintType {
		x, _ := protowire.ConsumeVarint(v)
		return append(refs, uint32(x)), x <= 1<<32-1
	}
	if typ != protowire.BytesType {
		return refs, false
	}
	packed, _ := protowire.ConsumeBytes(v)
	for len(packed) > 0 {
		x, k := protowire.ConsumeVarint(packed)
		if k < 0 || x > 1<<32-1 {
			return refs, false
		}
		refs = append(refs, uint32(x))
		packed = packed[k:]
	}
	return refs, true
}

// readVarint reads the varint at b[i]: its value and the index after it
// (-1: malformed). Short ones inline.
func readVarint(b []byte, i int) (uint64, int) {
	if i < len(b) && b[i] < 0x80 {
		return uint64(b[i]), i + 1
	}
	if i+1 < len(b) && b[i+1] < 0x80 {
		return uint64(b[i]&0x7f) | uint64(b[i+1])<<7, i + 2
	}
	x, n := protowire.ConsumeVarint(b[i:])
	if n < 0 {
		return 0, -1
	}
	return x, i + n
}

// appendVarint appends x as a varint, short ones inline.
func appendVarint(b []byte, x uint64) []byte {
	if x < 0x80 {
		return append(b, byte(x))
	}
	if x < 1<<14 {
		return append(b, byte(x)|0x80, byte(x>>7))
	}
	return protowire.AppendVarint(b, x)
}

// hashV2 hashes the labels of the 2.0 TimeSeries message msg, its
// references resolved in s.syms: in one pass when they are sorted by name.
func (s *splitter) hashV2(msg []byte) (uint64, bool) {
	refs := s.refs[:0]
	s.labelFields = 0
	for i := 0; i < len(msg); {
		if msg[i] == 1<<3|byte(protowire.BytesType) { // packed label references, as encoders write them
			s.labelFields++
			packed, rest, ok := lenValue(msg[i+1:])
			if !ok {
				return 0, false
			}
			for j := 0; j < len(packed); {
				var x uint64
				if x, j = readVarint(packed, j); j < 0 || x > 1<<32-1 {
					return 0, false
				}
				refs = append(refs, uint32(x))
			}
			i = len(msg) - len(rest)
			continue
		}
		f, err := nextField(msg[i:])
		if err != nil {
			return 0, false
		}
		if f.num == 1 {
			s.labelFields += 2 // not the one packed field rewriteV2 takes from s.refs
			var ok bool
			if refs, ok = appendRefs(refs, f.typ, f.value(msg[i:])); !ok {
				return 0, false
			}
		}
		i += f.end
	}
	s.refs = refs
	if len(refs)%2 != 0 {
		return 0, false
	}
	h := s.hbuf[:0]
	var prev []byte
	sorted := true
	nsym := uint32(len(s.syms))
	for k := 0; k+1 < len(refs); k += 2 {
		nr, vr := refs[k], refs[k+1]
		if nr >= nsym || vr >= nsym {
			return 0, false
		}
		name, value := s.syms[nr], s.syms[vr]
		if sorted && before(name, prev) {
			sorted = false
		}
		prev = name
		if len(value) == 0 {
			continue // no label (emptyLabel)
		}
		h = appendHashed(h, name, value)
	}
	s.hbuf = h
	if sorted {
		return xxhash.Sum64(h), true
	}
	s.lbls = s.lbls[:0]
	for k := 0; k+1 < len(refs); k += 2 {
		if len(s.syms[refs[k+1]]) == 0 {
			continue // no label (emptyLabel)
		}
		s.lbls = append(s.lbls, prompb.Label{Name: unsafex.String(s.syms[refs[k]]), Value: unsafex.String(s.syms[refs[k+1]])})
	}
	return s.labelsHash(), true
}

// ref is the reference in part p of the record's symbol r, added to p's
// table when p does not have it yet.
func (s *splitter) ref(p *splitPart, r uint64) (uint64, bool) {
	if r >= uint64(len(s.syms)) {
		return 0, false
	}
	if x := p.remap[r]; x != 0 {
		return uint64(x - 1), true
	}
	var x uint64 // "" is the part's symbol 0
	if sym := s.syms[r]; len(sym) > 0 {
		// A symbol the part has from an earlier record of the group (or
		// twice in this record's table) is not added again: the
		// specification's SHOULD, and a smaller request.
		g := s.groupID(r)
		if int(g) >= len(p.pref) {
			p.pref = append(p.pref, make([]uint32, int(g)+1-len(p.pref))...)
		}
		if y := p.pref[g]; y != 0 {
			x = uint64(y - 1)
		} else {
			x = p.nsym
			p.body = protowire.AppendTag(p.body, 4, protowire.BytesType)
			p.body = protowire.AppendBytes(p.body, sym)
			p.nsym++
			p.pref[g] = uint32(x + 1)
			p.refG = append(p.refG, g)
		}
	}
	p.remap[r] = uint32(x + 1)
	return x, true
}

// groupID is the group's id of the record's symbol r (not ""), looked up
// once per record whatever the parts that use it.
func (s *splitter) groupID(r uint64) uint32 {
	if g := s.gid[r]; g != 0 {
		return g - 1
	}
	sym := s.syms[r]
	g, ok := s.gsym[string(sym)]
	if !ok {
		if s.gsym == nil {
			s.gsym = make(map[string]uint32)
		}
		g = uint32(len(s.gsym))
		if cap(s.garena)-len(s.garena) < len(sym) {
			// A new array: the keys so far keep aliasing the old one,
			// which is never written again.
			s.garena = make([]byte, 0, max(2*cap(s.garena), len(sym), 64<<10))
		}
		k := len(s.garena)
		s.garena = append(s.garena, sym...)
		s.gsym[unsafex.String(s.garena[k:])] = g
	}
	s.gid[r] = g + 1
	return g
}

// rewriteRefs appends the references field num of value v (packed or
// single) to dst, each rewritten into part p's table.
func (s *splitter) rewriteRefs(dst []byte, p *splitPart, num protowire.Number, typ protowire.Type, v []byte) ([]byte, bool) {
	if typ == protowire.VarintType {
		r, _ := protowire.ConsumeVarint(v)
		x, ok := s.ref(p, r)
		dst = protowire.AppendTag(dst, num, protowire.VarintType)
		return protowire.AppendVarint(dst, x), ok
	}
	if typ != protowire.BytesType {
		return dst, false
	}
	packed, _ := protowire.ConsumeBytes(v)
	rb := s.rb[:0]
	remap := p.remap
	for j := 0; j < len(packed); {
		var r uint64
		if r, j = readVarint(packed, j); j < 0 || r >= uint64(len(remap)) {
			return dst, false
		}
		x := uint64(remap[r])
		if x != 0 {
			x-- // in the part already
		} else {
			x, _ = s.ref(p, r)
		}
		rb = appendVarint(rb, x)
	}
	s.rb = rb
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	return protowire.AppendBytes(dst, rb), true
}

// rewriteV2 writes the 2.0 TimeSeries msg to s.ts with its references
// into part p's table: labels, exemplars' labels, metadata's help and
// unit; every other field as its bytes.
func (s *splitter) rewriteV2(p *splitPart, msg []byte) bool {
	s.ts = s.ts[:0]
	for len(msg) > 0 {
		f, err := nextField(msg)
		if err != nil {
			return false // hashV2 read it: cannot happen
		}
		num, typ, field, val := f.num, f.typ, msg[:f.end], f.value(msg)
		msg = msg[f.end:]
		var ok bool
		switch {
		case num == 1 && s.labelFields == 1 && typ == protowire.BytesType:
			// The series' one packed list of label references, read by
			// hashV2 already (and checked against s.syms).
			rb := s.rb[:0]
			for _, r := range s.refs {
				x := uint64(p.remap[r])
				if x != 0 {
					x-- // in the part already
				} else {
					x, _ = s.ref(p, uint64(r))
				}
				rb = appendVarint(rb, x)
			}
			s.rb = rb
			s.ts = protowire.AppendTag(s.ts, 1, protowire.BytesType)
			s.ts = protowire.AppendBytes(s.ts, rb)
		case num == 1: // label references
			if s.ts, ok = s.rewriteRefs(s.ts, p, 1, typ, val); !ok {
				return false
			}
		case (num == 4 || num == 5) && typ == protowire.BytesType: // an exemplar, the metadata
			sub, _ := protowire.ConsumeBytes(val)
			s.sub = s.sub[:0]
			for len(sub) > 0 {
				sf, err := nextField(sub)
				if err != nil {
					return false
				}
				isRef := (num == 4 && sf.num == 1) || (num == 5 && (sf.num == 3 || sf.num == 4) && sf.typ == protowire.VarintType)
				if isRef {
					if s.sub, ok = s.rewriteRefs(s.sub, p, sf.num, sf.typ, sf.value(sub)); !ok {
						return false
					}
				} else {
					s.sub = append(s.sub, sub[:sf.end]...)
				}
				sub = sub[sf.end:]
			}
			s.ts = protowire.AppendTag(s.ts, num, protowire.BytesType)
			s.ts = protowire.AppendBytes(s.ts, s.sub)
		default: // samples, histograms, created timestamp, unknown fields
			s.ts = append(s.ts, field...)
		}
	}
	return true
}

// sends reports whether part b has a request to send, after finish.
func (s *splitter) sends(b int) bool {
	return s.parts[b].series > 0 || (!s.v2 && b%s.nl == 0 && len(s.meta) > 0)
}

// finish completes the parts' bodies: 1.0 metadata to lane 0 of every
// endpoint, 2.0 series after their symbols.
func (s *splitter) finish() {
	for b := range s.parts {
		p := &s.parts[b]
		if s.v2 {
			p.body = append(p.body, p.ser...)
		} else if b%s.nl == 0 {
			p.body = append(p.body, s.meta...)
		}
	}
}

// sendSplitRecs sends recs, remote-write records of one tenant for which
// passThrough holds, split by series into lanes and endpoints, in groups
// of up to maxRawBytes snappy-decoded, one group after another.
func (e *Exporter) sendSplitRecs(ctx context.Context, tenant string, recs []exporter.Record) error {
	if e.split == nil {
		e.split = newSplitter(e.lanes(), e.sharding(), e.ring, len(e.eps))
		e.split.only = e.only
	}
	sp := e.split
	for i := 0; i < len(recs); {
		v := recs[i].RemoteWrite
		sp.reset(v == 2)
		size := 0
		j := i
		for ; j < len(recs) && recs[j].RemoteWrite == v && size < maxRawBytes; j++ {
			n, err := s2.DecodedLen(recs[j].Body)
			if err != nil {
				e.badBodies.Add(1) // the receiver checked it: a damaged queue
				continue
			}
			if size > 0 && size+n > maxRawBytes {
				break // the next group's
			}
			if e.unsnap, err = prw.Unsnappy(e.unsnap, recs[j].Body); err != nil {
				e.badBodies.Add(1)
				continue
			}
			if sp.add(e.unsnap) != nil {
				e.badBodies.Add(1)
				continue
			}
			size += n
		}
		if j == i {
			j++ // cannot happen: the first record is always taken or counted
		}
		if err := e.sendSplit(ctx, tenant, sp); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// sendSplit sends each part of sp to its endpoints at once, and returns
// when every one is delivered or dropped.
func (e *Exporter) sendSplit(ctx context.Context, tenant string, sp *splitter) error {
	sp.finish()
	nl := sp.nl
	errs := make([]error, len(e.eps)*nl)
	var wg sync.WaitGroup
	for b := range sp.parts {
		if !sp.sends(b) {
			continue
		}
		p := &sp.parts[b]
		encode := sync.OnceValues(func() ([]byte, error) {
			p.payload = s2.EncodeSnappy(p.payload[:0], p.body)
			return p.payload, nil
		})
		v2f, v1f := encode, func() ([]byte, error) { return nil, errors.New("a 1.0 request for a 2.0 endpoint") } // passThrough: never
		if sp.v2 {
			v1f = sync.OnceValues(func() ([]byte, error) { return e.v2ToV1(p.body) })
		} else {
			v2f, v1f = v1f, encode
		}
		k0, k1 := 0, len(e.eps)
		if sp.shard {
			k0 = b / nl
			k1 = k0 + 1
		}
		for k := k0; k < k1; k++ {
			if e.others(k) {
				continue
			}
			wg.Go(func() {
				sent, err := e.deliver(ctx, k, tenant, v2f, v1f)
				if errors.Is(err, sending.ErrTooLarge) {
					err = e.resendInParts(ctx, k, tenant, rawSource{plain: p.body, v2: sp.v2}, err)
				}
				errs[k*nl+b%nl] = err
				if sent {
					e.sentSeries.Add(uint64(p.series))
				}
			})
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}
