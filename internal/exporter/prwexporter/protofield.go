package prwexporter

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// The generic read of a protobuf field, for the loops that walk messages
// without decoding them (split.go, mergev2.go, exemplar.go, countSeries);
// their fast paths read the usual encoders' bytes inline before it.

// protoField is a protobuf field at the front of a message's bytes b: its
// number and wire type, its value b[tag:end], the whole field b[:end].
type protoField struct {
	num protowire.Number
	typ protowire.Type
	tag int // length of the tag: where the value starts
	end int // length of the field, tag and value
}

// nextField reads the field at the front of b (not empty). A field that
// does not parse (a bad tag, a value that runs past b, a group without its
// end) is an error that says which field and why.
func nextField(b []byte) (protoField, error) {
	// The usual encoding first: a tag of one byte (field numbers up to
	// 15), a one-byte varint, a one-byte length or a fixed width.
	if len(b) >= 2 && b[0] < 0x80 && b[0] >= 1<<3 {
		num, typ := protowire.Number(b[0]>>3), protowire.Type(b[0]&7)
		switch {
		case typ == protowire.VarintType && b[1] < 0x80:
			return protoField{num: num, typ: typ, tag: 1, end: 2}, nil
		case typ == protowire.BytesType && b[1] < 0x80 && int(b[1]) <= len(b)-2:
			return protoField{num: num, typ: typ, tag: 1, end: 2 + int(b[1])}, nil
		case typ == protowire.Fixed64Type && len(b) >= 9:
			return protoField{num: num, typ: typ, tag: 1, end: 9}, nil
		case typ == protowire.Fixed32Type && len(b) >= 5:
			return protoField{num: num, typ: typ, tag: 1, end: 5}, nil
		}
	}
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return protoField{}, badTag(n)
	}
	m := protowire.ConsumeFieldValue(num, typ, b[n:])
	if m < 0 {
		return protoField{}, badValue(num, typ, m)
	}
	return protoField{num: num, typ: typ, tag: n, end: n + m}, nil
}

// value is the field's value in b, as read by nextField(b): for the
// length-delimited wire type, its length and bytes.
func (f protoField) value(b []byte) []byte { return b[f.tag:f.end] }

// bytes is the length-delimited field's content in b (nextField checked
// its length), without the length.
func (f protoField) bytes(b []byte) []byte {
	v, _ := protowire.ConsumeBytes(b[f.tag:f.end])
	return v
}

// Out of line: nextField's common path stays small.
func badTag(n int) error {
	return fmt.Errorf("field tag: %w", protowire.ParseError(n))
}

func badValue(num protowire.Number, typ protowire.Type, n int) error {
	return fmt.Errorf("field %d (wire type %d): %w", num, typ, protowire.ParseError(n))
}
