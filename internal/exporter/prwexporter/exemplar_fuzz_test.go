package prwexporter

import (
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/protobuf/encoding/protowire"
)

// exemplarBytes is the wire form of one OTLP Exemplar (taken from a
// marshalled request: field 1 of the data point's exemplars).
func exemplarBytes(t testing.TB, v float64, trace bool, attr string) []byte {
	md := pmetric.NewMetrics()
	p := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptyGauge().DataPoints().AppendEmpty()
	e := p.Exemplars().AppendEmpty()
	e.SetTimestamp(1_800_000_000_000_000_000)
	e.SetDoubleValue(v)
	if trace {
		e.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
		e.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 8})
	}
	if attr != "" {
		e.FilteredAttributes().PutStr(attr, "v")
		e.FilteredAttributes().PutInt("n", -3)
	}
	b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	// Walk down request -> resource -> scope -> metric -> gauge -> point
	// -> exemplar (the first length-delimited field at each level that
	// holds it).
	for _, f := range []protowire.Number{1, 2, 2, 5, 1, 5} {
		b = field(t, b, f)
	}
	return b
}

func field(t testing.TB, b []byte, want protowire.Number) []byte {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		b = b[n:]
		if typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if num == want {
				return v
			}
			b = b[n:]
			continue
		}
		b = b[protowire.ConsumeFieldValue(num, typ, b):]
	}
	t.Fatalf("no field %d", want)
	return nil
}

// FuzzParseExemplar: any bytes parse or are refused without a panic, and
// a parsed exemplar's labels are sorted and unique (what remote write
// requires); a real exemplar parses to its value, time and labels.
func FuzzParseExemplar(f *testing.F) {
	good := exemplarBytes(f, 2.5, true, "http.route")
	var cv converter
	e, ok := cv.parseExemplar(good)
	var ls []string
	for _, l := range e.Labels {
		ls = append(ls, l.Name+"="+l.Value)
	}
	if w := "http.route=v n=-3 span_id=0102030405060708 trace_id=0102030405060708090a0b0c0d0e0f10"; !ok || e.Value != 2.5 || e.Timestamp != 1_800_000_000_000 || strings.Join(ls, " ") != w {
		f.Fatalf("real exemplar parsed as %v %g @%d (%v), want %s 2.5 @1800000000000", ls, e.Value, e.Timestamp, ok, w)
	}
	f.Add(good)
	f.Add(exemplarBytes(f, -1, false, ""))
	f.Add([]byte{0x3a, 0x05, 0x0a, 0x01, 'x', 0x12, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		var cv converter
		e, ok := cv.parseExemplar(b)
		if !ok {
			return
		}
		for i := 1; i < len(e.Labels); i++ {
			if e.Labels[i-1].Name >= e.Labels[i].Name {
				t.Fatalf("labels not sorted and unique: %v", e.Labels)
			}
		}
	})
}
