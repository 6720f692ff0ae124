package prwexporter

import (
	"slices"

	"github.com/klauspost/compress/s2"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

// encodeOpts say what a converted request carries besides samples.
type encodeOpts struct {
	native   bool // native histograms over 1.0 (send_native_histograms)
	metadata bool // metric metadata (send_metadata)
}

// encodeV1 writes prometheus.WriteRequest of series with the defaults
// (no native histograms, metadata per family).
func encodeV1(series []prompb.TimeSeries, meta []seriesMeta) ([]byte, error) {
	b, _, _, err := encodeV1With(series, meta, encodeOpts{metadata: true})
	return b, err
}

// carries says whether a request of kind native (2.0, or 1.0 with
// send_native_histograms) carries a series of the given only.
func carries(only uint8, native bool) bool {
	switch only {
	case forV2, nativeAlt:
		return native
	case classicAlt:
		return !native
	}
	return true
}

// encodeV1With writes prometheus.WriteRequest of series (meta nil: all of
// them, no metadata): native histograms only with o.native, else the
// classic form of those that have one (dropped counts the others: the
// specification's rule for a format without native histograms),
// exemplars as they are, and with o.metadata one MetricMetadata per
// metric family in the request, as Prometheus's 1.0 sender sends them (it
// sends them in requests of their own; a receiver takes them in any
// request). sent is the number of series in the request; body is empty
// (not nil) when the request would hold nothing.
func encodeV1With(series []prompb.TimeSeries, meta []seriesMeta, o encodeOpts) (body []byte, sent, dropped int, err error) {
	for i := range meta {
		if carries(meta[i].only, o.native) {
			continue
		}
		// Copy only when some series stays out (most batches have no
		// native histogram).
		v1 := make([]prompb.TimeSeries, i, len(series))
		copy(v1, series[:i])
		for j := i; j < len(series); j++ {
			if carries(meta[j].only, o.native) {
				v1 = append(v1, series[j])
			} else if meta[j].only == forV2 {
				dropped++
			}
		}
		series = v1
		break
	}
	req := prompb.WriteRequest{Timeseries: series}
	if o.metadata && len(meta) > 0 {
		seen := make(map[string]struct{})
		for i := range meta {
			md := &meta[i]
			if md.family == "" || (md.typ == 0 && md.unit == "" && md.help == "") || !carries(md.only, o.native) {
				continue
			}
			if _, ok := seen[md.family]; ok {
				continue
			}
			seen[md.family] = struct{}{}
			req.Metadata = append(req.Metadata, prompb.MetricMetadata{
				Type: prompb.MetricMetadata_MetricType(md.typ), MetricFamilyName: md.family, Help: md.help, Unit: md.unit,
			})
		}
	}
	if len(req.Timeseries) == 0 && len(req.Metadata) == 0 {
		return []byte{}, 0, dropped, nil // nothing to send: no request
	}
	b, err := req.Marshal()
	if err != nil {
		return nil, 0, dropped, err
	}
	return s2.EncodeSnappy(nil, b), len(series), dropped, nil
}

// encodeV2 writes io.prometheus.write.v2.Request of series with the
// defaults (metadata on).
func encodeV2(series []prompb.TimeSeries, meta []seriesMeta) ([]byte, error) {
	b, _, _, err := encodeV2With(series, meta, encodeOpts{metadata: true})
	return b, err
}

// encodeV2With writes io.prometheus.write.v2.Request of series: labels
// as references into one symbols table per request, native histograms,
// exemplars (labels as symbol references), each sample's and histogram's
// start timestamp, and with o.metadata each series' metadata (type, and
// unit and help as symbol references). The classic form of a histogram
// sent as a native one is left out. sent is the number of series in the
// request, w its samples, histograms and exemplars. A series of exemplars
// alone goes on a series of its labels with a sample or histogram
// (exemplarHosts), or is left out (w.lostExemplars).
func encodeV2With(series []prompb.TimeSeries, meta []seriesMeta, o encodeOpts) (body []byte, sent int, w written, err error) {
	st := writev2.NewSymbolTable()
	req := writev2.Request{Timeseries: make([]writev2.TimeSeries, 0, len(series))}
	host, guests, lost := exemplarHosts(series, meta)
	w.lostExemplars = lost
	for i, s := range series {
		var md seriesMeta
		if meta != nil {
			md = meta[i]
		}
		if !carries(md.only, true) || (host != nil && host[i] != noHost) {
			continue
		}
		for _, g := range guests[i] {
			s.Exemplars = append(s.Exemplars[:len(s.Exemplars):len(s.Exemplars)], series[g].Exemplars...)
		}
		refs := make([]uint32, 0, 2*len(s.Labels))
		for _, l := range s.Labels {
			refs = append(refs, st.Symbolize(l.Name), st.Symbolize(l.Value))
		}
		samples := make([]writev2.Sample, len(s.Samples))
		for j, x := range s.Samples {
			samples[j] = writev2.Sample{Value: x.Value, Timestamp: x.Timestamp, StartTimestamp: md.start}
		}
		var hs []writev2.Histogram
		for _, h := range s.Histograms {
			var wh writev2.Histogram
			if h.IsFloatHistogram() {
				wh = writev2.FromFloatHistogram(0, h.Timestamp, h.ToFloatHistogram())
			} else {
				wh = writev2.FromIntHistogram(0, h.Timestamp, h.ToIntHistogram())
			}
			wh.StartTimestamp = md.start
			hs = append(hs, wh)
		}
		var exs []writev2.Exemplar
		for _, e := range s.Exemplars {
			lr := make([]uint32, 0, 2*len(e.Labels))
			for _, l := range e.Labels {
				lr = append(lr, st.Symbolize(l.Name), st.Symbolize(l.Value))
			}
			exs = append(exs, writev2.Exemplar{LabelsRefs: lr, Value: e.Value, Timestamp: e.Timestamp})
		}
		ts := writev2.TimeSeries{LabelsRefs: refs, Samples: samples, Histograms: hs, Exemplars: exs}
		if o.metadata {
			ts.Metadata = writev2.Metadata{Type: md.typ, HelpRef: st.Symbolize(md.help), UnitRef: st.Symbolize(md.unit)}
		}
		req.Timeseries = append(req.Timeseries, ts)
		w.samples += len(samples)
		w.histograms += len(hs)
		w.exemplars += len(exs)
	}
	req.Symbols = st.Symbols()
	b, err := req.Marshal()
	if err != nil {
		return nil, 0, written{}, err
	}
	return s2.EncodeSnappy(nil, b), len(req.Timeseries), w, nil
}

// noHost marks a series that holds its exemplars itself (exemplarHosts).
const noHost = -1

// exemplarHosts finds, for each series of exemplars alone (as Prometheus's
// senders send an exemplar, and package prw keeps it), a series of the
// same labels with a sample or histogram in the request to carry them:
// a 2.0 series must hold one or the other (Prometheus's 2.0 receiver
// refuses the series, 400). host[i] is that series, noHost for the others,
// and a negative other than noHost when there is none: those exemplars
// are left out and counted in lost. guests lists each host's. host is nil
// when no series holds exemplars alone (the usual request: one pass).
func exemplarHosts(series []prompb.TimeSeries, meta []seriesMeta) (host []int, guests map[int][]int, lost int) {
	alone := func(i int) bool {
		s := &series[i]
		return len(s.Samples) == 0 && len(s.Histograms) == 0 && len(s.Exemplars) > 0 && (meta == nil || carries(meta[i].only, true))
	}
	i0 := 0
	for i0 < len(series) && !alone(i0) {
		i0++
	}
	if i0 == len(series) {
		return nil, nil, 0
	}
	byHash := map[uint64][]int{} // series with a sample or histogram, by their labels' hash
	for i := range series {
		s := &series[i]
		if (len(s.Samples) > 0 || len(s.Histograms) > 0) && (meta == nil || carries(meta[i].only, true)) {
			h := seriesHash(s.Labels)
			byHash[h] = append(byHash[h], i)
		}
	}
	host = make([]int, len(series))
	guests = map[int][]int{}
	for i := range series {
		host[i] = noHost
		if i < i0 || !alone(i) {
			continue
		}
		host[i] = noHost - 1
		for _, j := range byHash[seriesHash(series[i].Labels)] {
			if slices.EqualFunc(series[j].Labels, series[i].Labels, func(a, b prompb.Label) bool { return a.Name == b.Name && a.Value == b.Value }) {
				host[i] = j
				guests[j] = append(guests[j], i)
				break
			}
		}
		if host[i] < 0 {
			lost += len(series[i].Exemplars)
		}
	}
	return host, guests, lost
}
