package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"

	jsoniter "github.com/json-iterator/go"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/prometheus/prometheus/util/jsonutil"
	promstats "github.com/prometheus/prometheus/util/stats"

	"github.com/sluice-dev/sluice/internal/jsonw"
	"github.com/sluice-dev/sluice/internal/query/prom"
)

// promResult is an evaluated PromQL query whose answer serve streams;
// close releases the engine's memory.
type promResult struct {
	value    parser.Value
	warnings annotations.Annotations
	// query is the expression's text: annotations name their position in
	// it ("(1:6)"), as Prometheus's answer does.
	query string
	// stats, when the request asked for them, follow the result, as in
	// Prometheus's answer.
	stats promstats.QueryStats
	close func()
}

// resultBytes is what encoding holds besides the result: nothing but the
// write buffer, since the answer streams.
const encodeBuffer = 64 << 10

// size is the memory the result holds: samples and label strings.
func (p *promResult) size() int64 {
	lb := func(l labels.Labels) int64 {
		n := int64(0)
		l.Range(func(x labels.Label) { n += int64(len(x.Name)+len(x.Value)) + 32 })
		return n
	}
	var n int64
	switch v := p.value.(type) {
	case promql.Vector:
		for _, s := range v {
			n += prom.SampleBytes + lb(s.Metric)
			if s.H != nil {
				n += histBytes(s.H)
			}
		}
	case promql.Matrix:
		for _, s := range v {
			n += int64(len(s.Floats))*prom.SampleBytes + lb(s.Metric)
			for _, p := range s.Histograms {
				n += histBytes(p.H)
			}
		}
	}
	return n
}

// histBytes is the memory of one histogram sample: the fixed part and its
// buckets, spans and custom bounds.
func histBytes(h *histogram.FloatHistogram) int64 {
	return prom.HistogramSampleBytes + 8*int64(len(h.PositiveBuckets)+len(h.NegativeBuckets)+len(h.CustomValues)+
		len(h.PositiveSpans)+len(h.NegativeSpans))
}

// writeResult streams the success answer in the Prometheus API's JSON
// shape (a sample is [seconds, "value"]), series by series through a
// fixed buffer, so a large matrix never exists twice in memory. It checks
// ctx between series: past the deadline it stops and returns ctx's error,
// and the caller aborts the connection (the status line is already sent).
func writeResult(ctx context.Context, w http.ResponseWriter, p *promResult) error {
	if dl, ok := ctx.Deadline(); ok {
		// A client that reads slowly would otherwise hold the query's slot
		// and memory past the deadline, blocked in a write that never
		// looks at ctx. (A recorder in tests cannot set one: ignored.)
		_ = http.NewResponseController(w).SetWriteDeadline(dl)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, encodeBuffer)
	b := make([]byte, 0, 4096)
	b = append(b, `{"status":"success","data":{"resultType":`...)
	b = jsonw.AppendString(b, string(p.value.Type()))
	b = append(b, `,"result":`...)
	flush := func() error {
		if _, err := bw.Write(b); err != nil {
			return err
		}
		b = b[:0]
		return ctx.Err()
	}
	switch v := p.value.(type) {
	case promql.Vector:
		b = append(b, '[')
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendMetric(b, s.Metric)
			if s.H != nil {
				b = append(b, `,"histogram":`...)
				b = appendHistogramPoint(b, s.T, s.H)
			} else {
				b = append(b, `,"value":`...)
				b = appendPoint(b, s.T, s.F)
			}
			b = append(b, '}')
			if len(b) >= encodeBuffer/2 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		b = append(b, ']')
	case promql.Matrix:
		b = append(b, '[')
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendMetric(b, s.Metric)
			// As Prometheus: "values" for float samples, "histograms" for
			// histogram samples (a series without either keeps "values":[]).
			if len(s.Floats) > 0 || len(s.Histograms) == 0 {
				b = append(b, `,"values":[`...)
				for k, pt := range s.Floats {
					if k > 0 {
						b = append(b, ',')
					}
					b = appendPoint(b, pt.T, pt.F)
					if len(b) >= encodeBuffer/2 {
						if err := flush(); err != nil {
							return err
						}
					}
				}
				b = append(b, ']')
			}
			if len(s.Histograms) > 0 {
				b = append(b, `,"histograms":[`...)
				for k, pt := range s.Histograms {
					if k > 0 {
						b = append(b, ',')
					}
					b = appendHistogramPoint(b, pt.T, pt.H)
					if len(b) >= encodeBuffer/2 {
						if err := flush(); err != nil {
							return err
						}
					}
				}
				b = append(b, ']')
			}
			b = append(b, '}')
			if err := flush(); err != nil {
				return err
			}
		}
		b = append(b, ']')
	case promql.Scalar:
		// As promql.Scalar.MarshalJSON writes it (encoding/json): the
		// seconds as a float, the value in plain decimal.
		b = append(b, '[')
		b = appendSeconds(b, v.T)
		b = append(b, ',', '"')
		switch {
		case math.IsNaN(v.V), math.IsInf(v.V, 0):
			b = appendValue(b, v.V)
		default:
			b = strconv.AppendFloat(b, v.V, 'f', -1, 64)
		}
		b = append(b, '"', ']')
	case promql.String:
		b = append(b, '[')
		b = appendSeconds(b, v.T)
		b = append(b, ',')
		b = jsonw.AppendString(b, v.V)
		b = append(b, ']')
	default:
		b = append(b, "null"...)
	}
	if p.stats != nil {
		js, err := json.Marshal(p.stats)
		if err != nil {
			return err
		}
		b = append(b, `,"stats":`...)
		b = append(b, js...)
	}
	b = append(b, '}')
	if len(p.warnings) > 0 {
		ws, infos := p.warnings.AsStrings(p.query, 10, 10)
		for _, x := range []struct {
			key string
			vs  []string
		}{{"warnings", ws}, {"infos", infos}} {
			if len(x.vs) == 0 {
				continue
			}
			b = append(b, `,"`...)
			b = append(b, x.key...)
			b = append(b, `":[`...)
			for i, s := range x.vs {
				if i > 0 {
					b = append(b, ',')
				}
				b = jsonw.AppendString(b, s)
			}
			b = append(b, ']')
		}
	}
	b = append(b, '}')
	if _, err := bw.Write(b); err != nil {
		return err
	}
	return bw.Flush()
}

func appendMetric(b []byte, l labels.Labels) []byte {
	b = append(b, `{"metric":{`...)
	first := true
	l.Range(func(x labels.Label) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = jsonw.AppendString(b, x.Name)
		b = append(b, ':')
		b = jsonw.AppendString(b, x.Value)
	})
	return append(b, '}')
}

func appendPoint(b []byte, t int64, f float64) []byte {
	b = append(b, '[')
	b = appendTimestamp(b, t)
	b = append(b, ',', '"')
	b = appendValue(b, f)
	return append(b, '"', ']')
}

// appendSeconds writes milliseconds as seconds the way encoding/json
// writes float64(ms)/1000 (promql.Scalar and String answers).
func appendSeconds(b []byte, ms int64) []byte {
	return strconv.AppendFloat(b, float64(ms)/1000, 'f', -1, 64)
}

// appendTimestamp writes milliseconds as seconds, as Prometheus does
// (util/jsonutil): the milliseconds as three digits after the point, none
// when they are 0.
func appendTimestamp(b []byte, ms int64) []byte {
	u := uint64(ms)
	if ms < 0 {
		b = append(b, '-')
		u = -u
	}
	b = strconv.AppendUint(b, u/1000, 10)
	if f := u % 1000; f != 0 {
		b = append(b, '.', byte('0'+f/100), byte('0'+f/10%10), byte('0'+f%10))
	}
	return b
}

// appendValue writes floats as Prometheus does (util/jsonutil): the
// shortest exact decimal, in exponent form below 1e-6 and from 1e21 on,
// and NaN, +Inf, -Inf by name.
func appendValue(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, 1):
		return append(b, "+Inf"...)
	case math.IsInf(f, -1):
		return append(b, "-Inf"...)
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	return strconv.AppendFloat(b, f, format, -1, 64)
}

// appendHistogramPoint writes [seconds, {"count":…,"sum":…,"buckets":[…]}]
// with Prometheus's own histogram encoder (util/jsonutil), so the bucket
// boundaries, their inclusiveness codes and the number formats are
// exactly what Prometheus's API answers.
func appendHistogramPoint(b []byte, t int64, h *histogram.FloatHistogram) []byte {
	b = append(b, '[')
	b = appendTimestamp(b, t)
	b = append(b, ',')
	st := jsoniter.ConfigCompatibleWithStandardLibrary.BorrowStream(nil)
	defer jsoniter.ConfigCompatibleWithStandardLibrary.ReturnStream(st)
	st.SetBuffer(b)
	jsonutil.MarshalHistogram(h, st)
	b = st.Buffer()
	st.SetBuffer(nil)
	return append(b, ']')
}
