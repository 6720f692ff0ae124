package signal

import "fmt"

// Kind names the three OTLP signals, and the traced I/O calls that
// `sluice run` queues from its eBPF tracer (never sent to an exporter).
type Kind uint8

const (
	KindUnknown Kind = iota
	KindLogs
	KindMetrics
	KindTraces
	KindIOEvents
)

func (k Kind) String() string {
	switch k {
	case KindLogs:
		return "logs"
	case KindMetrics:
		return "metrics"
	case KindTraces:
		return "traces"
	case KindIOEvents:
		return "io_events"
	}
	return "unknown"
}

// ValueType mirrors the cases of OTLP's AnyValue.
type ValueType uint8

const (
	ValueEmpty ValueType = iota // AnyValue with no value set
	ValueString
	ValueBool
	ValueInt
	ValueDouble
	ValueBytes
	ValueArray // raw ArrayValue-bearing AnyValue protobuf in the arena
	ValueMap   // raw KeyValueList-bearing AnyValue protobuf in the arena
)

var valueTypeNames = [...]string{"empty", "string", "bool", "int", "double", "bytes", "array", "map"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("ValueType(%d)", t)
}

// ParseValueType is the inverse of ValueType.String.
func ParseValueType(s string) (ValueType, bool) {
	for i, n := range valueTypeNames {
		if n == s {
			return ValueType(i), true
		}
	}
	return 0, false
}

// MetricType is the OTLP data point kind of a metric.
type MetricType uint8

const (
	MetricUnknown MetricType = iota
	MetricGauge
	MetricSum
	MetricHistogram
	MetricExponentialHistogram
	MetricSummary
)

var metricTypeNames = [...]string{"unknown", "gauge", "sum", "histogram", "exponential_histogram", "summary"}

func (t MetricType) String() string {
	if int(t) < len(metricTypeNames) {
		return metricTypeNames[t]
	}
	return fmt.Sprintf("MetricType(%d)", t)
}

// ParseMetricType is the inverse of MetricType.String.
func ParseMetricType(s string) (MetricType, bool) {
	for i, n := range metricTypeNames {
		if n == s {
			return MetricType(i), true
		}
	}
	return 0, false
}

// Temporality is OTLP's AggregationTemporality.
type Temporality uint8

const (
	TemporalityUnspecified Temporality = 0
	TemporalityDelta       Temporality = 1
	TemporalityCumulative  Temporality = 2
)

func (t Temporality) String() string {
	switch t {
	case TemporalityDelta:
		return "delta"
	case TemporalityCumulative:
		return "cumulative"
	}
	return "unspecified"
}

// ParseTemporality is the inverse of Temporality.String.
func ParseTemporality(s string) (Temporality, bool) {
	switch s {
	case "unspecified":
		return TemporalityUnspecified, true
	case "delta":
		return TemporalityDelta, true
	case "cumulative":
		return TemporalityCumulative, true
	}
	return 0, false
}
