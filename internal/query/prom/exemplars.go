package prom

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/parquet-go/parquet-go"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/sluice-dev/sluice/internal/lake/format"
)

// Exemplars answers /api/v1/query_exemplars: the exemplars stored (the
// exemplars column, OTLP JSON) on the points in [mint, maxt] (ms,
// inclusive) of the series any matcher set selects, grouped by series and
// sorted by labels, each series' exemplars by time.
//
// An exemplar belongs to the series of the point it was stored on: a
// float series (gauge or sum; every remote-write float sample) carries it
// under its own labels, a native histogram (exponential, or a remote-write
// one) under its bare name, and an OTLP explicit-bucket histogram point on
// the _bucket series of the exemplar value's bucket (the least le >= the
// value; +Inf past the last bound), as Prometheus's OTLP ingestion puts it.
// Exemplar labels are the filtered attributes, plus trace_id and span_id
// (hex) when the exemplar has them, as Prometheus's OTLP receiver does.
func (a *Adapter) Exemplars(ctx context.Context, tenant string, lim Limits, mint, maxt int64, sets [][]*labels.Matcher) (_ []exemplar.QueryResult, err error) {
	defer func() { err = storageErr(err) }()
	q := &Querier{a: a, tenant: tenant, lim: lim, mint: mint, maxt: maxt}
	defer q.Close()
	type found struct {
		lbls labels.Labels
		ex   []exemplar.Exemplar
		seen map[exemplarKey]bool
	}
	selected := map[string]*found{} // by series labels
	var out []*found
	// Series and their label sets first (cached by series_id), so the
	// exemplar rows below resolve their labels without label columns: one
	// scan for the union of the sets, as series and labels read them.
	ss, err := q.selectSeries(ctx, mint, maxt, true, nil, sets)
	if err != nil {
		return nil, err
	}
	for _, s := range ss {
		if k := s.lbls.String(); selected[k] == nil {
			f := &found{lbls: s.lbls, seen: map[exemplarKey]bool{}}
			selected[k] = f
			out = append(out, f)
		}
	}
	if len(ss) == 0 {
		return []exemplar.QueryResult{}, nil
	}
	nameSets := nameMatchers(sets)
	err = q.eachFile(ctx, mint, maxt, func(pf *parquet.File, idx *fileIndex) error {
		exCol := -1
		if leaf, ok := pf.Schema().Lookup(format.ColExemplars); ok {
			exCol = leaf.ColumnIndex
		}
		if exCol < 0 || idx.cols.ts < 0 || idx.cols.seriesID < 0 || idx.rollup {
			return nil
		}
		minNs, maxNs := msToNs(mint), msToNs(maxt)
		for g, rg := range idx.rgs {
			if rg.minT > maxNs || rg.maxT < minNs {
				continue
			}
			ccs := pf.RowGroups()[g].ColumnChunks()
			for _, r := range rg.runs {
				var outs []output
				buckets := false
				for _, o := range matchingOutputs(r.desc, nameSets, nil) {
					switch o.part {
					case partValue, partHistogram:
						outs = append(outs, o)
					case partBucket:
						outs = append(outs, o)
						buckets = true
					}
				}
				if len(outs) == 0 {
					continue
				}
				rows := make([]int64, 0, r.end-r.start)
				for i := r.start; i < r.end; i++ {
					rows = append(rows, i)
				}
				n := len(rows)
				js := make([][]byte, n)
				if err := format.ReadValuesAt(ccs[exCol], r.start, r.end, rows, func(i int, v parquet.Value) {
					if !v.IsNull() && len(v.ByteArray()) > 2 {
						js[i] = slices.Clone(v.ByteArray())
					}
				}); err != nil {
					return fmt.Errorf("row group %d: exemplars: %w", g, err)
				}
				var with []int64
				for i := range js {
					if js[i] != nil {
						with = append(with, rows[i])
					}
				}
				if len(with) == 0 {
					continue
				}
				ids := make([]uint64, len(with))
				if err := format.ReadValuesAt(ccs[idx.cols.seriesID], r.start, r.end, with, func(i int, v parquet.Value) {
					ids[i] = uint64(v.Int64())
				}); err != nil {
					return fmt.Errorf("row group %d: series_id: %w", g, err)
				}
				// A classic histogram's exemplars go to the _bucket series
				// of their value's bucket: its bounds are read for them.
				var bnd []float64
				var bndOff []int32
				if buckets {
					if idx.cols.bounds < 0 {
						return fmt.Errorf("row group %d: no %s column", g, format.ColExplicitBounds)
					}
					bndOff = make([]int32, r.end-r.start+1)
					var err error
					if bnd, err = format.ReadListF64(ccs[idx.cols.bounds], r.start, r.end, nil, bndOff); err != nil {
						return fmt.Errorf("row group %d: %s: %w", g, format.ColExplicitBounds, err)
					}
				}
				add := func(lbls labels.Labels, e exemplar.Exemplar) {
					f := selected[lbls.String()]
					if f == nil {
						return
					}
					key := exemplarKey{ts: e.Ts, v: e.Value, l: e.Labels.String()}
					if !f.seen[key] {
						f.seen[key] = true
						f.ex = append(f.ex, e)
					}
				}
				for k, row := range with {
					attrs, ok := q.a.labels.get(q.tenant, ids[k], r.desc.rw)
					if !ok {
						continue // not a selected series (or evicted from the bounded cache)
					}
					exs, err := parseExemplars(js[row-r.start], mint, maxt)
					if err != nil {
						return fmt.Errorf("row group %d row %d: exemplars: %w", g, row, err)
					}
					for _, o := range outs {
						b := labels.NewBuilder(attrs)
						b.Set(labels.MetricName, o.name)
						if o.part != partBucket {
							l := b.Labels()
							for _, e := range exs {
								add(l, e)
							}
							continue
						}
						for _, e := range exs {
							i := row - r.start
							b.Set(labelLe, formatFloat(bucketBound(bnd[bndOff[i]:bndOff[i+1]], e.Value)))
							add(b.Labels(), e)
						}
					}
				}
			}
		}
		return nil
	}, false, sets...)
	if err != nil {
		return nil, err
	}
	res := make([]exemplar.QueryResult, 0, len(out))
	for _, f := range out {
		if len(f.ex) == 0 {
			continue
		}
		slices.SortStableFunc(f.ex, func(a, b exemplar.Exemplar) int { return cmp.Compare(a.Ts, b.Ts) })
		res = append(res, exemplar.QueryResult{SeriesLabels: f.lbls, Exemplars: f.ex})
	}
	slices.SortFunc(res, func(a, b exemplar.QueryResult) int { return labels.Compare(a.SeriesLabels, b.SeriesLabels) })
	return res, nil
}

// bucketBound is the upper bound of the bucket holding v: the least bound
// >= v, +Inf past the last one.
func bucketBound(bounds []float64, v float64) float64 {
	for _, b := range bounds {
		if v <= b {
			return b
		}
	}
	return math.Inf(1)
}

type exemplarKey struct {
	ts int64
	v  float64
	l  string
}

// otlpExemplar is the OTLP JSON form the lake stores (docs/schema.md).
type otlpExemplar struct {
	TimeUnixNano       string      `json:"timeUnixNano"`
	AsDouble           *jsonDouble `json:"asDouble"`
	AsInt              *string     `json:"asInt"`
	TraceID            string      `json:"traceId"`
	SpanID             string      `json:"spanId"`
	FilteredAttributes []otlpKVJ   `json:"filteredAttributes"`
}

// jsonDouble is a double as protojson writes it (and the lake with
// jsonw.AppendFloat): a number, or the string "NaN", "Infinity" or
// "-Infinity" (a remote-write exemplar's value may be any of them);
// protojson also reads a number in a string.
type jsonDouble float64

func (d *jsonDouble) UnmarshalJSON(b []byte) error {
	var f float64
	if len(b) == 0 || b[0] != '"' {
		if err := json.Unmarshal(b, &f); err != nil {
			return err
		}
		*d = jsonDouble(f)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	switch s {
	case "NaN":
		f = math.NaN()
	case "Infinity":
		f = math.Inf(1)
	case "-Infinity":
		f = math.Inf(-1)
	default:
		var err error
		// A number in a string; NaN and infinities only as named above.
		if f, err = strconv.ParseFloat(s, 64); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("asDouble %s: not a double", b)
		}
	}
	*d = jsonDouble(f)
	return nil
}

type otlpKVJ struct {
	Key   string         `json:"key"`
	Value map[string]any `json:"value"`
}

// parseExemplars reads one point's exemplars, keeping those in [mint,
// maxt] (ms).
func parseExemplars(js []byte, mint, maxt int64) ([]exemplar.Exemplar, error) {
	var raw []otlpExemplar
	if err := json.Unmarshal(js, &raw); err != nil {
		return nil, err
	}
	out := make([]exemplar.Exemplar, 0, len(raw))
	for _, r := range raw {
		ns, _ := strconv.ParseInt(r.TimeUnixNano, 10, 64)
		ts := ns / 1e6
		if ts < mint || ts > maxt {
			continue
		}
		var v float64
		switch {
		case r.AsDouble != nil:
			v = float64(*r.AsDouble)
		case r.AsInt != nil:
			i, _ := strconv.ParseInt(*r.AsInt, 10, 64)
			v = float64(i)
		}
		b := labels.NewScratchBuilder(len(r.FilteredAttributes) + 2)
		for _, kv := range r.FilteredAttributes {
			b.Add(kv.Key, anyValueString(kv.Value))
		}
		if r.TraceID != "" {
			b.Add("trace_id", r.TraceID)
		}
		if r.SpanID != "" {
			b.Add("span_id", r.SpanID)
		}
		b.Sort()
		out = append(out, exemplar.Exemplar{Labels: b.Labels(), Value: v, Ts: ts, HasTs: true})
	}
	return out, nil
}

// anyValueString renders an OTLP JSON AnyValue as a label value.
func anyValueString(v map[string]any) string {
	for _, k := range []string{"stringValue", "intValue", "doubleValue", "boolValue"} {
		if x, ok := v[k]; ok {
			switch x := x.(type) {
			case string:
				return x
			case float64:
				return strconv.FormatFloat(x, 'g', -1, 64)
			case bool:
				return strconv.FormatBool(x)
			}
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}
