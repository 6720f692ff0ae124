package prw

import (
	"fmt"
	"iter"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// FamilyMetadata is one remote write 1.0 MetricMetadata: the type, help
// and unit of a metric family. Prometheus sends these on their own, in
// requests without series (every metadata_config.send_interval), so they
// describe series that arrived, or will arrive, in other requests.
type FamilyMetadata struct {
	Name string // the family name: "http_requests" for http_requests_total, "x" for x_bucket
	Type string // counter, gauge, histogram, gaugehistogram, summary, info, stateset or unknown
	Help string
	Unit string
}

// MaxMetadataText bounds a family's help plus unit: an entry with more is
// dropped by FamilyMetadataV1 (the lake keeps metadata per family for as
// long as the family is sent; help text is a sentence, not a payload).
const MaxMetadataText = 16 << 10

// FamilyMetadataV1 returns the MetricMetadata of a remote write 1.0
// WriteRequest (snappy-decoded) in the order sent, and how many entries it
// skipped: those without a family name, with text that is not UTF-8, or
// with more than MaxMetadataText bytes of help and unit. Series are
// skipped unread. The error names the first malformed field; the decoder
// (DecodeV1) reports the same request as malformed.
func FamilyMetadataV1(b []byte) (out []FamilyMetadata, skipped int, err error) {
	for i := 0; i < len(b); {
		num, wt, j := tag(b, i)
		if j < 0 {
			return out, skipped, fmt.Errorf("remote write 1.0: bad field tag at byte %d", i)
		}
		if num != 3 {
			if j = skip(b, j, wt); j < 0 {
				return out, skipped, fmt.Errorf("remote write 1.0: field %d truncated at byte %d", num, i)
			}
			i = j
			continue
		}
		s, e := lenField(b, j)
		if wt != wtLen || s < 0 {
			return out, skipped, fmt.Errorf("WriteRequest.metadata[%d]: bad length at byte %d", len(out)+skipped, i)
		}
		m, ok := familyMetadata(b[s:e])
		switch {
		case !ok:
			return out, skipped, fmt.Errorf("WriteRequest.metadata[%d]: bad encoding at byte %d", len(out)+skipped, s)
		case m.Name == "" || !utf8.ValidString(m.Name) || !utf8.ValidString(m.Help) || !utf8.ValidString(m.Unit) ||
			len(m.Help)+len(m.Unit) > MaxMetadataText:
			skipped++
		default:
			out = append(out, m)
		}
		i = e
	}
	return out, skipped, nil
}

// familyMetadata decodes MetricMetadata b.
func familyMetadata(b []byte) (FamilyMetadata, bool) {
	typ, name, help, unit, ok := parseMetadataV1(b)
	if !ok {
		return FamilyMetadata{}, false
	}
	return FamilyMetadata{Name: string(name), Type: typeName(typ), Help: string(help), Unit: string(unit)}, true
}

// FamilyOf returns the family names a series name can belong to, most
// specific first: the name itself, then the name without a _total,
// _bucket, _sum, _count, _created or _info suffix (the suffixes
// Prometheus's exposition formats add to a family's series).
func FamilyOf(name string) iter.Seq[string] {
	return func(yield func(string) bool) {
		if !yield(name) {
			return
		}
		for _, suf := range [...]string{"_total", "_bucket", "_sum", "_count", "_created", "_info"} {
			if n := len(name) - len(suf); n > 0 && name[n:] == suf {
				if !yield(name[:n]) {
					return
				}
			}
		}
	}
}

// AppendMetricMetadata appends to dst a remote write 1.0 WriteRequest
// field metadata (3): a MetricMetadata of type typ (the 1.0 and 2.0
// enums number the types alike), family name, help and unit.
func AppendMetricMetadata(dst []byte, typ uint64, name, help, unit []byte) []byte {
	n := 0
	if typ != 0 {
		n += 1 + protowire.SizeVarint(typ)
	}
	for _, f := range [][]byte{name, help, unit} {
		if len(f) > 0 {
			n += 1 + protowire.SizeBytes(len(f))
		}
	}
	dst = protowire.AppendTag(dst, 3, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(n))
	if typ != 0 {
		dst = protowire.AppendTag(dst, 1, protowire.VarintType)
		dst = protowire.AppendVarint(dst, typ)
	}
	for i, f := range [][]byte{name, help, unit} {
		if len(f) > 0 {
			dst = protowire.AppendTag(dst, [...]protowire.Number{2, 4, 5}[i], protowire.BytesType)
			dst = protowire.AppendBytes(dst, f)
		}
	}
	return dst
}
