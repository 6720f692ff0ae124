package prom

import (
	"slices"
	"strings"

	"github.com/prometheus/otlptranslator"

	"github.com/sluice-dev/sluice/internal/promname"
)

// metricKind is how an OTLP metric is exposed to PromQL.
type metricKind uint8

const (
	kindGauge        metricKind = iota // gauge, or a non-monotonic cumulative sum
	kindCounter                        // monotonic cumulative sum
	kindDeltaSum                       // delta sum: per-interval increments, summed over time at read (see cumulative)
	kindHistogram                      // explicit buckets: _bucket{le}, _sum, _count
	kindExpHistogram                   // exponential: a native histogram (and, from OTLP, _sum and _count)
	kindSummary                        // {quantile}, _sum, _count
	kindUnsupported
	// kindNativeHistogram is a native histogram with custom buckets (schema
	// -53) sent by remote write and stored as an explicit-bucket histogram
	// point: a native histogram under its own name, no _bucket series.
	kindNativeHistogram
)

// part is which field of a point a Prometheus series carries.
type part uint8

const (
	partValue part = iota
	partBucket
	partSum
	partCount
	partQuantile
	partHistogram // the whole point as a native histogram sample (histogram.go)
)

// output is one Prometheus metric name derived from an OTLP metric.
type output struct {
	name string
	part part
}

// metricDesc describes one OTLP metric as stored in a file (name, unit,
// type, temporality, monotonicity) and the Prometheus names it maps to.
type metricDesc struct {
	otlpName, unit, mtype, temporality string
	monotonic                          bool
	// rw: the rows were sent by remote write (scope prw.ScopeName), see
	// buildIndex: the PromQL name is the stored name verbatim, the labels
	// are the attribute keys verbatim, and histogram types are native
	// histograms.
	rw      bool
	kind    metricKind
	base    string
	outputs []output
}

func (d *metricDesc) sameAs(o *metricDesc) bool {
	return d.otlpName == o.otlpName && d.unit == o.unit && d.mtype == o.mtype &&
		d.temporality == o.temporality && d.monotonic == o.monotonic && d.rw == o.rw
}

// describe fills kind, base and outputs from the stored fields. The name
// follows otlptranslator's UnderscoreEscapingWithSuffixes, Prometheus's own
// default for OTLP: invalid characters become "_", the unit becomes a
// suffix ("s" -> "_seconds", "By" -> "_bytes", "1" -> "_ratio" for gauges),
// and monotonic sums end in "_total".
func (d *metricDesc) describe() {
	var t otlptranslator.MetricType
	switch d.mtype {
	case "gauge":
		d.kind, t = kindGauge, otlptranslator.MetricTypeGauge
	case "sum":
		switch {
		case d.temporality == "delta":
			d.kind = kindDeltaSum
		case d.monotonic:
			d.kind = kindCounter
		default:
			d.kind = kindGauge
		}
		t = otlptranslator.MetricTypeNonMonotonicCounter
		if d.monotonic {
			t = otlptranslator.MetricTypeMonotonicCounter
		}
	case "histogram":
		d.kind, t = kindHistogram, otlptranslator.MetricTypeHistogram
	case "exponential_histogram":
		d.kind, t = kindExpHistogram, otlptranslator.MetricTypeExponentialHistogram
	case "summary":
		d.kind, t = kindSummary, otlptranslator.MetricTypeSummary
	default:
		d.kind = kindUnsupported
		return
	}
	if d.rw {
		// A remote-write series keeps exactly its name (below), and a
		// histogram point is a native histogram.
		if d.kind == kindHistogram {
			d.kind = kindNativeHistogram
		}
	}
	base := d.otlpName
	if !d.rw {
		base = promname.Base(d.otlpName, d.unit, t)
	}
	if base == "" {
		d.kind = kindUnsupported
		return
	}
	d.base = base
	switch d.kind {
	case kindHistogram:
		d.outputs = []output{{base + "_bucket", partBucket}, {base + "_sum", partSum}, {base + "_count", partCount}}
	case kindExpHistogram:
		// The bare name is the native histogram, as Prometheus's own OTLP
		// ingestion names it. OTLP ones keep the _sum and _count series
		// sluice served before native histograms (dashboards use them);
		// remote-write ones come back exactly as sent: the bare name only.
		d.outputs = []output{{base, partHistogram}}
		if !d.rw {
			d.outputs = append(d.outputs, output{base + "_sum", partSum}, output{base + "_count", partCount})
		}
	case kindNativeHistogram:
		d.outputs = []output{{base, partHistogram}}
	case kindSummary:
		d.outputs = []output{{base, partQuantile}, {base + "_sum", partSum}, {base + "_count", partCount}}
	default:
		d.outputs = []output{{base, partValue}}
	}
}

// cumulative reports whether the metric's points are per-interval
// increments (delta temporality) that a query sums over time per series,
// as Prometheus's own OTLP ingestion does (deltatocumulative), so that
// rate(), increase() and histogram_quantile() over rate() see the
// cumulative values they expect.
func (d *metricDesc) cumulative() bool {
	return d.temporality == "delta" && (d.kind == kindDeltaSum || d.kind == kindHistogram || d.kind == kindExpHistogram || d.kind == kindNativeHistogram)
}

// promType is the metric's Prometheus type in metadata: a monotonic delta
// sum is read as a counter (cumulative), a non-monotonic one as a gauge.
func (d *metricDesc) promType() string {
	switch d.kind {
	case kindCounter:
		return "counter"
	case kindDeltaSum:
		if d.monotonic {
			return "counter"
		}
		return "gauge"
	case kindHistogram, kindExpHistogram, kindNativeHistogram:
		return "histogram"
	case kindSummary:
		return "summary"
	}
	return "gauge"
}

// MetricName returns the Prometheus name of a gauge or sum, or the base
// name (before _bucket, _sum, _count) of a histogram or summary; "" when the
// metric is not exposed. It is the mapping the query API uses.
func MetricName(otlpName, unit, metricType, temporality string, monotonic bool) string {
	d := metricDesc{otlpName: otlpName, unit: unit, mtype: metricType, temporality: temporality, monotonic: monotonic}
	d.describe()
	return d.base
}

// mayHoldMetric reports whether a segment recording the OTLP metric names
// otlpNames may hold series of the Prometheus metric promName: true when
// promName is "", when the names are unknown (none recorded) or when one
// of them can map to promName. See nameMayMap.
func mayHoldMetric(otlpNames []string, promName string) bool {
	if promName == "" || len(otlpNames) == 0 {
		return true
	}
	for _, n := range otlpNames {
		if nameMayMap(n, promName) {
			return true
		}
	}
	return false
}

// nameMayMap reports whether the OTLP metric name otlpName maps to the
// Prometheus name promName for some unit and type, without knowing them
// (the catalog records names only). The mapping (metricNamer, then the
// _bucket/_sum/_count of histograms and summaries) splits the name into
// tokens at every character outside [A-Za-z0-9:], may move a "total" or
// "ratio" token to the end, and appends unit and suffix tokens. So with
// "total" and "ratio" tokens dropped from both, the OTLP name's tokens are
// a prefix of the Prometheus name's: false means it can never map, true
// only that it may.
func nameMayMap(otlpName, promName string) bool {
	split := func(s string) []string {
		return slices.DeleteFunc(strings.FieldsFunc(s, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == ':')
		}), func(t string) bool { return t == "total" || t == "ratio" })
	}
	o, p := split(otlpName), split(promName)
	return len(o) <= len(p) && slices.Equal(o, p[:len(o)])
}

// Labels derived from resource attributes; a point attribute mapping to
// one of these (or to a label sluice sets itself) is renamed "exported_"+name.
const (
	labelJob         = promname.LabelJob
	labelInstance    = promname.LabelInstance
	labelServiceName = promname.LabelServiceName
	labelLe          = promname.LabelLe
	labelQuantile    = promname.LabelQuantile
)

// LabelName maps a point attribute key to its Prometheus label name; see
// promname.LabelName, which owns the mapping.
func LabelName(key string) string { return promname.LabelName(key) }

// reclaimLabels gives an attribute keyed exactly like a label that sluice
// sets itself (job, instance, service_name, le, quantile) that label back,
// instead of LabelName's "exported_" one, when sluice does not set it on
// this series: a series without service.name gets no job or service_name
// from its resource, one without service.instance.id no instance, and
// only histograms get le and summaries quantile. Prometheus remote write
// sends job, instance and a classic histogram's le as plain labels, and a
// series must come back with exactly its labels. Where sluice does set
// the label, the attribute keeps its exported_ name, as before.
func reclaimLabels(kv []attrLabel, job, instance bool, kind metricKind) {
	for j := range kv {
		kv[j].Label = promname.Reclaim(kv[j].Key, kv[j].Label, job, instance, kind == kindHistogram, kind == kindSummary)
	}
}
