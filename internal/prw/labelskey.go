package prw

import (
	"encoding/binary"
	"hash/maphash"
)

// The live statistics (package stats) count a remote-write series by a key
// of its label set, not by its lake series id (signal.SeriesID): the id
// costs a hash of every label value and a mix per label, a sixth of the
// relay's CPU, and the statistics need only an identity. LabelsKey is a
// 64-bit maphash, seeded per process, of the series' labels (__name__
// included) as remote write 1.0 writes them in protobuf's canonical
// encoding: per label a TimeSeries field 1 holding a Label with field 1
// (name) then field 2 (value), every length a minimal varint, the labels
// sorted by name, unique, none with an empty value. ScanV1 takes only
// that encoding, so with Scanner.LabelKeys it hashes a series' label
// fields as the request holds them, in one call; ScanV2 and the
// statistics' decoded batches write those bytes (AppendLabelField) and
// hash them, so a series has one key whichever path or protocol version
// carried it. As with IDMemo's keys, the key is trusted as the series'
// identity: two label sets share one with probability about 2^-64, and
// without the seed a client cannot aim at a collision.

var labelsSeed = maphash.MakeSeed()

// LabelsKey is the key of a label set from its label fields in canonical
// encoding (see above).
func LabelsKey(fields []byte) uint64 { return maphash.Bytes(labelsSeed, fields) }

// AppendLabelField appends label name=value as a TimeSeries' Label field
// in canonical encoding (field 1: tag, length, then the Label message's
// name and value fields) to dst.
func AppendLabelField[T string | []byte](dst []byte, name, value T) []byte {
	if inner := 4 + len(name) + len(value); inner < 0x80 {
		// The usual label: every length one byte.
		dst = append(dst, 1<<3|wtLen, byte(inner), 1<<3|wtLen, byte(len(name)))
		dst = append(dst, name...)
		dst = append(dst, 2<<3|wtLen, byte(len(value)))
		return append(dst, value...)
	}
	inner := 2 + varintLen(uint64(len(name))) + len(name) + varintLen(uint64(len(value))) + len(value)
	dst = append(dst, 1<<3|wtLen)
	dst = binary.AppendUvarint(dst, uint64(inner))
	dst = append(dst, 1<<3|wtLen)
	dst = binary.AppendUvarint(dst, uint64(len(name)))
	dst = append(dst, name...)
	dst = append(dst, 2<<3|wtLen)
	dst = binary.AppendUvarint(dst, uint64(len(value)))
	return append(dst, value...)
}

// labelFieldLen is the length of a label's field in canonical encoding:
// a field whose bytes are longer has an overlong varint.
func labelFieldLen(name, value int) int {
	inner := 2 + varintLen(uint64(name)) + name + varintLen(uint64(value)) + value
	return 1 + varintLen(uint64(inner)) + inner
}

// appendLabelFieldShort is AppendLabelField for a 2.0 series' labels,
// whose names and values alias the request: a name and a value of at most
// 16 bytes each, with 16 bytes of the request from their start (their
// capacity), are copied as two words each instead of by memmove, and the
// bytes written past them are overwritten by what follows (or cut off).
// In the loop of a series' labels the calls cost as much as the copies.
func appendLabelFieldShort(dst, name, value []byte) []byte {
	nl, vl := len(name), len(value)
	if nl > 16 || vl > 16 || cap(name) < 16 || cap(value) < 16 {
		return AppendLabelField(dst, name, value)
	}
	n := len(dst)
	if cap(dst)-n < 40 {
		dst = append(dst[:cap(dst)], make([]byte, 64)...)[:n]
	}
	b := dst[n : n+40]
	b[0], b[1], b[2], b[3] = 1<<3|wtLen, byte(4+nl+vl), 1<<3|wtLen, byte(nl)
	nw := name[:16]
	binary.LittleEndian.PutUint64(b[4:], binary.LittleEndian.Uint64(nw))
	binary.LittleEndian.PutUint64(b[12:], binary.LittleEndian.Uint64(nw[8:]))
	v := b[4+nl:]
	v[0], v[1] = 2<<3|wtLen, byte(vl)
	vw := value[:16]
	binary.LittleEndian.PutUint64(v[2:], binary.LittleEndian.Uint64(vw))
	binary.LittleEndian.PutUint64(v[10:], binary.LittleEndian.Uint64(vw[8:]))
	return dst[:n+6+nl+vl]
}
