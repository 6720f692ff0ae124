package prwexporter

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/otlptranslator"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/promname"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
)

// labelName maps an attribute key to its label as the query API does
// (promname owns the rule).
func labelName(key string) string { return promname.LabelName(key) }

// noRecordedValue is OTLP's DataPointFlags.FLAG_NO_RECORDED_VALUE.
const noRecordedValue = 1

// Which requests carry a converted series (seriesMeta.only). "Native"
// requests are 2.0 and 1.0 with send_native_histograms.
const (
	forBoth    = iota
	forV2      // a native histogram: over 1.0 only with send_native_histograms, else dropped and counted
	nativeAlt  // a native histogram with a classic form beside it (classicAlt): native requests only
	classicAlt // the classic series of such a histogram: 1.0 without native histograms only
)

// seriesMeta is what remote write says about a series besides its labels,
// samples and exemplars: the metadata of its metric family (type, unit,
// help, as Prometheus's 2.0 sender puts them on every series; over 1.0
// once per family and request), the start (created) time of its
// cumulative sample (2.0 only), and which protocol version carries it.
type seriesMeta struct {
	typ        writev2.Metadata_MetricType
	unit, help string
	family     string // metric family name (1.0 metadata)
	start      int64  // ms; 0: none
	only       uint8
}

// converter turns decoded OTLP metric batches into remote-write series.
type converter struct {
	series  []prompb.TimeSeries
	meta    []seriesMeta // per series
	fromRW  bool         // the batch being added was remote write (metadata from prometheus.type/unit)
	metas   []seriesMeta // desc -> metadata (typ 255: not yet)
	dropped uint64       // points remote write 1.0 cannot carry
	// exemplars that did not parse (the receiver checked them already)
	badExemplars uint64
	// exemplars whose labels were cut to trace_id/span_id (too long)
	trimmedExemplars uint64
	lbls             []prompb.Label
	kv               []promname.AttrLabel
	resLbls          map[uint32][]prompb.Label // resource -> job/instance labels
	targetTs         map[uint32]int64          // resource -> newest point time (ms)
	// targetSent is the time of each target_info series (by the hash of
	// its labels) emitted since reset: records of one resource send it
	// once per time, in time order.
	targetSent map[uint64]int64
	lastAt     map[uint64]int64 // inTimeOrder: a series' (labels hash) latest time so far
	bases      []string         // desc -> Prometheus base name ("\x00": not yet)
	cur        seriesMeta       // metadata of the series being emitted
	lblArena   []prompb.Label   // series labels are sub-slices (emitWith)
	smpArena   []prompb.Sample
	exArena    []prompb.Exemplar // series exemplars are sub-slices
	exs        []prompb.Exemplar // the point's exemplars (scratch)
	bucketAt   []int             // explicit bucket -> its _bucket series
}

// attrLabels appends the labels of the attributes in r, colliding
// sanitised names joined with ";" in key order. A string value aliases
// the batch's arena: the converter's series are valid until the batch is
// reset (Exporter.Send resets it only after its series were sent).
func (cv *converter) attrLabels(c *signal.Common, r signal.Range, dst []prompb.Label, resource bool) []prompb.Label {
	return cv.attrLabelsReclaim(c, r, dst, resource, nil)
}

// reclaim says which labels sluice sets on this series (job and instance
// from the resource; le on a histogram, quantile on a summary): an
// attribute keyed exactly like one it does not set keeps that bare label
// (promname.Reclaim, as the query API does), so a remote-write series
// relays with exactly its labels. rw: the point was sent by remote write,
// its labels are the keys verbatim (as the query API shows them).
type reclaim struct{ job, instance, histogram, summary, rw bool }

func (rc *reclaim) label(key, label string) string {
	if rc == nil {
		return label
	}
	if rc.rw {
		return key
	}
	return promname.Reclaim(key, label, rc.job, rc.instance, rc.histogram, rc.summary)
}

func (cv *converter) attrLabelsReclaim(c *signal.Common, r signal.Range, dst []prompb.Label, resource bool, rc *reclaim) []prompb.Label {
	cv.kv = cv.kv[:0]
	for i := int(r.Start); i < int(r.End); i++ {
		key := c.Keys.Name(c.Attrs.Key[i])
		if resource && (key == "service.name" || key == "service.namespace" || key == "service.instance.id") {
			continue // job and instance
		}
		var name string
		if rc != nil && rc.rw {
			name = key
		} else {
			name = rc.label(key, labelName(key))
		}
		if name == "" {
			continue
		}
		v := promname.AttrValue(c, i)
		if v == "" {
			continue
		}
		cv.kv = append(cv.kv, promname.AttrLabel{Label: name, Key: key, Value: v})
	}
	promname.SortAttrLabels(cv.kv)
	for i := 0; i < len(cv.kv); {
		j := i + 1
		v := cv.kv[i].Value
		for ; j < len(cv.kv) && cv.kv[j].Label == cv.kv[i].Label; j++ {
			v += ";" + cv.kv[j].Value
		}
		dst = append(dst, prompb.Label{Name: cv.kv[i].Label, Value: v})
		i = j
	}
	return dst
}

func (cv *converter) resource(m *signal.Metrics, res uint32) []prompb.Label {
	if l, ok := cv.resLbls[res]; ok {
		return l
	}
	r := m.Resources[res].Attrs
	get := func(k string) string {
		if i := m.FindAttr(r, k); i >= 0 {
			return promname.AttrValue(&m.Common, i)
		}
		return ""
	}
	var l []prompb.Label
	if svc := get("service.name"); svc != "" {
		job := svc
		if ns := get("service.namespace"); ns != "" {
			job = ns + "/" + svc
		}
		l = append(l, prompb.Label{Name: "job", Value: job})
	}
	if inst := get("service.instance.id"); inst != "" {
		l = append(l, prompb.Label{Name: "instance", Value: inst})
	}
	cv.resLbls[res] = l
	return l
}

// add converts the points of m from index from on (the points a decode
// appended to a batch that already held earlier records' points).
func (cv *converter) add(m *signal.Metrics, from int) {
	if cv.resLbls == nil {
		cv.resLbls, cv.targetTs = map[uint32][]prompb.Label{}, map[uint32]int64{}
	}
	clear(cv.resLbls)
	clear(cv.targetTs)
	// Names per metric, not per point: the translator splits and joins
	// words on every call.
	if from == 0 {
		cv.bases = cv.bases[:0]
	}
	if from == 0 {
		cv.metas = cv.metas[:0]
	}
	for len(cv.bases) < len(m.Descs) {
		cv.bases = append(cv.bases, "\x00")
	}
	for len(cv.metas) < len(m.Descs) {
		cv.metas = append(cv.metas, seriesMeta{typ: metaUnknown})
	}
	for i := from; i < m.Len(); i++ {
		d := &m.Descs[m.Desc[i]]
		var t otlptranslator.MetricType
		switch d.Type {
		case signal.MetricGauge:
			t = otlptranslator.MetricTypeGauge
		case signal.MetricSum:
			t = otlptranslator.MetricTypeNonMonotonicCounter
			if d.Monotonic {
				t = otlptranslator.MetricTypeMonotonicCounter
			}
		case signal.MetricHistogram:
			t = otlptranslator.MetricTypeHistogram
		case signal.MetricExponentialHistogram:
			t = otlptranslator.MetricTypeExponentialHistogram
		case signal.MetricSummary:
			t = otlptranslator.MetricTypeSummary
		default:
			cv.dropped++
			continue
		}
		if d.Temporality == signal.TemporalityDelta && d.Type != signal.MetricGauge && d.Type != signal.MetricSummary {
			cv.dropped++
			continue
		}
		if m.Time[i] <= 0 {
			// No time (OTLP requires one): a receiver refuses a sample
			// at or before 1970 as too old, with the rest of its request
			// (Prometheus answers 400 "out of bounds"), other clients'
			// samples beside it lost too.
			cv.dropped++
			continue
		}
		rw := cv.rwScope(m, i)
		base := cv.bases[m.Desc[i]]
		if rw {
			// A remote-write series keeps exactly its name.
			base = m.String(d.Name)
		} else if base == "\x00" {
			base = promname.Base(m.String(d.Name), m.String(d.Unit), t)
			cv.bases[m.Desc[i]] = base
		}
		if base == "" {
			cv.dropped++
			continue
		}
		md := &cv.metas[m.Desc[i]]
		if md.typ == metaUnknown {
			*md = cv.descMeta(m, d)
		}
		cv.cur = *md
		cv.cur.family = base
		ts := m.Time[i] / 1e6
		// The start time of a cumulative point (2.0's start_timestamp, as
		// otlptranslator sets created timestamps): sums, histograms and
		// summaries, and any remote-write sample its sender gave one
		// (package prw keeps a float sample as a gauge); none when unset
		// or after the point's own time.
		if st := m.StartTime[i]; st > 0 && st <= m.Time[i] && (d.Type != signal.MetricGauge || cv.fromRW) {
			cv.cur.start = st / 1e6
		}
		cv.exs = cv.exs[:0]
		if i < len(m.Exemplars) && m.Exemplars[i].End > m.Exemplars[i].Start && !stalePoint(m, i) {
			cv.exs = cv.exemplars(m, i, cv.exs)
		}
		if old, ok := cv.targetTs[m.Resource[i]]; !ok || ts > old {
			cv.targetTs[m.Resource[i]] = ts
		}
		stale := m.Flags[i]&noRecordedValue != 0
		val := func(v float64) float64 {
			if stale {
				return math.Float64frombits(value.StaleNaN)
			}
			return v
		}
		res := cv.resource(m, m.Resource[i])
		rc := reclaim{histogram: d.Type == signal.MetricHistogram, summary: d.Type == signal.MetricSummary, rw: rw}
		for _, l := range res {
			switch l.Name {
			case "job":
				rc.job = true
			case "instance":
				rc.instance = true
			}
		}
		common := cv.attrLabelsReclaim(&m.Common, m.Attr[i], append(cv.lbls[:0], res...), false, &rc)
		cv.lbls = common
		switch d.Type {
		case signal.MetricGauge, signal.MetricSum:
			if m.NumberType[i] == signal.ValueEmpty && !stale && cv.rwScope(m, i) {
				// A remote-write series sent with exemplars only (package
				// prw keeps them on a point without a value): it goes on
				// as it came, its exemplars without a sample.
				if len(cv.exs) > 0 {
					cv.emit(base, common, ts, 0)
					cv.series[len(cv.series)-1].Samples = nil
					cv.attach(len(cv.series)-1, cv.exs)
				}
				break
			}
			v := math.Float64frombits(m.Number[i])
			if m.NumberType[i] == signal.ValueInt {
				v = float64(int64(m.Number[i]))
			}
			cv.emit(base, common, ts, val(v))
			cv.attach(len(cv.series)-1, cv.exs)
		case signal.MetricHistogram:
			bounds := m.F64[m.Bounds[i].Start:m.Bounds[i].End]
			counts := m.U64[m.BucketCounts[i].Start:m.BucketCounts[i].End]
			// A remote-write custom-bucket histogram (schema -53; package
			// prw keeps it as an explicit histogram) goes as it came to
			// requests that carry native histograms, and as its classic
			// _bucket/_sum/_count to 1.0 without them.
			if cv.fromRW {
				if h, ok := cv.customHistogram(m, i, bounds, counts, ts, stale); ok {
					cv.emitHistogram(base, common, h, nativeAlt)
					cv.attach(len(cv.series)-1, cv.exs)
					cv.cur.only = classicAlt
				}
			}
			var cum uint64
			cv.bucketAt = cv.bucketAt[:0]
			for b, n := range counts {
				cum += n
				le := "+Inf"
				if b < len(bounds) {
					le = strconv.FormatFloat(bounds[b], 'g', -1, 64)
				}
				cv.emitWith(base+"_bucket", common, prompb.Label{Name: "le", Value: le}, ts, val(float64(cum)))
				cv.bucketAt = append(cv.bucketAt, len(cv.series)-1)
			}
			if len(counts) == 0 || len(counts) <= len(bounds) {
				cv.emitWith(base+"_bucket", common, prompb.Label{Name: "le", Value: "+Inf"}, ts, val(float64(m.Count[i])))
				cv.bucketAt = append(cv.bucketAt, len(cv.series)-1)
			}
			// Each exemplar on the _bucket series of its value's bucket
			// (otlptranslator's rule; the query API's too), +Inf when the
			// point has fewer buckets than bounds.
			for _, e := range cv.exs {
				b := min(bucketOf(bounds, e.Value), len(cv.bucketAt)-1)
				cv.attach(cv.bucketAt[b], []prompb.Exemplar{e})
			}
			if m.Has[i]&signal.HasSum != 0 {
				cv.emit(base+"_sum", common, ts, val(m.Sum[i]))
			}
			cv.emit(base+"_count", common, ts, val(float64(m.Count[i])))
		case signal.MetricExponentialHistogram:
			// A native histogram (over 1.0 only with
			// send_native_histograms: dropped and counted otherwise, as
			// the specification says for a format without them); one with
			// no native form (scale below -4, bucket indexes past int32)
			// goes as _sum/_count to both versions.
			if h, ok := cv.nativeHistogram(m, i, ts, stale); ok {
				cv.emitHistogram(base, common, h, forV2)
				cv.attach(len(cv.series)-1, cv.exs)
				break
			}
			if m.Has[i]&signal.HasSum != 0 {
				cv.emit(base+"_sum", common, ts, val(m.Sum[i]))
			}
			cv.emit(base+"_count", common, ts, val(float64(m.Count[i])))
			cv.attach(len(cv.series)-1, cv.exs) // its exemplars on _count
		case signal.MetricSummary:
			q := m.F64[m.Quantiles[i].Start:m.Quantiles[i].End]
			for k := 0; k+1 < len(q); k += 2 {
				cv.emitWith(base, common, prompb.Label{Name: "quantile", Value: strconv.FormatFloat(q[k], 'g', -1, 64)}, ts, val(q[k+1]))
			}
			cv.emit(base+"_sum", common, ts, val(m.Sum[i]))
			cv.emit(base+"_count", common, ts, val(float64(m.Count[i])))
		}
	}
	// target_info: one per resource with attributes besides job/instance.
	for res, ts := range cv.targetTs {
		r := m.Resources[res].Attrs
		l := slices.Clone(cv.resource(m, res))
		n := len(l)
		l = cv.attrLabels(&m.Common, r, l, true)
		if len(l) <= n {
			continue
		}
		// Each record of a resource (a client's every export) would send
		// target_info again at the same time: a duplicate sample, or one
		// out of order when a later record is older.
		h := seriesHash(l)
		if prev, ok := cv.targetSent[h]; ok && ts <= prev {
			continue
		}
		if cv.targetSent == nil {
			cv.targetSent = map[uint64]int64{}
		}
		cv.targetSent[h] = ts
		cv.cur = seriesMeta{typ: writev2.Metadata_METRIC_TYPE_GAUGE, help: "Target metadata", family: "target_info"}
		cv.emit("target_info", l, ts, 1)
	}
}

// reset forgets the series (after they were sent), keeping the arenas.
func (cv *converter) reset() {
	cv.series = cv.series[:0]
	cv.meta = cv.meta[:0]
	cv.lblArena = cv.lblArena[:0]
	cv.smpArena = cv.smpArena[:0]
	cv.exArena = cv.exArena[:0]
	clear(cv.targetSent)
}

// seriesTime is the time of a converted series' one sample or histogram
// (an exemplar's for a series of exemplars alone).
func seriesTime(s *prompb.TimeSeries) int64 {
	switch {
	case len(s.Samples) > 0:
		return s.Samples[0].Timestamp
	case len(s.Histograms) > 0:
		return s.Histograms[0].Timestamp
	case len(s.Exemplars) > 0:
		return s.Exemplars[0].Timestamp
	}
	return 0
}

// inTimeOrder orders the series by time when they are not (stably: series
// of one time keep their order). Each converted series holds one point,
// so a series listed twice, as a batch of several records or an OTLP
// request with a series' points newest first lists it, must come oldest
// first: a receiver refuses or drops a sample older than one it just
// wrote (Prometheus drops the older in one request, answers a later
// request's with 400). Most batches are in order already: one pass.
func (cv *converter) inTimeOrder() {
	sorted := true
	for i := 1; i < len(cv.series) && sorted; i++ {
		sorted = seriesTime(&cv.series[i-1]) <= seriesTime(&cv.series[i])
	}
	if sorted {
		return
	}
	// Not in time order overall (a batch lists its series one after the
	// other, each in time order): sort only when some series goes back.
	if cv.lastAt == nil {
		cv.lastAt = map[uint64]int64{}
	}
	clear(cv.lastAt)
	back := false
	for i := range cv.series {
		h, t := seriesHash(cv.series[i].Labels), seriesTime(&cv.series[i])
		if last, ok := cv.lastAt[h]; ok && t < last {
			back = true
			break
		}
		cv.lastAt[h] = t
	}
	if back {
		sort.Stable(byTime{cv.series, cv.meta})
	}
}

// byTime sorts series and their metadata together by seriesTime.
type byTime struct {
	s []prompb.TimeSeries
	m []seriesMeta
}

func (b byTime) Len() int           { return len(b.s) }
func (b byTime) Less(i, j int) bool { return seriesTime(&b.s[i]) < seriesTime(&b.s[j]) }
func (b byTime) Swap(i, j int) {
	b.s[i], b.s[j] = b.s[j], b.s[i]
	b.m[i], b.m[j] = b.m[j], b.m[i]
}

// stalePoint says whether point i is flagged "no recorded value".
// rwScope reports whether point i was decoded from remote write: the
// batch was (fromRW) or the point's scope is package prw's (a partial
// write or a rule's output is queued as OTLP).
func (cv *converter) rwScope(m *signal.Metrics, i int) bool {
	return cv.fromRW || m.String(m.Scopes[m.Scope[i]].Name) == prw.ScopeName
}

func stalePoint(m *signal.Metrics, i int) bool { return m.Flags[i]&noRecordedValue != 0 }

// attach appends exemplars to series k's, carving them from the exemplar
// arena (a series' exemplars are contiguous: each series gets them once,
// or one by one right after the previous series' were attached).
func (cv *converter) attach(k int, exs []prompb.Exemplar) {
	if len(exs) == 0 {
		return
	}
	s := &cv.series[k]
	if cap(cv.exArena)-len(cv.exArena) < len(s.Exemplars)+len(exs) {
		cv.exArena = make([]prompb.Exemplar, 0, max(256, 2*cap(cv.exArena), len(s.Exemplars)+len(exs)))
	}
	start := len(cv.exArena)
	cv.exArena = append(cv.exArena, s.Exemplars...)
	cv.exArena = append(cv.exArena, exs...)
	s.Exemplars = cv.exArena[start:len(cv.exArena):len(cv.exArena)]
}

// emit appends one series with one sample; labels are copied and sorted.
func (cv *converter) emit(name string, lbls []prompb.Label, ts int64, v float64) {
	cv.emitWith(name, lbls, prompb.Label{}, ts, v)
}

// emitWith is emit with one more label (le, quantile) when extra.Name is
// set. Labels and samples are carved from arenas that grow by doubling: a
// series keeps its sub-slice of an old array when the arena moves on.
func (cv *converter) emitWith(name string, lbls []prompb.Label, extra prompb.Label, ts int64, v float64) {
	l := cv.labels(name, lbls, extra)
	if cap(cv.smpArena) == len(cv.smpArena) {
		cv.smpArena = make([]prompb.Sample, 0, max(1024, 2*cap(cv.smpArena)))
	}
	cv.smpArena = append(cv.smpArena, prompb.Sample{Value: v, Timestamp: ts})
	k := len(cv.smpArena)
	cv.series = append(cv.series, prompb.TimeSeries{Labels: l, Samples: cv.smpArena[k-1 : k : k]})
	cv.meta = append(cv.meta, cv.cur)
}

// emitHistogram appends a series with one native histogram sample, for
// the requests only says (forV2 or nativeAlt).
func (cv *converter) emitHistogram(name string, lbls []prompb.Label, h prompb.Histogram, only uint8) {
	l := cv.labels(name, lbls, prompb.Label{})
	cv.series = append(cv.series, prompb.TimeSeries{Labels: l, Histograms: []prompb.Histogram{h}})
	m := cv.cur
	m.only = only
	cv.meta = append(cv.meta, m)
}

// labels carves a series' sorted labels (__name__, lbls, extra when set)
// from the label arena.
func (cv *converter) labels(name string, lbls []prompb.Label, extra prompb.Label) []prompb.Label {
	n := len(lbls) + 1
	if extra.Name != "" {
		n++
	}
	if cap(cv.lblArena)-len(cv.lblArena) < n {
		cv.lblArena = make([]prompb.Label, 0, max(1024, 2*cap(cv.lblArena), n))
	}
	start := len(cv.lblArena)
	cv.lblArena = append(cv.lblArena, prompb.Label{Name: "__name__", Value: name})
	cv.lblArena = append(cv.lblArena, lbls...)
	if extra.Name != "" {
		cv.lblArena = append(cv.lblArena, extra)
	}
	l := cv.lblArena[start:len(cv.lblArena):len(cv.lblArena)]
	slices.SortFunc(l, func(a, b prompb.Label) int { return strings.Compare(a.Name, b.Name) })
	return l
}
