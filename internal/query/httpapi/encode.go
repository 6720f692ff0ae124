package httpapi

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
)

// encodeValue renders a PromQL result in the Prometheus API's JSON shape:
// a sample is [seconds, "value"].
func encodeValue(v parser.Value) any {
	switch v := v.(type) {
	case promql.Vector:
		out := make([]vectorSample, len(v))
		for i, s := range v {
			out[i] = vectorSample{Metric: labelMap(s.Metric), Value: point(s.T, s.F)}
		}
		return out
	case promql.Matrix:
		out := make([]matrixSeries, len(v))
		for i, s := range v {
			ps := make([][2]any, len(s.Floats))
			for k, p := range s.Floats {
				ps[k] = point(p.T, p.F)
			}
			out[i] = matrixSeries{Metric: labelMap(s.Metric), Values: ps}
		}
		return out
	case promql.Scalar:
		return point(v.T, v.V)
	case promql.String:
		return [2]any{timestamp(v.T), v.V}
	}
	return nil
}

type vectorSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

type matrixSeries struct {
	Metric map[string]string `json:"metric"`
	Values [][2]any          `json:"values"`
}

func labelMap(l labels.Labels) map[string]string {
	m := make(map[string]string, l.Len())
	l.Range(func(x labels.Label) { m[x.Name] = x.Value })
	return m
}

func point(t int64, f float64) [2]any { return [2]any{timestamp(t), formatValue(f)} }

func timestamp(ms int64) json.Number {
	return json.Number(strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64))
}

// formatValue writes floats as Prometheus does: shortest exact decimal,
// and NaN, +Inf, -Inf by name.
func formatValue(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}
