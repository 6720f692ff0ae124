package prw

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluice-dev/sluice/internal/signal"
)

// checkScanAgrees is the differential check of ScanV1 against DecodeV1: a
// request the scan takes decodes with no error, no unsorted series and no
// histogram or exemplar, into exactly the samples the scan found, each
// with the scan's name, series id, time and labels, and the scan's
// attribute counts. It returns whether the scan took the request.
func checkScanAgrees(t *testing.T, body []byte) bool {
	t.Helper()
	return checkScanAgreesV(t, 1, body)
}

// checkScanAgreesV is checkScanAgrees for protocol version v (ScanV2
// against DecodeV2). Scanner reuse across versions is checked too: the
// scanner scans a request of the other version first.
func checkScanAgreesV(t *testing.T, v int, body []byte) bool {
	t.Helper()
	var s Scanner
	other1, other2 := benchBodies(3, 2)
	bodyCopy := slices.Clone(body)
	var ok bool
	if v == 1 {
		s.ScanV2(other2)
		ok = s.ScanV1(body)
	} else {
		s.ScanV1(other1)
		ok = s.ScanV2(body)
	}
	if !slices.Equal(body, bodyCopy) {
		t.Fatal("scan modified its input")
	}
	if !ok {
		return false
	}
	var m signal.Metrics
	var d Decoder
	st, err := decode(&d, v, &m, body)
	if err != nil {
		t.Fatalf("the scan took a request the decoder refuses: %v", err)
	}
	if st.Unsorted != 0 || st.Histograms != 0 || st.Exemplars != 0 || st.Dropped != 0 {
		t.Fatalf("the scan took a request that is not plain: %+v", st)
	}
	if st.Samples != s.Samples() || m.Len() != s.Samples() {
		t.Fatalf("scan found %d samples, decoder %d (%d points)", s.Samples(), st.Samples, m.Len())
	}
	if st.StartsIgnored != s.StartsIgnored {
		t.Fatalf("scan ignored %d start timestamps, decoder %d", s.StartsIgnored, st.StartsIgnored)
	}
	descAttrs := 0
	for _, d := range m.Descs {
		descAttrs += d.Metadata.Len()
	}
	if v == 1 && m.Attrs.Len() != s.Attrs {
		t.Fatalf("scan counts %d attributes, the batch has %d", s.Attrs, m.Attrs.Len())
	}
	if seriesAttrs := m.Attrs.Len() - descAttrs; v == 2 && (s.Attrs < m.Attrs.Len() || s.Attrs > seriesAttrs+2*len(s.Names)) {
		t.Fatalf("scan counts %d attributes, the batch has %d (%d of metadata): not a bound within two per name", s.Attrs, m.Attrs.Len(), descAttrs)
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
		if s.Time[i] != m.Time[i] || v == 1 && m.StartTime[i] != 0 {
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
	checkNameHashes(t, &s)
	checkLabelKeys(t, v, body, &s, &m)
	return true
}

// checkLabelKeys: with LabelKeys the scan takes the request s took (for
// 1.0 unless its bytes are not the encoders' canonical ones) with the same
// samples, names and times, and its ids are the label-set keys of the
// decoded series (m), computed here from the decoded labels.
func checkLabelKeys(t *testing.T, v int, body []byte, s *Scanner, m *signal.Metrics) {
	t.Helper()
	k := Scanner{LabelKeys: true}
	var ok bool
	if v == 1 {
		ok = k.ScanV1(body)
	} else {
		ok = k.ScanV2(body)
	}
	if !ok {
		if v == 2 || canonicalV1(body) {
			t.Fatal("with LabelKeys the scan refused a plain request")
		}
		return
	}
	if !slices.Equal(k.Name, s.Name) || !slices.Equal(k.Time, s.Time) || k.Attrs != s.Attrs || k.MaxAttrs != s.MaxAttrs || k.Series != s.Series {
		t.Fatal("with LabelKeys the scan found other samples")
	}
	for i := range m.Len() {
		if got, want := k.ID[i], decodedLabelsKey(m, i); got != want {
			t.Fatalf("sample %d: label-set key %x, of the decoded labels %x", i, got, want)
		}
	}
}

// canonicalV1 reports whether body is what prompb marshals of itself.
func canonicalV1(body []byte) bool {
	var req prompb.WriteRequest
	if req.Unmarshal(body) != nil {
		return false
	}
	b, err := req.Marshal()
	return err == nil && bytes.Equal(b, body)
}

// decodedLabelsKey is the LabelsKey of point i's labels: __name__ (its
// metric name) and its attributes, sorted by name.
func decodedLabelsKey(m *signal.Metrics, i int) uint64 {
	type kv struct{ k, v string }
	ls := []kv{{"__name__", m.String(m.Descs[m.Desc[i]].Name)}}
	for a := m.Attr[i].Start; a < m.Attr[i].End; a++ {
		ls = append(ls, kv{m.Keys.Name(m.Attrs.Key[a]), m.AttrString(int(a))})
	}
	slices.SortFunc(ls, func(x, y kv) int { return strings.Compare(x.k, y.k) })
	var f []byte
	for _, l := range ls {
		f = protowire.AppendTag(f, 1, protowire.BytesType)
		f = protowire.AppendVarint(f, uint64(protowire.SizeTag(1)*2+protowire.SizeBytes(len(l.k))+protowire.SizeBytes(len(l.v))))
		f = protowire.AppendTag(f, 1, protowire.BytesType)
		f = protowire.AppendString(f, l.k)
		f = protowire.AppendTag(f, 2, protowire.BytesType)
		f = protowire.AppendString(f, l.v)
	}
	return LabelsKey(f)
}

// TestScanLabelKeysOverlongVarint: a label whose lengths are written with
// more varint bytes than they need is valid protobuf, taken by the plain
// scan and the decoder, but its bytes are not the canonical ones the
// label-set key hashes: with LabelKeys the scan leaves it to the decoder.
func TestScanLabelKeysOverlongVarint(t *testing.T) {
	label := func(name, value string, overlong bool) []byte {
		var l []byte
		l = protowire.AppendTag(l, 1, protowire.BytesType)
		if overlong {
			l = append(l, byte(len(name))|0x80, 0) // the same length in two bytes
			l = append(l, name...)
		} else {
			l = protowire.AppendString(l, name)
		}
		l = protowire.AppendTag(l, 2, protowire.BytesType)
		l = protowire.AppendString(l, value)
		f := protowire.AppendTag(nil, 1, protowire.BytesType)
		return protowire.AppendBytes(f, l)
	}
	for _, overlong := range []bool{false, true} {
		var ts []byte
		ts = append(ts, label("__name__", "up", false)...)
		ts = append(ts, label("job", "api", overlong)...)
		smp := protowire.AppendTag(nil, 1, protowire.Fixed64Type)
		smp = protowire.AppendFixed64(smp, math.Float64bits(1))
		smp = protowire.AppendTag(smp, 2, protowire.VarintType)
		smp = protowire.AppendVarint(smp, t0ms)
		ts = protowire.AppendTag(ts, 2, protowire.BytesType)
		ts = protowire.AppendBytes(ts, smp)
		body := protowire.AppendTag(nil, 1, protowire.BytesType)
		body = protowire.AppendBytes(body, ts)
		if !checkScanAgrees(t, body) {
			t.Fatalf("overlong %v: the plain scan refused the request", overlong)
		}
		k := Scanner{LabelKeys: true}
		if got := k.ScanV1(body); got == overlong {
			t.Fatalf("overlong %v: LabelKeys scan took it: %v", overlong, got)
		}
	}
}

// TestLabelKeysSameAcrossVersions: a series has one label-set key whether
// it came in 1.0 or 2.0, as the statistics count it once either way.
func TestLabelKeysSameAcrossVersions(t *testing.T) {
	b1, b2 := benchBodies(50, 6)
	k1, k2 := Scanner{LabelKeys: true}, Scanner{LabelKeys: true}
	if !k1.ScanV1(b1) || !k2.ScanV2(b2) {
		t.Fatal("refused")
	}
	if len(k1.ID) == 0 || !slices.Equal(k1.ID, k2.ID) {
		t.Fatalf("1.0 keys %x\n2.0 keys %x", k1.ID, k2.ID)
	}
}

// checkNameHashes: the name hashes the statistics take are those of Names.
func checkNameHashes(t *testing.T, s *Scanner) {
	t.Helper()
	if h := s.NameHashes(); len(h) != len(s.Names) {
		t.Fatalf("%d name hashes for %d names", len(h), len(s.Names))
	}
	for j, name := range s.Names {
		if got, want := s.NameHashes()[j], xxhash.Sum64(name); got != want {
			t.Fatalf("name %q: hash %x, want %x", name, got, want)
		}
	}
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

// FuzzScanV2 fuzzes the 2.0 scan against DecodeV2 (checkScanAgreesV).
func FuzzScanV2(f *testing.F) {
	_, b2 := benchBodies(20, 5)
	f.Add(b2)
	b, _ := v2Request(oracleLoad(), 7, true).Marshal()
	f.Add(b)
	f.Add(scanV2Plain(t0ms))
	f.Add([]byte{0x22, 0x00, 0x2a, 0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, body []byte) { checkScanAgreesV(t, 2, body) })
}

const t0ms = 1700000000000

// scanV2Plain is a plain 2.0 request as Prometheus's sender writes one:
// metadata on every series (empty too), created timestamps, samples with
// start timestamps, several samples per series, UTF-8 and long values,
// a duplicated symbol.
func scanV2Plain(ts int64) []byte {
	return marshalV2Created(scanV2PlainReq(ts), map[int]int64{0: ts - 10})
}

// marshalV2Created marshals req with the created_timestamp field (6,
// replaced by start_timestamp, no longer in the Go type) on the series
// created maps.
func marshalV2Created(req *writev2.Request, created map[int]int64) []byte {
	var b []byte
	for _, sym := range req.Symbols {
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		b = protowire.AppendString(b, sym)
	}
	for i, ts := range req.Timeseries {
		m, err := ts.Marshal()
		if err != nil {
			panic(err)
		}
		if c, ok := created[i]; ok {
			m = protowire.AppendTag(m, 6, protowire.VarintType)
			m = protowire.AppendVarint(m, uint64(c))
		}
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	return b
}

func scanV2PlainReq(ts int64) *writev2.Request {
	long := string(make([]byte, 300))
	req := &writev2.Request{
		Symbols: []string{"", "__name__", "a", "x", "1", "b", "y", "ü", long, "A", "2", "help", "a"},
		Timeseries: []writev2.TimeSeries{
			{LabelsRefs: []uint32{1, 2, 3, 4}, Samples: []writev2.Sample{{Value: 1, Timestamp: ts}, {Value: math.NaN(), Timestamp: ts + 1, StartTimestamp: ts - 5}},
				Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_COUNTER, HelpRef: 11}},
			{LabelsRefs: []uint32{1, 5, 3, 4, 6, 7}, Samples: []writev2.Sample{{Value: 1, Timestamp: 0}}},
			{LabelsRefs: []uint32{1, 2, 3, 8}, Samples: []writev2.Sample{{Value: 1, Timestamp: ts}}},
			{LabelsRefs: []uint32{1, 12}, Samples: []writev2.Sample{{Value: 1, Timestamp: ts}}},
			{LabelsRefs: []uint32{9, 4, 1, 2, 3, 10}, Samples: []writev2.Sample{{Value: 1, Timestamp: ts}}},
		}}
	return req
}

// TestScanV2PlainRequests: the 2.0 scan takes the plain requests and
// agrees with DecodeV2 on them, series ids included.
func TestScanV2PlainRequests(t *testing.T) {
	for _, shape := range [][2]int{{1, 0}, {100, 5}, {1500, 8}, {300, 10}} {
		_, b2 := benchBodies(shape[0], shape[1])
		if !checkScanAgreesV(t, 2, b2) {
			t.Fatalf("%d series x %d labels: the scan refused a plain request", shape[0], shape[1])
		}
	}
	if !checkScanAgreesV(t, 2, scanV2Plain(t0ms)) {
		t.Fatal("the scan refused a plain request")
	}
	if !checkScanAgreesV(t, 2, nil) {
		t.Fatal("the scan refused an empty request")
	}
	// The same series get the same ids over 1.0 and 2.0.
	b1, b2 := benchBodies(50, 4)
	var s1, s2 Scanner
	if !s1.ScanV1(b1) || !s2.ScanV2(b2) || !slices.Equal(s1.ID, s2.ID) {
		t.Fatal("1.0 and 2.0 scans of the same series differ in their ids")
	}
}

// TestScanV2LeavesTheRestToTheDecoder: every 2.0 request that is not plain
// is refused by the scan; the invalid ones get the decoder's partial error.
func TestScanV2LeavesTheRestToTheDecoder(t *testing.T) {
	syms := []string{"", "__name__", "ok", "a", "b", "h"}
	good := writev2.TimeSeries{LabelsRefs: []uint32{1, 2}, Samples: []writev2.Sample{{Value: 1, Timestamp: 1}}}
	with := func(f func(*writev2.TimeSeries)) writev2.TimeSeries {
		ts := good
		ts.LabelsRefs = slices.Clone(good.LabelsRefs)
		f(&ts)
		return ts
	}
	hist := writev2.FromIntHistogram(0, 1, generateTestHistogram(1))
	cases := map[string]struct {
		req     writev2.Request
		invalid bool // the decoder answers a partial error
	}{
		"no name":      {writev2.Request{Symbols: syms, Timeseries: []writev2.TimeSeries{good, with(func(s *writev2.TimeSeries) { s.LabelsRefs = []uint32{3, 4} })}}, true},
		"empty name":   {writev2.Request{Symbols: syms, Timeseries: []writev2.TimeSeries{with(func(s *writev2.TimeSeries) { s.LabelsRefs = []uint32{1, 0} })}}, true},
		"empty label":  {writev2.Request{Symbols: syms, Timeseries: []writev2.TimeSeries{with(func(s *writev2.TimeSeries) { s.LabelsRefs = []uint32{0, 3, 1, 2} })}}, true},
		"duplicate":    {writev2.Request{Symbols: syms, Timeseries: []writev2.TimeSeries{with(func(s *writev2.TimeSeries) { s.LabelsRefs = []uint32{1, 2, 3, 4, 3, 4} })}}, true},
		"unsorted":     {writev2.Request{Symbols: syms, Timeseries: []writev2.TimeSeries{with(func(s *writev2.TimeSeries) { s.LabelsRefs = []uint32{3, 4, 1, 2} })}}, false},
		"ref out":      {writev2.Request{Symbols: syms, Timeseries: []writev2.TimeSeries{with(func(s *writev2.TimeSeries) { s.LabelsRefs = []uint32{1, 99} })}}, true},
		"odd refs":     {writev2.Request{Symbols: syms, Timeseries: []writev2.TimeSeries{with(func(s *writev2.TimeSeries) { s.LabelsRefs = []uint32{1, 2, 3} })}}, true},
		"meta ref out": {writev2.Request{Symbols: syms, Timeseries: []writev2.TimeSeries{with(func(s *writev2.TimeSeries) { s.Metadata.HelpRef = 99 })}}, true},
		"histogram":    {writev2.Request{Symbols: syms, Timeseries: []writev2.TimeSeries{good, {LabelsRefs: []uint32{1, 5}, Histograms: []writev2.Histogram{hist}}}}, false},
		"exemplar":     {writev2.Request{Symbols: syms, Timeseries: []writev2.TimeSeries{with(func(s *writev2.TimeSeries) { s.Exemplars = []writev2.Exemplar{{LabelsRefs: []uint32{3, 4}}} })}}, false},
		"timestamp":    {writev2.Request{Symbols: syms, Timeseries: []writev2.TimeSeries{with(func(s *writev2.TimeSeries) { s.Samples = []writev2.Sample{{Value: 1, Timestamp: math.MaxInt64}} })}}, true},
		"start timestamp": {writev2.Request{Symbols: syms, Timeseries: []writev2.TimeSeries{with(func(s *writev2.TimeSeries) {
			s.Samples = []writev2.Sample{{Value: 1, Timestamp: 1, StartTimestamp: math.MinInt64}}
		})}}, true},
		"negative time": {writev2.Request{Symbols: syms, Timeseries: []writev2.TimeSeries{with(func(s *writev2.TimeSeries) { s.Samples = []writev2.Sample{{Value: 1, Timestamp: -1}} })}}, false},
		"no samples":    {writev2.Request{Symbols: syms, Timeseries: []writev2.TimeSeries{good, with(func(s *writev2.TimeSeries) { s.Samples = nil })}}, false},
		"bad utf8":      {writev2.Request{Symbols: append(slices.Clone(syms), "\xff"), Timeseries: []writev2.TimeSeries{with(func(s *writev2.TimeSeries) { s.LabelsRefs = []uint32{1, 2, 3, 6} })}}, false},
		"first symbol":  {writev2.Request{Symbols: []string{"x", "__name__", "ok"}, Timeseries: []writev2.TimeSeries{good}}, false},
		"no symbols":    {writev2.Request{Timeseries: []writev2.TimeSeries{good}}, true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			body, err := c.req.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			var s Scanner
			if s.ScanV2(body) {
				t.Fatal("the scan took a request that is not plain")
			}
			var m signal.Metrics
			var d Decoder
			st, err := d.DecodeV2(&m, body)
			var pe *PartialError
			if c.invalid && !errors.As(err, &pe) {
				t.Fatalf("decoder: err = %v (stats %+v), want a partial error", err, st)
			}
		})
	}
	// A created timestamp out of range: the decoder drops the series.
	created := marshalV2Created(&writev2.Request{Symbols: syms, Timeseries: []writev2.TimeSeries{good}}, map[int]int64{0: math.MaxInt64})
	var s Scanner
	if s.ScanV2(created) {
		t.Fatal("the scan took a created timestamp out of range")
	}
	var m signal.Metrics
	var d Decoder
	if _, err := d.DecodeV2(&m, created); !errors.As(err, new(*PartialError)) {
		t.Fatalf("decoder: %v, want a partial error", err)
	}
	// Symbols after a series, and a malformed message at every cut.
	_, b2 := benchBodies(3, 2)
	moved := append(slices.Clone(b2[bytes.IndexByte(b2, 5<<3|wtLen):]), b2[:bytes.IndexByte(b2, 5<<3|wtLen)]...)
	if s.ScanV2(moved) {
		t.Fatal("the scan took symbols after the series")
	}
	for cut := 1; cut < len(b2); cut += 3 {
		checkScanAgreesV(t, 2, b2[:cut])
	}
}

func TestScanV2AllocatesNothingInSteadyState(t *testing.T) {
	_, b2 := benchBodies(1500, 8)
	var s Scanner
	s.ScanV2(b2)
	if n := testing.AllocsPerRun(20, func() {
		if !s.ScanV2(b2) {
			t.Fatal("refused")
		}
	}); n != 0 {
		t.Fatalf("%v allocations per scan", n)
	}
}

// TestScannerRemembersNamesAcrossCalls: a Scanner that keeps its metric
// names from call to call (and starts its table again past maxScanNames)
// finds exactly what a fresh one finds in each request.
func TestScannerRemembersNamesAcrossCalls(t *testing.T) {
	var kept Scanner
	for call := range 12 {
		n, name := 200+call*7, func(i int) int { return (i*(call+1) + call*maxScanNames/4) % (maxScanNames / 2) }
		if call == 10 { // past the bound: the next call starts the table again
			n, name = maxScanNames+100, func(i int) int { return 1_000_000 + i }
		}
		b1, b2 := benchBodiesNamed(n, 3, name)
		for v, body := range [][]byte{b1, b2} {
			var fresh Scanner
			ok1, ok2 := fresh.ScanV1(body), kept.ScanV1(body)
			if v == 1 {
				ok1, ok2 = fresh.ScanV2(body), kept.ScanV2(body)
			}
			if !ok1 || !ok2 {
				t.Fatalf("call %d v%d: refused", call, v+1)
			}
			if !slices.Equal(fresh.Name, kept.Name) || !slices.Equal(fresh.ID, kept.ID) || len(fresh.Names) != len(kept.Names) {
				t.Fatalf("call %d v%d: a reused scanner differs from a fresh one", call, v+1)
			}
			for i := range fresh.Names {
				if !bytes.Equal(fresh.Names[i], kept.Names[i]) {
					t.Fatalf("call %d v%d: name %d %q, fresh %q", call, v+1, i, kept.Names[i], fresh.Names[i])
				}
			}
			checkNameHashes(t, &kept)
		}
	}
	if len(kept.nameTab) >= maxScanNames {
		t.Fatalf("%d names remembered, past the bound %d", len(kept.nameTab), maxScanNames)
	}
}

// TestScanNamesLikeThePreviousSeries: the scan's path for labels named as
// in the series before (one pass over framing and name) agrees with the
// decoder when a name differs from the previous series' in one byte at
// any place, in length only, or when __name__ moves, and refuses what the
// decoder would sort or refuse (a name now out of order or duplicated).
func TestScanNamesLikeThePreviousSeries(t *testing.T) {
	base := []prompb.Label{{Name: "__name__", Value: "m"}, {Name: "container", Value: "c"}, {Name: "instance", Value: "i:9090"}, {Name: "job", Value: "j"}, {Name: "zone", Value: "z"}}
	series := func(ls []prompb.Label) prompb.TimeSeries {
		return prompb.TimeSeries{Labels: ls, Samples: []prompb.Sample{{Value: 1, Timestamp: 5}}}
	}
	took := 0
	for k := range base {
		for p := range len(base[k].Name) {
			for _, change := range []func(string) string{
				func(n string) string { return n[:p] + string(n[p]+1) + n[p+1:] },
				func(n string) string { return n[:p] + string(n[p]-1) + n[p+1:] },
				func(n string) string { return n[:p] + "a" + n[p:] },
				func(n string) string { return n[:p] },
			} {
				ls := slices.Clone(base)
				ls[k].Name = change(ls[k].Name)
				req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{series(base), series(ls), series(base), series(base)}}
				body, err := req.Marshal()
				if err != nil {
					t.Fatal(err)
				}
				if checkScanAgrees(t, body) {
					took++
				}
			}
		}
	}
	if took == 0 {
		t.Fatal("the scan took none of the requests")
	}
}

// TestScanKnownLabels: the word compare of labels named as in the previous
// series (knownLabels) at every name length around its limits (1 to 16
// bytes; 13 is the longest it takes), __name__ in the middle of the labels,
// label sets that change, shrink and grow between series, a value with a
// two-byte length among short ones, and a name that differs from the
// previous series' only in its last byte: the scan agrees with the decoder
// on all of them.
func TestScanKnownLabels(t *testing.T) {
	var series []prompb.TimeSeries
	for i := range 60 {
		ls := []prompb.Label{{Name: "__name__", Value: fmt.Sprintf("m%d", i%3)}}
		for n := 1; n <= 16; n++ {
			if (i+n)%7 == 0 {
				continue // sets change from series to series
			}
			name := strings.Repeat("k", n)
			if i%5 == 0 && n == 13 {
				name = strings.Repeat("k", 12) + "z" // same length, last byte differs
			}
			v := fmt.Sprintf("v%d-%d", n, i%4)
			if i%9 == 0 && n == 3 {
				v = strings.Repeat("x", 200) // a two-byte value length
			}
			ls = append(ls, prompb.Label{Name: name, Value: v})
			ls = append(ls, prompb.Label{Name: "A" + name, Value: v}) // sorts before __name__
		}
		slices.SortFunc(ls, func(a, b prompb.Label) int { return strings.Compare(a.Name, b.Name) })
		series = append(series, prompb.TimeSeries{Labels: ls, Samples: []prompb.Sample{{Value: float64(i), Timestamp: 1700000000000 + int64(i)}}})
	}
	// Names that differ from the previous series' at the same place only
	// in their last byte, at lengths the word compare covers with one word
	// (2), two (13) and not at all (14).
	for _, n := range []int{2, 13, 14} {
		for _, last := range []string{"k", "z", "k"} {
			series = append(series, prompb.TimeSeries{
				Labels:  []prompb.Label{{Name: "__name__", Value: "m"}, {Name: strings.Repeat("k", n-1) + last, Value: "v"}},
				Samples: []prompb.Sample{{Value: 1, Timestamp: 1700000000000}}})
		}
	}
	body, err := (&prompb.WriteRequest{Timeseries: series}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !checkScanAgrees(t, body) {
		t.Fatal("the scan refused a plain request")
	}
	// The same series again, in one request each, through one scanner:
	// what the previous series left must not leak into the next request.
	var s Scanner
	for i, ts := range series {
		one, _ := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{ts}}).Marshal()
		if !s.ScanV1(one) || s.Samples() != 1 {
			t.Fatalf("series %d alone: refused", i)
		}
		var m signal.Metrics
		var d Decoder
		if _, err := d.DecodeV1(&m, one); err != nil || m.Len() != 1 || m.SeriesID[0] != s.ID[0] {
			t.Fatalf("series %d alone: id %x, the decoder's %v (%v)", i, s.ID[0], m.SeriesID, err)
		}
	}
}

// TestAppendLabelFieldShort: the word-copying append writes what
// AppendLabelField writes, for names and values of every length around
// its 16-byte words, with and without 16 bytes of capacity after them,
// onto buffers with and without room.
func TestAppendLabelFieldShort(t *testing.T) {
	src := []byte(strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789", 4))
	for nl := 0; nl <= 20; nl++ {
		for vl := 0; vl <= 20; vl++ {
			for _, capped := range []bool{false, true} {
				name, value := src[3:3+nl], src[40:40+vl]
				if capped {
					name, value = slices.Clip(name), slices.Clip(value)
				}
				for _, pre := range [][]byte{nil, []byte("xyz"), make([]byte, 5, 44)} {
					want := AppendLabelField(slices.Clone(pre), name, value)
					got := appendLabelFieldShort(slices.Clone(pre), name, value)
					if !bytes.Equal(got, want) {
						t.Fatalf("name %d, value %d bytes, capped %v, after %d: %x, want %x", nl, vl, capped, len(pre), got, want)
					}
				}
			}
		}
	}
}
