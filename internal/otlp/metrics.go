package otlp

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/sluice-dev/sluice/internal/signal"
)

var (
	schemaMetric = newSchema("",
		1, wtLen, "name", 2, wtLen, "description", 3, wtLen, "unit",
		5, wtLen, "gauge", 7, wtLen, "sum", 9, wtLen, "histogram",
		10, wtLen, "exponential_histogram", 11, wtLen, "summary", 12, wtLen, "metadata")
	schemaGauge   = newSchema("", 1, wtLen, "data_points")
	schemaSum     = newSchema("", 1, wtLen, "data_points", 2, wtVarint, "aggregation_temporality", 3, wtVarint, "is_monotonic")
	schemaHist    = newSchema("", 1, wtLen, "data_points", 2, wtVarint, "aggregation_temporality")
	schemaNumber  = newSchema("", 7, wtLen, "attributes", 2, wtI64, "start_time_unix_nano", 3, wtI64, "time_unix_nano", 4, wtI64, "as_double", 6, wtI64, "as_int", 5, wtLen, "exemplars", 8, wtVarint, "flags")
	schemaHistDP  = newSchema("", 9, wtLen, "attributes", 2, wtI64, "start_time_unix_nano", 3, wtI64, "time_unix_nano", 4, wtI64, "count", 5, wtI64, "sum", 8, wtLen, "exemplars", 10, wtVarint, "flags", 11, wtI64, "min", 12, wtI64, "max")
	schemaExpDP   = newSchema("", 1, wtLen, "attributes", 2, wtI64, "start_time_unix_nano", 3, wtI64, "time_unix_nano", 4, wtI64, "count", 5, wtI64, "sum", 6, wtVarint, "scale", 7, wtI64, "zero_count", 8, wtLen, "positive", 9, wtLen, "negative", 10, wtVarint, "flags", 11, wtLen, "exemplars", 12, wtI64, "min", 13, wtI64, "max", 14, wtI64, "zero_threshold")
	schemaBuckets = newSchema("buckets", 1, wtVarint, "offset")
	schemaSumDP   = newSchema("", 7, wtLen, "attributes", 2, wtI64, "start_time_unix_nano", 3, wtI64, "time_unix_nano", 4, wtI64, "count", 5, wtI64, "sum", 6, wtLen, "quantile_values", 8, wtVarint, "flags")
	schemaQuant   = newSchema("quantile_values", 1, wtI64, "quantile", 2, wtI64, "value")
)

// DecodeMetrics appends one row per data point of the
// ExportMetricsServiceRequest pb to dst and computes the new rows' series
// ids. pb is copied into dst's arena once. On error dst is left as it was.
func DecodeMetrics(dst *signal.Metrics, pb []byte) error {
	if err := arenaRoom(&dst.Common, len(pb)); err != nil {
		return err
	}
	m, n, nd := markCommon(&dst.Common), dst.Len(), len(dst.Descs)
	nu, nf := len(dst.U64), len(dst.F64)
	base := len(dst.Buf)
	dst.Buf = append(dst.Buf, pb...)
	d := decoder{c: &dst.Common}
	err := d.request(dst.Buf, base, &metricsNames, func(b []byte, i int, res uint32) error {
		return d.scopeMetrics(dst, b, i, res)
	})
	if err != nil {
		m.restore(&dst.Common)
		dst.Truncate(n)
		dst.Descs = dst.Descs[:nd]
		dst.U64, dst.F64 = dst.U64[:nu], dst.F64[:nf]
		return wrongKind(err, pb, signal.KindMetrics)
	}
	if dst.Len() > n {
		dst.ComputeSeriesIDsFrom(n)
	}
	return nil
}

func (d *decoder) scopeMetrics(dst *signal.Metrics, b []byte, i int, res uint32) error {
	sc := d.beginScope()
	for k := 0; i < len(b); {
		tag, j := uint64(b[i]), i+1
		if tag >= 0x80 {
			tag, j = uvarintSlow(b, i)
		}
		if j < 0 {
			return tagErr("", j)
		}
		var err error
		if tag != 2<<3|wtLen {
			if i, err = d.scopeField(b, j, tag, sc); err != nil {
				return err
			}
			continue
		}
		s, e := lenField(b, j)
		if e < 0 {
			return at(posErr(e), "metrics[%d]", k)
		}
		if err = d.metric(dst, b[:e], s, res, sc); err != nil {
			return at(err, "metrics[%d]", k)
		}
		k++
		i = e
	}
	return nil
}

func (d *decoder) metric(dst *signal.Metrics, b []byte, i int, res, scope uint32) error {
	var desc signal.MetricDesc
	var dataTag uint64
	ds, de := 0, 0
	mdStart := uint32(d.c.Attrs.Len())
	n := 0
	for i < len(b) {
		tag, j := uint64(b[i]), i+1
		if tag >= 0x80 {
			tag, j = uvarintSlow(b, i)
		}
		if j < 0 {
			return tagErr("metric", j)
		}
		switch tag {
		case 1<<3 | wtLen, 2<<3 | wtLen, 3<<3 | wtLen:
			s, e := lenField(b, j)
			if e < 0 {
				return schemaMetric.truncErr(tag, e)
			}
			str, err := d.str(b, s, e, schemaMetric.field(tag>>3))
			if err != nil {
				return err
			}
			switch tag >> 3 {
			case 1:
				desc.Name = str
			case 2:
				desc.Description = str
			default:
				desc.Unit = str
			}
			i = e
		case 5<<3 | wtLen, 7<<3 | wtLen, 9<<3 | wtLen, 10<<3 | wtLen, 11<<3 | wtLen:
			s, e := lenField(b, j)
			if e < 0 {
				return schemaMetric.truncErr(tag, e)
			}
			dataTag, ds, de = tag, s, e // a oneof: the last one wins
			i = e
		case 12<<3 | wtLen:
			var err error
			if i, err = d.attr(b, j, ctxOther, n); err != nil {
				return at(err, "metadata")
			}
			n++
		default:
			var err error
			if i, err = schemaMetric.skip(b, j, tag); err != nil {
				return err
			}
		}
	}
	desc.Metadata = signal.Range{Start: mdStart, End: uint32(d.c.Attrs.Len())}
	if dataTag != 0 {
		if err := d.metricData(dst, &desc, b[:de], ds, dataTag, res, scope); err != nil {
			return err
		}
	}
	dst.Descs = append(dst.Descs, desc)
	return nil
}

// metricData decodes a Gauge, Sum, Histogram, ExponentialHistogram or
// Summary. Its points refer to the descriptor appended after them.
func (d *decoder) metricData(dst *signal.Metrics, desc *signal.MetricDesc, b []byte, i int, dataTag uint64, res, scope uint32) error {
	var sc *schema
	var name string
	switch dataTag >> 3 {
	case 5:
		desc.Type, sc, name = signal.MetricGauge, schemaGauge, "gauge"
	case 7:
		desc.Type, sc, name = signal.MetricSum, schemaSum, "sum"
	case 9:
		desc.Type, sc, name = signal.MetricHistogram, schemaHist, "histogram"
	case 10:
		desc.Type, sc, name = signal.MetricExponentialHistogram, schemaHist, "exponential_histogram"
	default:
		desc.Type, sc, name = signal.MetricSummary, schemaGauge, "summary"
	}
	descIdx := uint32(len(dst.Descs))
	for k := 0; i < len(b); {
		tag, j := uvarint(b, i)
		if j < 0 {
			return fmt.Errorf("%s: %w", name, tagErr("", j))
		}
		switch {
		case tag == 1<<3|wtLen:
			s, e := lenField(b, j)
			if e < 0 {
				return at(posErr(e), "%s.data_points[%d]", name, k)
			}
			p := dst.AppendPoint(descIdx, res, scope)
			var err error
			switch desc.Type {
			case signal.MetricGauge, signal.MetricSum:
				err = d.numberPoint(dst, b[:e], s, p)
			case signal.MetricHistogram:
				err = d.histogramPoint(dst, b[:e], s, p)
			case signal.MetricExponentialHistogram:
				err = d.expHistogramPoint(dst, b[:e], s, p)
			default:
				err = d.summaryPoint(dst, b[:e], s, p)
			}
			if err != nil {
				return at(err, "%s.data_points[%d]", name, k)
			}
			k++
			i = e
		case tag == 2<<3|wtVarint && sc != schemaGauge:
			v, e := uvarint(b, j)
			if e < 0 {
				return fmt.Errorf("%s: %w", name, sc.truncErr(tag, e))
			}
			desc.Temporality = signal.Temporality(v)
			i = e
		case tag == 3<<3|wtVarint && sc == schemaSum:
			v, e := uvarint(b, j)
			if e < 0 {
				return fmt.Errorf("%s: %w", name, sc.truncErr(tag, e))
			}
			desc.Monotonic = v != 0
			i = e
		default:
			var err error
			if i, err = sc.skip(b, j, tag); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return nil
}

// exemplar checks the Exemplar field whose tag ended at j, number k of its
// point, and keeps it raw in Msgs.
func (d *decoder) exemplar(dst *signal.Metrics, b []byte, j int, k int) (int, error) {
	s, e := lenField(b, j)
	if e < 0 {
		return 0, at(posErr(e), "exemplars[%d]", k)
	}
	if err := d.checkExemplar(b[:e], s); err != nil {
		return 0, at(err, "exemplars[%d]", k)
	}
	dst.Msgs = append(dst.Msgs, signal.MakeStr(s, e-s))
	return e, nil
}

func (d *decoder) numberPoint(dst *signal.Metrics, b []byte, i int, p int) error {
	na, nx := 0, 0
	for i < len(b) {
		tag, j := uint64(b[i]), i+1
		if tag >= 0x80 {
			tag, j = uvarintSlow(b, i)
		}
		if j < 0 {
			return tagErr("data_point", j)
		}
		var err error
		var v uint64
		switch tag {
		case 7<<3 | wtLen:
			if i, err = d.attr(b, j, ctxRecord, na); err != nil {
				return err
			}
			na++
		case 2<<3 | wtI64:
			v, i = fixed64(b, j)
			dst.StartTime[p] = int64(v)
		case 3<<3 | wtI64:
			v, i = fixed64(b, j)
			dst.Time[p] = int64(v)
		case 4<<3 | wtI64, 6<<3 | wtI64:
			v, i = fixed64(b, j)
			dst.Number[p] = v
			dst.NumberType[p] = signal.ValueDouble
			if tag == 6<<3|wtI64 {
				dst.NumberType[p] = signal.ValueInt
			}
		case 5<<3 | wtLen:
			if i, err = d.exemplar(dst, b, j, nx); err != nil {
				return err
			}
			nx++
		case 8<<3 | wtVarint:
			v, i = uvarint(b, j)
			dst.Flags[p] = uint32(v)
		default:
			if i, err = schemaNumber.skip(b, j, tag); err != nil {
				return err
			}
		}
		if i < 0 {
			return schemaNumber.truncErr(tag, i)
		}
	}
	dst.Attr[p].End = uint32(d.c.Attrs.Len())
	dst.Exemplars[p].End = uint32(len(d.c.Msgs))
	return nil
}

// fixedList appends a repeated fixed64 or double field given packed
// (wtLen) or as one element (wtI64) and returns the position after it.
func fixedList[T uint64 | float64](dst []T, b []byte, j int, tag uint64, what string) ([]T, int, error) {
	if tag&7 == wtI64 {
		v, e := fixed64(b, j)
		if e < 0 {
			return dst, 0, fmt.Errorf("%s: %w", what, posErr(e))
		}
		return append(dst, fromBits[T](v)), e, nil
	}
	s, e := lenField(b, j)
	if e < 0 {
		return dst, 0, fmt.Errorf("%s: %w", what, posErr(e))
	}
	if (e-s)%8 != 0 {
		return dst, 0, fmt.Errorf("%s: packed length %d is not a multiple of 8: %w", what, e-s, ErrMalformed)
	}
	for k := s; k < e; k += 8 {
		dst = append(dst, fromBits[T](binary.LittleEndian.Uint64(b[k:])))
	}
	return dst, e, nil
}

func fromBits[T uint64 | float64](v uint64) T {
	var z T
	if _, ok := any(z).(float64); ok {
		return T(math.Float64frombits(v))
	}
	return T(v)
}

func (d *decoder) histogramPoint(dst *signal.Metrics, b []byte, i int, p int) error {
	na, nx := 0, 0
	fs, fe := -1, -1 // fieldFloatCounts, appended to F64 after the bounds
	for i < len(b) {
		tag, j := uint64(b[i]), i+1
		if tag >= 0x80 {
			tag, j = uvarintSlow(b, i)
		}
		if j < 0 {
			return tagErr("data_point", j)
		}
		var err error
		var v uint64
		switch tag {
		case 9<<3 | wtLen:
			if i, err = d.attr(b, j, ctxRecord, na); err != nil {
				return err
			}
			na++
		case 2<<3 | wtI64:
			v, i = fixed64(b, j)
			dst.StartTime[p] = int64(v)
		case 3<<3 | wtI64:
			v, i = fixed64(b, j)
			dst.Time[p] = int64(v)
		case 4<<3 | wtI64:
			dst.Count[p], i = fixed64(b, j)
		case 5<<3 | wtI64:
			v, i = fixed64(b, j)
			dst.Sum[p] = math.Float64frombits(v)
			dst.Has[p] |= signal.HasSum
		case 11<<3 | wtI64:
			v, i = fixed64(b, j)
			dst.Min[p] = math.Float64frombits(v)
			dst.Has[p] |= signal.HasMin
		case 12<<3 | wtI64:
			v, i = fixed64(b, j)
			dst.Max[p] = math.Float64frombits(v)
			dst.Has[p] |= signal.HasMax
		case 6<<3 | wtLen, 6<<3 | wtI64:
			// Chunks of a repeated field stay one range: nothing else of
			// this point appends to U64 or F64.
			if dst.U64, i, err = fixedList(dst.U64, b, j, tag, "bucket_counts"); err != nil {
				return err
			}
		case 7<<3 | wtLen, 7<<3 | wtI64:
			if dst.F64, i, err = fixedList(dst.F64, b, j, tag, "explicit_bounds"); err != nil {
				return err
			}
		case 8<<3 | wtLen:
			if i, err = d.exemplar(dst, b, j, nx); err != nil {
				return err
			}
			nx++
		case 10<<3 | wtVarint:
			v, i = uvarint(b, j)
			dst.Flags[p] = uint32(v)
		case fieldFloatCounts<<3 | wtLen:
			fs, fe = lenField(b, j)
			i = fe
		case fieldResetHint<<3 | wtVarint:
			if v, i = uvarint(b, j); i >= 0 {
				err = setResetHint(dst, p, v)
			}
		default:
			i, err = schemaHistDP.skip(b, j, tag)
		}
		if err != nil {
			return err
		}
		if i < 0 {
			return schemaHistDP.truncErr(tag, i)
		}
	}
	dst.Attr[p].End = uint32(d.c.Attrs.Len())
	dst.Exemplars[p].End = uint32(len(d.c.Msgs))
	dst.BucketCounts[p].End = uint32(len(dst.U64))
	dst.Bounds[p].End = uint32(len(dst.F64))
	return floatCounts(dst, p, b, fs, fe, 1+int(dst.BucketCounts[p].Len()))
}

// floatCounts sets point p's FloatCounts from the packed doubles b[fs:fe]
// of fieldFloatCounts (none when fs < 0), which must hold want values.
func floatCounts(dst *signal.Metrics, p int, b []byte, fs, fe, want int) error {
	if fs < 0 {
		return nil
	}
	if (fe-fs)%8 != 0 || (fe-fs)/8 != want {
		return fmt.Errorf("%w: data_point: sluice float counts (field 90001): %d bytes for %d counts", ErrMalformed, fe-fs, want)
	}
	f := uint32(len(dst.F64))
	for k := fs; k < fe; k += 8 {
		dst.F64 = append(dst.F64, math.Float64frombits(binary.LittleEndian.Uint64(b[k:])))
	}
	dst.FloatCounts[p] = signal.Range{Start: f, End: uint32(len(dst.F64))}
	return nil
}

// setResetHint sets point p's reset hint bits from fieldResetHint.
func setResetHint(dst *signal.Metrics, p int, v uint64) error {
	if v > 3 {
		return fmt.Errorf("%w: data_point: sluice reset hint (field 90002) %d", ErrMalformed, v)
	}
	dst.Has[p] |= uint8(v) << 3
	return nil
}

// buckets decodes ExponentialHistogramDataPoint.Buckets into U64.
func (d *decoder) buckets(dst *signal.Metrics, b []byte, i int) (offset int32, r signal.Range, err error) {
	r.Start = uint32(len(dst.U64))
	for i < len(b) {
		tag, j := uint64(b[i]), i+1
		if tag >= 0x80 {
			tag, j = uvarintSlow(b, i)
		}
		if j < 0 {
			return 0, r, tagErr("buckets", j)
		}
		switch tag {
		case 1<<3 | wtVarint:
			var v uint64
			if v, i = uvarint(b, j); i < 0 {
				return 0, r, schemaBuckets.truncErr(tag, i)
			}
			offset = unzigzag32(v)
		case 2<<3 | wtVarint:
			var v uint64
			if v, i = uvarint(b, j); i < 0 {
				return 0, r, fmt.Errorf("bucket_counts: %w", posErr(i))
			}
			dst.U64 = append(dst.U64, v)
		case 2<<3 | wtLen:
			s, e := lenField(b, j)
			if e < 0 {
				return 0, r, fmt.Errorf("bucket_counts: %w", posErr(e))
			}
			for k := s; k < e; {
				var v uint64
				if v, k = uvarint(b[:e], k); k < 0 {
					return 0, r, fmt.Errorf("bucket_counts: %w", posErr(k))
				}
				dst.U64 = append(dst.U64, v)
			}
			i = e
		default:
			if i, err = schemaBuckets.skip(b, j, tag); err != nil {
				return 0, r, err
			}
		}
	}
	r.End = uint32(len(dst.U64))
	return offset, r, nil
}

func unzigzag32(v uint64) int32 {
	u := uint32(v)
	return int32(u>>1) ^ -int32(u&1)
}

func (d *decoder) expHistogramPoint(dst *signal.Metrics, b []byte, i int, p int) error {
	na, nx := 0, 0
	fs, fe := -1, -1 // fieldFloatCounts
	for i < len(b) {
		tag, j := uint64(b[i]), i+1
		if tag >= 0x80 {
			tag, j = uvarintSlow(b, i)
		}
		if j < 0 {
			return tagErr("data_point", j)
		}
		var err error
		var v uint64
		switch tag {
		case 1<<3 | wtLen:
			if i, err = d.attr(b, j, ctxRecord, na); err != nil {
				return err
			}
			na++
		case 2<<3 | wtI64:
			v, i = fixed64(b, j)
			dst.StartTime[p] = int64(v)
		case 3<<3 | wtI64:
			v, i = fixed64(b, j)
			dst.Time[p] = int64(v)
		case 4<<3 | wtI64:
			dst.Count[p], i = fixed64(b, j)
		case 5<<3 | wtI64:
			v, i = fixed64(b, j)
			dst.Sum[p] = math.Float64frombits(v)
			dst.Has[p] |= signal.HasSum
		case 6<<3 | wtVarint:
			v, i = uvarint(b, j)
			dst.Scale[p] = unzigzag32(v)
		case 7<<3 | wtI64:
			dst.ZeroCount[p], i = fixed64(b, j)
		case 8<<3 | wtLen, 9<<3 | wtLen:
			s, e := lenField(b, j)
			if e < 0 {
				i = e
				break
			}
			off, r, err := d.buckets(dst, b[:e], s)
			if err != nil {
				return fmt.Errorf("%s: %w", schemaExpDP.field(tag>>3), err)
			}
			if tag>>3 == 8 {
				dst.PosOffset[p], dst.PosCounts[p] = off, r
			} else {
				dst.NegOffset[p], dst.NegCounts[p] = off, r
			}
			i = e
		case 10<<3 | wtVarint:
			v, i = uvarint(b, j)
			dst.Flags[p] = uint32(v)
		case 11<<3 | wtLen:
			if i, err = d.exemplar(dst, b, j, nx); err != nil {
				return err
			}
			nx++
		case 12<<3 | wtI64:
			v, i = fixed64(b, j)
			dst.Min[p] = math.Float64frombits(v)
			dst.Has[p] |= signal.HasMin
		case 13<<3 | wtI64:
			v, i = fixed64(b, j)
			dst.Max[p] = math.Float64frombits(v)
			dst.Has[p] |= signal.HasMax
		case 14<<3 | wtI64:
			v, i = fixed64(b, j)
			dst.ZeroThreshold[p] = math.Float64frombits(v)
		case fieldFloatCounts<<3 | wtLen:
			fs, fe = lenField(b, j)
			i = fe
		case fieldResetHint<<3 | wtVarint:
			if v, i = uvarint(b, j); i >= 0 {
				err = setResetHint(dst, p, v)
			}
		default:
			i, err = schemaExpDP.skip(b, j, tag)
		}
		if err != nil {
			return err
		}
		if i < 0 {
			return schemaExpDP.truncErr(tag, i)
		}
	}
	dst.Attr[p].End = uint32(d.c.Attrs.Len())
	dst.Exemplars[p].End = uint32(len(d.c.Msgs))
	return floatCounts(dst, p, b, fs, fe, 2+int(dst.PosCounts[p].Len()+dst.NegCounts[p].Len()))
}

func (d *decoder) summaryPoint(dst *signal.Metrics, b []byte, i int, p int) error {
	na := 0
	// A summary's sum is not optional in OTLP, so it is always present.
	dst.Has[p] = signal.HasSum
	for i < len(b) {
		tag, j := uint64(b[i]), i+1
		if tag >= 0x80 {
			tag, j = uvarintSlow(b, i)
		}
		if j < 0 {
			return tagErr("data_point", j)
		}
		var err error
		var v uint64
		switch tag {
		case 7<<3 | wtLen:
			if i, err = d.attr(b, j, ctxRecord, na); err != nil {
				return err
			}
			na++
		case 2<<3 | wtI64:
			v, i = fixed64(b, j)
			dst.StartTime[p] = int64(v)
		case 3<<3 | wtI64:
			v, i = fixed64(b, j)
			dst.Time[p] = int64(v)
		case 4<<3 | wtI64:
			dst.Count[p], i = fixed64(b, j)
		case 5<<3 | wtI64:
			v, i = fixed64(b, j)
			dst.Sum[p] = math.Float64frombits(v)
		case 6<<3 | wtLen:
			s, e := lenField(b, j)
			if e < 0 {
				i = e
				break
			}
			var q, val uint64
			for k := s; k < e; {
				t, kj := uvarint(b[:e], k)
				if kj < 0 {
					return fmt.Errorf("quantile_values: %w", posErr(kj))
				}
				switch t {
				case 1<<3 | wtI64:
					q, k = fixed64(b[:e], kj)
				case 2<<3 | wtI64:
					val, k = fixed64(b[:e], kj)
				default:
					k, err = schemaQuant.skip(b[:e], kj, t)
				}
				if err != nil {
					return err
				}
				if k < 0 {
					return schemaQuant.truncErr(t, k)
				}
			}
			dst.F64 = append(dst.F64, math.Float64frombits(q), math.Float64frombits(val))
			i = e
		case 8<<3 | wtVarint:
			v, i = uvarint(b, j)
			dst.Flags[p] = uint32(v)
		default:
			if i, err = schemaSumDP.skip(b, j, tag); err != nil {
				return err
			}
		}
		if i < 0 {
			return schemaSumDP.truncErr(tag, i)
		}
	}
	dst.Attr[p].End = uint32(d.c.Attrs.Len())
	dst.Quantiles[p].End = uint32(len(dst.F64))
	return nil
}
