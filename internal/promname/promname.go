// Package promname owns the mapping from OTLP metric names and attribute
// keys to the names PromQL shows: the query adapter (internal/query/prom)
// answers with it and the processing rules (internal/processor) match with
// it, so that a rule sees a series exactly as a query does.
//
// The mapping follows the OpenTelemetry "Prometheus and OpenMetrics
// compatibility" specification through github.com/prometheus/otlptranslator
// with UnderscoreEscapingWithSuffixes, Prometheus's default for OTLP.
// Everything here is safe for concurrent use.
package promname

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/otlptranslator"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/sluice-dev/sluice/internal/signal"
)

// Labels sluice derives from resource attributes or sets itself; a point
// attribute mapping to one of these is renamed "exported_"+name.
const (
	LabelJob         = "job"
	LabelInstance    = "instance"
	LabelServiceName = "service_name"
	LabelLe          = "le"
	LabelQuantile    = "quantile"
)

var metricNamer = otlptranslator.NewMetricNamer("", otlptranslator.UnderscoreEscapingWithSuffixes)

// Base returns the Prometheus name of a gauge or sum, or the base name
// (before _bucket, _sum, _count) of a histogram or summary, for the OTLP
// metric name, unit and translator type; "" when it has none.
func Base(otlpName, unit string, t otlptranslator.MetricType) string {
	base, err := metricNamer.Build(otlptranslator.Metric{Name: otlpName, Unit: unit, Type: t})
	if err != nil {
		return ""
	}
	return base
}

var labelNamer = otlptranslator.LabelNamer{}

var labelNames sync.Map // attribute key -> Prometheus label name ("" if none)

// LabelName maps a point attribute key to its Prometheus label name: every
// character other than [A-Za-z0-9_] becomes "_", runs of "_" collapse, a
// leading digit gets "key_", and a name that sluice sets itself (job,
// instance, service_name, le, quantile, __name__ or any "__" name) gets
// "exported_". "" means the key has no label (empty or only underscores).
func LabelName(key string) string {
	if v, ok := labelNames.Load(key); ok {
		return v.(string)
	}
	name, err := labelNamer.Build(key)
	if err != nil {
		name = ""
	}
	switch {
	case name == "":
	case name == LabelJob, name == LabelInstance, name == LabelServiceName, name == LabelLe, name == LabelQuantile,
		strings.HasPrefix(name, "__"):
		name = "exported_" + name
	}
	labelNames.Store(key, name)
	return name
}

// Reclaim returns the label of an attribute whose LabelName is label: an
// attribute keyed exactly like a label sluice sets itself (job, instance,
// service_name, le, quantile) gets that label back, instead of the
// "exported_" one, when sluice does not set it on this series (job and
// service_name: the resource has no service.name; instance: no
// service.instance.id; le: not a histogram; quantile: not a summary).
// Prometheus remote write sends job, instance and a classic histogram's le
// as plain labels, and a series must come back with exactly its labels.
func Reclaim(key, label string, job, instance, histogram, summary bool) string {
	if len(label) != len("exported_")+len(key) || label[len("exported_"):] != key {
		return label
	}
	switch key {
	case LabelJob, LabelServiceName:
		if !job {
			return key
		}
	case LabelInstance:
		if !instance {
			return key
		}
	case LabelLe:
		if !histogram {
			return key
		}
	case LabelQuantile:
		if !summary {
			return key
		}
	}
	return label
}

// AttrLabel is one point attribute as a label: the label name it maps to,
// the original key and the value as text.
type AttrLabel struct{ Label, Key, Value string }

// SortAttrLabels sorts kvs by label then key, the order JoinCollisions
// needs.
func SortAttrLabels(kvs []AttrLabel) {
	slices.SortFunc(kvs, func(x, y AttrLabel) int {
		if c := strings.Compare(x.Label, y.Label); c != 0 {
			return c
		}
		return strings.Compare(x.Key, y.Key)
	})
}

// JoinCollisions adds kvs to b, applying the OpenTelemetry rule for
// attributes whose sanitised names collide: their values are joined with
// ";" in the order of the original keys. kvs is sorted by SortAttrLabels.
func JoinCollisions(b *labels.ScratchBuilder, kvs []AttrLabel) {
	for i := 0; i < len(kvs); {
		j := i + 1
		for j < len(kvs) && kvs[j].Label == kvs[i].Label {
			j++
		}
		if j == i+1 {
			b.Add(kvs[i].Label, kvs[i].Value)
		} else {
			parts := make([]string, 0, j-i)
			for _, kv := range kvs[i:j] {
				parts = append(parts, kv.Value)
			}
			b.Add(kvs[i].Label, strings.Join(parts, ";"))
		}
		i = j
	}
}

// AttrValue is the label value of attribute a of c, as the lake stores it
// and PromQL shows it: ints and doubles in Go's shortest form, bools as
// true/false, empty as "", bytes, arrays and maps as stored. It aliases c's
// arena; clone it to keep it past the batch.
func AttrValue(c *signal.Common, a int) string {
	switch c.Attrs.Type[a] {
	case signal.ValueInt:
		return strconv.FormatInt(c.AttrInt(a), 10)
	case signal.ValueDouble:
		return strconv.FormatFloat(c.AttrDouble(a), 'g', -1, 64)
	case signal.ValueBool:
		return strconv.FormatBool(c.AttrBool(a))
	case signal.ValueEmpty:
		return ""
	}
	return c.AttrString(a)
}
