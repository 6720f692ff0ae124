package otlp

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluice-dev/sluice/internal/signal"
)

// shape lists the length of every slice of a batch (and its key count), so
// that a failed decode can be checked to leave no trace.
func shape(batch any) []int {
	var out []int
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			if !v.Type().Field(i).IsExported() {
				continue
			}
			switch f.Kind() {
			case reflect.Slice:
				out = append(out, f.Len())
			case reflect.Struct:
				walk(f)
			}
		}
	}
	walk(reflect.ValueOf(batch).Elem())
	switch b := batch.(type) {
	case *signal.Logs:
		out = append(out, b.Keys.Len())
	case *signal.Metrics:
		out = append(out, b.Keys.Len())
	case *signal.Spans:
		out = append(out, b.Keys.Len())
	}
	return out
}

// Hand-built requests: protowire, not our encoder.
func msg(fields ...[]byte) []byte {
	var b []byte
	for _, f := range fields {
		b = append(b, f...)
	}
	return b
}

func fBytes(num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), v)
}

func fVarint(num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
}

func fFixed64(num protowire.Number, v uint64) []byte {
	return protowire.AppendFixed64(protowire.AppendTag(nil, num, protowire.Fixed64Type), v)
}

func kv(key string, anyValue []byte) []byte { return msg(fBytes(1, []byte(key)), fBytes(2, anyValue)) }
func strVal(s string) []byte                { return fBytes(1, []byte(s)) }

// request nests records in a request with one resource and one scope, after
// a first resource holding one good record, so that paths show index 1.
func request(records ...[]byte) []byte {
	good := fBytes(2, fBytes(2, msg(fFixed64(1, 1))))
	var scope []byte
	for _, r := range records {
		scope = append(scope, fBytes(2, r)...)
	}
	return msg(fBytes(1, good), fBytes(1, fBytes(2, scope)))
}

var sentinels = []error{ErrTruncated, ErrMalformed, ErrWireType, ErrInvalidUTF8, ErrIDLength, ErrTooDeep, ErrWrongKind}

func isSentinel(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func smallest(t *testing.T, dir string) []byte {
	files := corpus(t, dir)
	best := files[0].data
	for _, f := range files {
		if len(f.data) < len(best) {
			best = f.data
		}
	}
	return best
}

// prefilled returns batches holding one corpus file each, so that a failed
// decode has something to leave untouched.
func prefilled(t *testing.T) (*signal.Logs, *signal.Metrics, *signal.Spans) {
	var l signal.Logs
	var m signal.Metrics
	var s signal.Spans
	if err := DecodeLogs(&l, smallest(t, "logs")); err != nil {
		t.Fatal(err)
	}
	if err := DecodeMetrics(&m, smallest(t, "metrics")); err != nil {
		t.Fatal(err)
	}
	if err := DecodeTraces(&s, smallest(t, "traces")); err != nil {
		t.Fatal(err)
	}
	return &l, &m, &s
}

func checkFails(t *testing.T, name string, pb []byte, want error, wantMsg string) {
	t.Helper()
	l, m, s := prefilled(t)
	for _, c := range []struct {
		batch  any
		decode func() error
		view   func() []string
	}{
		{l, func() error { return DecodeLogs(l, pb) }, func() []string { return batchLogs(t, l) }},
		{m, func() error { return DecodeMetrics(m, pb) }, func() []string { return batchMetrics(t, m) }},
		{s, func() error { return DecodeTraces(s, pb) }, func() []string { return batchTraces(t, s) }},
	} {
		before, view := shape(c.batch), c.view()
		err := c.decode()
		if want == nil && err == nil {
			continue // valid for this signal (e.g. a logs-only check)
		}
		if err == nil {
			t.Fatalf("%s: %T: no error", name, c.batch)
		}
		if !isSentinel(err) {
			t.Fatalf("%s: %T: error %v wraps no sentinel", name, c.batch, err)
		}
		if after := shape(c.batch); !reflect.DeepEqual(before, after) {
			t.Fatalf("%s: %T: batch changed by a failed decode: %v -> %v", name, c.batch, before, after)
		}
		sameRecords(t, name+" kept records", view, c.view())
		if _, ok := c.batch.(*signal.Logs); ok && want != nil {
			if !errors.Is(err, want) {
				t.Fatalf("%s: got %v, want %v", name, err, want)
			}
			if !strings.Contains(err.Error(), wantMsg) {
				t.Fatalf("%s: error %q does not say %q", name, err, wantMsg)
			}
		}
	}
}

func TestBadInput(t *testing.T) {
	logsFile := corpus(t, "logs")[0].data
	cases := []struct {
		name string
		pb   []byte
		want error
		msg  string
	}{
		{"truncated file", logsFile[:len(logsFile)/2], ErrTruncated, "resource_logs["},
		{"trace id length", request(msg(fFixed64(1, 5), fBytes(9, []byte("12345")))), ErrIDLength,
			"resource_logs[1].scope_logs[0].log_records[0]: trace_id has 5 bytes, want 16 or 0"},
		{"span id length", request(msg(fBytes(10, make([]byte, 9)))), ErrIDLength, "span_id has 9 bytes, want 8 or 0"},
		{"severity text utf8", request(msg(fBytes(3, []byte("a\xffb")))), ErrInvalidUTF8, "log_records[0]: severity_text"},
		{"key utf8", request(msg(fBytes(6, kv("k\xc3", strVal("v"))))), ErrInvalidUTF8, "log_records[0].attributes[0]: key"},
		{"value utf8", request(msg(fBytes(6, kv("k", strVal("\xed\xa0\x80"))))), ErrInvalidUTF8, "attributes[0]: key \"k\": string_value"},
		{"body utf8", request(msg(fBytes(5, strVal("\xff")))), ErrInvalidUTF8, "body: string_value"},
		{"nested map key utf8", request(msg(fBytes(5, fBytes(6, fBytes(1, kv("\xff", strVal("x"))))))), ErrInvalidUTF8, "kvlist_value.values[0]: key"},
		{"second record", request(msg(), msg(fBytes(3, []byte{0xff}))), ErrInvalidUTF8, "log_records[1]"},
		{"wire type", request(msg(fVarint(1, 7))), ErrWireType, "time_unix_nano (field 1) has wire type 0, want 1"},
		{"truncated varint", request(msg([]byte{0x10, 0xff})), ErrTruncated, "log_records[0]"},
		{"varint overflow", request(msg([]byte{0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})), ErrMalformed, "log_records[0]"},
		{"length past end", append(fBytes(1, nil)[:1], 0x05, 1, 2), ErrTruncated, "resource_logs[0]"},
		{"field zero", []byte{0x02, 0x01}, ErrMalformed, "field number 0"},
	}
	for _, c := range cases {
		checkFails(t, c.name, c.pb, c.want, c.msg)
	}
}

func TestRandomBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 500; n++ {
		pb := make([]byte, 1+r.IntN(300))
		for i := range pb {
			pb[i] = byte(r.Uint32())
		}
		l, m, s := &signal.Logs{}, &signal.Metrics{}, &signal.Spans{}
		for _, f := range []func() (any, error){
			func() (any, error) { return l, DecodeLogs(l, pb) },
			func() (any, error) { return m, DecodeMetrics(m, pb) },
			func() (any, error) { return s, DecodeTraces(s, pb) },
		} {
			b, err := f()
			if err != nil && !isSentinel(err) {
				t.Fatalf("%x: error %v wraps no sentinel", pb, err)
			}
			if err != nil && !reflect.DeepEqual(shape(b), shape(reflect.New(reflect.TypeOf(b).Elem()).Interface())) {
				t.Fatalf("%x: failed decode left data: %v", pb, shape(b))
			}
		}
		if _, _, err := Sniff(pb); err != nil && !errors.Is(err, ErrNotOTLP) {
			t.Fatalf("Sniff(%x): %v does not wrap ErrNotOTLP", pb, err)
		}
	}
}

func TestEmptyAndUnknown(t *testing.T) {
	var l signal.Logs
	if err := DecodeLogs(&l, nil); err != nil || l.Len() != 0 {
		t.Fatalf("empty request: %v, %d records", err, l.Len())
	}
	var m signal.Metrics
	if err := DecodeMetrics(&m, []byte{}); err != nil || m.Len() != 0 {
		t.Fatalf("empty request: %v, %d points", err, m.Len())
	}
	if k, f, err := Sniff(nil); err != nil || k != signal.KindUnknown || f != FormatProto {
		t.Fatalf("Sniff(empty) = %v %v %v", k, f, err)
	}
	// Unknown fields at every level are skipped.
	unk := msg(fVarint(99, 5), fBytes(98, []byte("x")), fFixed64(97, 1), protowire.AppendFixed32(protowire.AppendTag(nil, 96, protowire.Fixed32Type), 1))
	rec := msg(unk, fFixed64(1, 42), unk, fBytes(6, msg(unk, kv("k", msg(unk, strVal("v"), unk)))))
	pb := msg(unk, fBytes(1, msg(unk, fBytes(2, msg(unk, fBytes(2, rec), unk)), unk)), unk)
	if err := DecodeLogs(&l, pb); err != nil {
		t.Fatal(err)
	}
	if l.Len() != 1 || l.Time[0] != 42 || l.Attr[0].Len() != 1 || l.AttrString(int(l.Attr[0].Start)) != "v" {
		t.Fatalf("unknown fields not skipped: %v", batchLogs(t, &l))
	}
}

func TestWrongKind(t *testing.T) {
	var l signal.Logs
	var m signal.Metrics
	var s signal.Spans
	for _, f := range corpus(t, "metrics")[:1] {
		if err := DecodeLogs(&l, f.data); !errors.Is(err, ErrWrongKind) {
			t.Fatalf("metrics as logs: %v", err)
		}
		if err := DecodeTraces(&s, f.data); !errors.Is(err, ErrWrongKind) {
			t.Fatalf("metrics as traces: %v", err)
		}
	}
	for _, f := range corpus(t, "traces")[:1] {
		if err := DecodeLogs(&l, f.data); !errors.Is(err, ErrWrongKind) {
			t.Fatalf("traces as logs: %v", err)
		}
		if err := DecodeMetrics(&m, f.data); !errors.Is(err, ErrWrongKind) {
			t.Fatalf("traces as metrics: %v", err)
		}
	}
	for _, f := range corpus(t, "logs")[:1] {
		if err := DecodeMetrics(&m, f.data); !errors.Is(err, ErrWrongKind) {
			t.Fatalf("logs as metrics: %v", err)
		}
		if err := DecodeTraces(&s, f.data); !errors.Is(err, ErrWrongKind) {
			t.Fatalf("logs as traces: %v", err)
		}
	}
	if l.Len()+m.Len()+s.Len() != 0 {
		t.Fatal("wrong-kind decode left records")
	}
}

func TestSniff(t *testing.T) {
	for dir, want := range map[string]signal.Kind{"logs": signal.KindLogs, "metrics": signal.KindMetrics, "traces": signal.KindTraces} {
		for _, f := range corpus(t, dir) {
			k, fm, err := Sniff(f.data)
			if err != nil || k != want || fm != FormatProto {
				t.Fatalf("%s: Sniff = %v %v %v, want %v", f.name, k, fm, err, want)
			}
		}
	}
	for js, want := range map[string]signal.Kind{
		`{"resourceLogs":[]}`:                          signal.KindLogs,
		` {"resourceMetrics":[{}]}`:                    signal.KindMetrics,
		"\n{\"resourceSpans\":[]}\n{}":                 signal.KindTraces,
		`{"x":{"resourceLogs":1},"resource_spans":[]}`: signal.KindTraces,
	} {
		k, f, err := Sniff([]byte(js))
		if err != nil || k != want || f != FormatJSON {
			t.Fatalf("Sniff(%s) = %v %v %v, want %v", js, k, f, err, want)
		}
	}
	// JSON or text that names no signal is another kind of file.
	for _, in := range []string{`{}`, `{"hello":"world"}`, "{}\n{\"a\":1}", "just some notes\n", "[1,2,3]"} {
		if k, f, err := Sniff([]byte(in)); !errors.Is(err, ErrNotOTLP) {
			t.Errorf("Sniff(%q) = %v %v %v, want ErrNotOTLP", in, k, f, err)
		}
	}
	// A protobuf request whose first length byte is '{' is not JSON.
	rec := msg(fFixed64(1, 1), fBytes(3, bytes.Repeat([]byte("a"), 108)))
	pb := fBytes(1, fBytes(2, fBytes(2, rec)))
	if pb[1] != '{' {
		t.Fatalf("test request starts %x, want 0a7b", pb[:2])
	}
	if k, f, err := Sniff(pb); k != signal.KindLogs || f != FormatProto || err != nil {
		t.Fatalf("Sniff(0a7b...) = %v %v %v", k, f, err)
	}
	for _, bad := range []string{"{", "hello", "\x1f\x8b\x08", "{\"a\":}"} {
		if _, _, err := Sniff([]byte(bad)); !errors.Is(err, ErrNotOTLP) {
			t.Fatalf("Sniff(%q) = %v, want ErrNotOTLP", bad, err)
		}
	}
}
