package prwexporter

import (
	"encoding/hex"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/prompb"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluice-dev/sluice/internal/signal"
)

// Field numbers of OTLP's Exemplar, KeyValue and AnyValue messages.
const (
	exFilteredAttrs = 7
	exTime          = 2
	exAsDouble      = 3
	exAsInt         = 6
	exSpanID        = 4
	exTraceID       = 5

	anyString = 1
	anyBool   = 2
	anyInt    = 3
	anyDouble = 4
)

// exemplars appends point i's OTLP exemplars as remote-write exemplars:
// the value, the time in milliseconds, and as labels the filtered
// attributes (keys as they are, values as the query API shows them) and
// trace_id and span_id in lowercase hex, as otlptranslator and sluice's
// /api/v1/query_exemplars give them. An
// exemplar that does not parse is skipped (the receiver checked it
// already; counted in bad); one whose labels pass OpenMetrics' 128 runes
// keeps only its trace and span ids (idsOnly).
func (cv *converter) exemplars(m *signal.Metrics, i int, dst []prompb.Exemplar) []prompb.Exemplar {
	r := m.Exemplars[i]
	for _, s := range m.Msgs[r.Start:r.End] {
		e, ok := cv.parseExemplar(m.Bytes(s))
		if !ok {
			cv.badExemplars++
			continue
		}
		if labelSetLen(e.Labels) > exemplar.ExemplarMaxLabelSetLength {
			e.Labels = idsOnly(e.Labels)
			cv.trimmedExemplars++
		}
		dst = append(dst, e)
	}
	return dst
}

// labelSetLen is an exemplar's label set length as OpenMetrics and
// Prometheus's TSDB count it (runes of names and values).
func labelSetLen(ls []prompb.Label) int {
	n := 0
	for _, l := range ls {
		n += utf8.RuneCountInString(l.Name) + utf8.RuneCountInString(l.Value)
	}
	return n
}

// idsOnly keeps an exemplar's trace_id and span_id labels (63 runes):
// receivers refuse an exemplar whose labels pass 128 runes, and the trace
// link is what an exemplar is for, so long filtered attributes are cut
// rather than the exemplar lost (counted in trimmedExemplars).
func idsOnly(ls []prompb.Label) []prompb.Label {
	out := ls[:0]
	for _, l := range ls {
		if (l.Name == "trace_id" || l.Name == "span_id") && len(l.Value) <= 32 {
			out = append(out, l)
		}
	}
	return out
}

// parseExemplar decodes one OTLP Exemplar message. Label values other
// than trace and span ids alias b (the batch's arena).
func (cv *converter) parseExemplar(b []byte) (prompb.Exemplar, bool) {
	var e prompb.Exemplar
	var lbls []prompb.Label
	for len(b) > 0 {
		f, err := nextField(b)
		if err != nil {
			return e, false
		}
		num, typ, val := f.num, f.typ, f.value(b)
		b = b[f.end:]
		switch {
		case num == exTime && typ == protowire.Fixed64Type:
			v, _ := protowire.ConsumeFixed64(val)
			e.Timestamp = int64(v) / 1e6
		case num == exAsDouble && typ == protowire.Fixed64Type:
			v, _ := protowire.ConsumeFixed64(val)
			e.Value = math.Float64frombits(v)
		case num == exAsInt && typ == protowire.Fixed64Type:
			v, _ := protowire.ConsumeFixed64(val)
			e.Value = float64(int64(v))
		case (num == exSpanID || num == exTraceID || num == exFilteredAttrs) && typ == protowire.BytesType:
			v, _ := protowire.ConsumeBytes(val)
			switch num {
			case exTraceID:
				if len(v) > 0 {
					lbls = append(lbls, prompb.Label{Name: "trace_id", Value: hex.EncodeToString(v)})
				}
			case exSpanID:
				if len(v) > 0 {
					lbls = append(lbls, prompb.Label{Name: "span_id", Value: hex.EncodeToString(v)})
				}
			default:
				l, ok := keyValueLabel(v)
				if !ok {
					return e, false
				}
				if l.Name != "" {
					lbls = append(lbls, l)
				}
			}
		}
	}
	slices.SortFunc(lbls, func(a, b prompb.Label) int { return strings.Compare(a.Name, b.Name) })
	// A filtered attribute named like trace_id or span_id loses to the ids.
	lbls = slices.CompactFunc(lbls, func(a, b prompb.Label) bool { return a.Name == b.Name })
	e.Labels = lbls
	return e, true
}

// keyValueLabel is an OTLP KeyValue as an exemplar label: the key as it
// is (otlptranslator does not rename exemplar labels either), a string, bool, int or double value as the query
// API renders it; other values (bytes, arrays, maps) are left out (empty
// Name).
func keyValueLabel(b []byte) (prompb.Label, bool) {
	var key string
	var val string
	have := false
	for len(b) > 0 {
		f, err := nextField(b)
		if err != nil {
			return prompb.Label{}, false
		}
		fb := b
		b = b[f.end:]
		if f.typ != protowire.BytesType {
			continue
		}
		switch f.num {
		case 1:
			key = string(f.bytes(fb))
		case 2:
			var ok bool
			if val, have, ok = anyValueString(f.bytes(fb)); !ok {
				return prompb.Label{}, false
			}
		}
	}
	if key == "" || !have {
		return prompb.Label{}, true
	}
	return prompb.Label{Name: key, Value: val}, true
}

// anyValueString renders a scalar AnyValue; have is false for the others.
func anyValueString(b []byte) (s string, have, ok bool) {
	for len(b) > 0 {
		f, err := nextField(b)
		if err != nil {
			return "", false, false
		}
		num, typ, val := f.num, f.typ, f.value(b)
		b = b[f.end:]
		switch {
		case num == anyString && typ == protowire.BytesType:
			v, _ := protowire.ConsumeBytes(val)
			s, have = string(v), true
		case num == anyBool && typ == protowire.VarintType:
			v, _ := protowire.ConsumeVarint(val)
			s, have = strconv.FormatBool(v != 0), true
		case num == anyInt && typ == protowire.VarintType:
			v, _ := protowire.ConsumeVarint(val)
			s, have = strconv.FormatInt(int64(v), 10), true
		case num == anyDouble && typ == protowire.Fixed64Type:
			v, _ := protowire.ConsumeFixed64(val)
			s, have = strconv.FormatFloat(math.Float64frombits(v), 'g', -1, 64), true
		default:
			have = false
		}
	}
	return s, have, true
}

// bucketOf is the index of the explicit bucket holding v: the first
// bound >= v, len(bounds) (+Inf) past the last one (the query API's
// bucketBound).
func bucketOf(bounds []float64, v float64) int {
	for b, x := range bounds {
		if v <= x {
			return b
		}
	}
	return len(bounds)
}
