package prw

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/signal"
)

// checkScanAgrees is the differential check of ScanV1 against DecodeV1: a
// request the scan takes decodes with no error, no unsorted series and no
// histogram or exemplar, into exactly the samples the scan found, each
// with the scan's name, series id, time and labels, and the scan's
// attribute counts. It returns whether the scan took the request.
func checkScanAgrees(t *testing.T, body []byte) bool {
	t.Helper()
	var s Scanner
	bodyCopy := slices.Clone(body)
	ok := s.ScanV1(body)
	if !slices.Equal(body, bodyCopy) {
		t.Fatal("scan modified its input")
	}
	if !ok {
		return false
	}
	var m signal.Metrics
	var d Decoder
	st, err := d.DecodeV1(&m, body)
	if err != nil {
		t.Fatalf("the scan took a request the decoder refuses: %v", err)
	}
	if st.Unsorted != 0 || st.Histograms != 0 || st.Exemplars != 0 || st.Dropped != 0 {
		t.Fatalf("the scan took a request that is not plain: %+v", st)
	}
	if st.Samples != s.Samples() || m.Len() != s.Samples() {
		t.Fatalf("scan found %d samples, decoder %d (%d points)", s.Samples(), st.Samples, m.Len())
	}
	if m.Attrs.Len() != s.Attrs {
		t.Fatalf("scan counts %d attributes, the batch has %d", s.Attrs, m.Attrs.Len())
	}
	maxAttrs := 0
	var lbls []Label
	for i := range m.Len() {
		if got, want := string(s.Names[s.Name[i]]), m.String(m.Descs[m.Desc[i]].Name); got != want {
			t.Fatalf("sample %d: scan name %q, decoded %q", i, got, want)
		}
		if s.ID[i] != m.SeriesID[i] {
			t.Fatalf("sample %d: scan series id %x, decoded %x", i, s.ID[i], m.SeriesID[i])
		}
		if s.Time[i] != m.Time[i] || m.StartTime[i] != 0 {
			t.Fatalf("sample %d: scan time %d, decoded %d (start %d)", i, s.Time[i], m.Time[i], m.StartTime[i])
		}
		r := m.Attr[i]
		maxAttrs = max(maxAttrs, r.Len())
		lbls = s.Labels(i, lbls[:0])
		if len(lbls) != r.Len() {
			t.Fatalf("sample %d: scan labels %d, decoded %d", i, len(lbls), r.Len())
		}
		for k, l := range lbls {
			a := int(r.Start) + k
			if string(l.Name) != m.Keys.Name(m.Attrs.Key[a]) || string(l.Value) != m.AttrString(a) {
				t.Fatalf("sample %d label %d: scan %s=%q, decoded %s=%q", i, k, l.Name, l.Value, m.Keys.Name(m.Attrs.Key[a]), m.AttrString(a))
			}
		}
	}
	if maxAttrs != s.MaxAttrs {
		t.Fatalf("scan max attributes %d, batch %d", s.MaxAttrs, maxAttrs)
	}
	return true
}

// FuzzScanV1 fuzzes the scan against the decoder (checkScanAgrees).
func FuzzScanV1(f *testing.F) {
	b1, _ := benchBodies(20, 5)
	f.Add(b1)
	good, _ := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: []prompb.Label{{Name: "__name__", Value: "a"}, {Name: "x", Value: "1"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 5}, {Value: 2, Timestamp: 6}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "b"}, {Name: "x", Value: "1"}, {Name: "y", Value: "ü"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 5}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "a"}, {Name: "x", Value: "2"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 5}}},
	}}).Marshal()
	f.Add(good)
	load := oracleLoad()
	b, _ := v1Request(load).Marshal()
	f.Add(b)
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, body []byte) { checkScanAgrees(t, body) })
}

// TestScanPlainRequests: the scan takes the plain requests senders make
// and agrees with the decoder on them, including the series ids, which
// are the lake's (signal's algorithm, computed here from the raw labels).
func TestScanPlainRequests(t *testing.T) {
	for _, shape := range [][2]int{{1, 0}, {100, 5}, {1500, 8}, {300, 10}} {
		b1, _ := benchBodies(shape[0], shape[1])
		if !checkScanAgrees(t, b1) {
			t.Fatalf("%d series x %d labels: the scan refused a plain request", shape[0], shape[1])
		}
	}
	// Several samples per series, names changing between series, UTF-8,
	// long values (two-byte lengths), label sets of different sizes.
	long := string(make([]byte, 300))
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: []prompb.Label{{Name: "__name__", Value: "a"}, {Name: "x", Value: "1"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 5}, {Value: math.NaN(), Timestamp: 6}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "b"}, {Name: "x", Value: "1"}, {Name: "y", Value: "ü"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 0}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "a"}, {Name: "x", Value: long}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 5}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "a"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 5}}},
		{Labels: []prompb.Label{{Name: "A", Value: "1"}, {Name: "__name__", Value: "a"}, {Name: "x", Value: "2"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 5}}},
	}}
	body, _ := req.Marshal()
	if !checkScanAgrees(t, body) {
		t.Fatal("the scan refused a plain request")
	}
}

// TestScanLeavesTheRestToTheDecoder: every request that is not plain (each
// invalid case the receiver answers 400, unsorted labels, histograms,
// exemplars, metadata) is refused by the scan, so the decoder answers it.
func TestScanLeavesTheRestToTheDecoder(t *testing.T) {
	good := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "ok"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 1}}}
	hist := prompb.FromIntHistogram(1, generateTestHistogram(1))
	badHist := hist
	badHist.Count = &prompb.Histogram_CountInt{CountInt: 999}
	cases := map[string]prompb.WriteRequest{
		"no name":          {Timeseries: []prompb.TimeSeries{good, {Labels: []prompb.Label{{Name: "a", Value: "b"}}, Samples: good.Samples}}},
		"empty name value": {Timeseries: []prompb.TimeSeries{good, {Labels: []prompb.Label{{Name: "__name__", Value: ""}}, Samples: good.Samples}}},
		"empty label name": {Timeseries: []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "", Value: "v"}, {Name: "__name__", Value: "x"}}, Samples: good.Samples}}},
		"duplicate":        {Timeseries: []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "__name__", Value: "x"}, {Name: "a", Value: "1"}, {Name: "a", Value: "2"}}, Samples: good.Samples}}},
		"unsorted":         {Timeseries: []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "b", Value: "1"}, {Name: "__name__", Value: "x"}}, Samples: good.Samples}}},
		"bad utf8":         {Timeseries: []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "__name__", Value: "x"}, {Name: "a", Value: "\xff"}}, Samples: good.Samples}}},
		"hist count":       {Timeseries: []prompb.TimeSeries{good, {Labels: []prompb.Label{{Name: "__name__", Value: "h"}}, Histograms: []prompb.Histogram{badHist}}}},
		"histogram":        {Timeseries: []prompb.TimeSeries{good, {Labels: []prompb.Label{{Name: "__name__", Value: "h"}}, Histograms: []prompb.Histogram{hist}}}},
		"exemplar":         {Timeseries: []prompb.TimeSeries{{Labels: good.Labels, Samples: good.Samples, Exemplars: []prompb.Exemplar{{Labels: []prompb.Label{{Name: "t", Value: "x"}}}}}}},
		"bad exemplar":     {Timeseries: []prompb.TimeSeries{{Labels: good.Labels, Samples: good.Samples, Exemplars: []prompb.Exemplar{{Labels: []prompb.Label{{Name: "", Value: "x"}}}}}}},
		"timestamp":        {Timeseries: []prompb.TimeSeries{{Labels: good.Labels, Samples: []prompb.Sample{{Value: 1, Timestamp: math.MaxInt64}}}}},
		"negative time":    {Timeseries: []prompb.TimeSeries{{Labels: good.Labels, Samples: []prompb.Sample{{Value: 1, Timestamp: -1}}}}},
		"no samples":       {Timeseries: []prompb.TimeSeries{good, {Labels: good.Labels}}},
		"metadata":         {Timeseries: []prompb.TimeSeries{good}, Metadata: []prompb.MetricMetadata{{Type: prompb.MetricMetadata_GAUGE, MetricFamilyName: "ok"}}},
		"metadata no name": {Timeseries: []prompb.TimeSeries{good}, Metadata: []prompb.MetricMetadata{{Type: prompb.MetricMetadata_GAUGE, Help: "h"}}},
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			body, err := req.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			var s Scanner
			if s.ScanV1(body) {
				t.Fatal("the scan took a request that is not plain")
			}
			var m signal.Metrics
			var d Decoder
			st, err := d.DecodeV1(&m, body)
			var pe *PartialError
			plainButSlow := name == "unsorted" || name == "histogram" || name == "exemplar" || name == "metadata" || name == "negative time" || name == "no samples"
			if !plainButSlow && !errors.As(err, &pe) {
				t.Fatalf("decoder: err = %v (stats %+v), want a partial error", err, st)
			}
		})
	}
	// A malformed message is refused too.
	b1, _ := benchBodies(3, 2)
	for cut := 1; cut < len(b1); cut += 7 {
		checkScanAgrees(t, b1[:cut])
	}
}

func TestScanAllocatesNothingInSteadyState(t *testing.T) {
	b1, _ := benchBodies(1500, 8)
	var s Scanner
	s.ScanV1(b1)
	if n := testing.AllocsPerRun(20, func() {
		if !s.ScanV1(b1) {
			t.Fatal("refused")
		}
	}); n != 0 {
		t.Fatalf("%v allocations per scan", n)
	}
}

// TestASCII checks the word-wise ASCII test against a byte loop at every
// length and position of a non-ASCII byte.
func TestASCII(t *testing.T) {
	for n := 0; n <= 40; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a' + byte(i%26)
		}
		if !ascii(b) {
			t.Fatalf("len %d: ASCII refused", n)
		}
		for p := range n {
			c := slices.Clone(b)
			c[p] = 0x80 | byte(p)
			if ascii(c) {
				t.Fatalf("len %d: non-ASCII byte at %d accepted", n, p)
			}
		}
	}
}
