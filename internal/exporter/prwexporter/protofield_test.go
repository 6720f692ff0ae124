package prwexporter

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// FuzzNextField: nextField reads what protowire.ConsumeTag and
// ConsumeFieldValue read (its short forms included), and fails where they
// fail, with an error that names the field.
func FuzzNextField(f *testing.F) {
	for _, s := range []string{
		"\x08\x01", "\x08\x96\x01", "\x0a\x00", "\x0a\x03abc", "\x0a\x05ab", "\x11\x01\x02\x03\x04\x05\x06\x07\x08",
		"\x11\x01\x02", "\x15\x01\x02\x03\x04", "\x15\x01", "\x0b\x08\x01\x0c", "\x0b\x08\x01", "\x0c", "\x00\x01",
		"\x80\x01\x00", "\xf8\xff\xff\xff\x0f\x00", "\x82\x01\x02hi", "\x0a\x80\x01", "\x0e\x00", "\x08",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		got, err := nextField(b)
		num, typ, n := protowire.ConsumeTag(b)
		m := -1
		if n >= 0 {
			m = protowire.ConsumeFieldValue(num, typ, b[n:])
		}
		if n < 0 || m < 0 {
			if err == nil {
				t.Fatalf("% x: read as %+v, protowire does not parse it", b, got)
			}
			if !strings.HasPrefix(err.Error(), "field ") || errors.Unwrap(err) == nil {
				t.Fatalf("% x: error %q does not name the field and the cause", b, err)
			}
			return
		}
		want := protoField{num: num, typ: typ, tag: n, end: n + m}
		if err != nil || got != want {
			t.Fatalf("% x: read as %+v, %v; protowire reads %+v", b, got, err, want)
		}
		if typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b[n:])
			if string(got.bytes(b)) != string(v) {
				t.Fatalf("% x: bytes %q, want %q", b, got.bytes(b), v)
			}
		}
	})
}
