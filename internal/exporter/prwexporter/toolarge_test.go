package prwexporter

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/waittest"
)

// sizeLimitReceiver answers 413 to a request of more than maxSeries
// series, and to any request holding the series refused (too large on
// its own), as Mimir or VictoriaMetrics answer a request over their size
// limit; it keeps the samples of every request it accepts.
type sizeLimitReceiver struct {
	srv       *httptest.Server
	maxSeries int
	refused   string // seriesKey of a series too large alone
	// maxSamples, when set, refuses a request of more samples (a size
	// limit one series can pass alone).
	maxSamples int

	tooLarge atomic.Int64
	mu       sync.Mutex
	samples  map[string][]int64
}

func newSizeLimitReceiver(t *testing.T, maxSeries int, refused string) *sizeLimitReceiver {
	r := &sizeLimitReceiver{maxSeries: maxSeries, refused: refused, samples: map[string][]int64{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		isV2 := strings.Contains(req.Header.Get("Content-Type"), "write.v2")
		b, _ := io.ReadAll(req.Body)
		raw, err := snappy.Decode(nil, b)
		var wr prompb.WriteRequest
		if err == nil && isV2 {
			wr, err = v2AsV1(raw)
		} else if err == nil {
			err = wr.Unmarshal(raw)
		}
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		tooLarge := len(wr.Timeseries) > r.maxSeries
		samples := 0
		for _, ts := range wr.Timeseries {
			tooLarge = tooLarge || seriesKey(ts.Labels) == r.refused
			samples += len(ts.Samples)
		}
		tooLarge = tooLarge || (r.maxSamples > 0 && samples > r.maxSamples)
		if tooLarge {
			r.tooLarge.Add(1)
			http.Error(w, fmt.Sprintf("the request of %d series is over the limit", len(wr.Timeseries)), http.StatusRequestEntityTooLarge)
			return
		}
		n := 0
		r.mu.Lock()
		for _, ts := range wr.Timeseries {
			k := seriesKey(ts.Labels)
			for _, s := range ts.Samples {
				r.samples[k] = append(r.samples[k], s.Timestamp)
				n++
			}
		}
		r.mu.Unlock()
		if isV2 {
			w.Header().Set("X-Prometheus-Remote-Write-Samples-Written", strconv.Itoa(n))
		}
		w.WriteHeader(204)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// TestTooLargeSplit: an endpoint that answers 413 gets the request again
// in halves, down to one series, on every path (records passed through as
// received, alone or merged; split into lanes; converted from the other
// version); the one series too large alone is dropped and counted, Send
// returns nil (the batch is committed), and every other sample arrives
// once, in order. Before splitting, a 413 dropped the whole request.
func TestTooLargeSplit(t *testing.T) {
	for _, c := range []struct {
		name     string
		rec, exp uint8 // record and exporter versions
		lanes    int
	}{
		{"v1 pass-through", 1, 1, 1},
		{"v2 pass-through", 2, 2, 1},
		{"v1 lanes", 1, 1, 2},
		{"v2 lanes", 2, 2, 2},
		{"v1 converted to v2", 1, 2, 1},
		{"v2 converted to v1", 2, 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			const nSeries, perBatch = 40, 3
			big := seriesKey([]prompb.Label{{Name: "__name__", Value: "lane_test"}, {Name: "s", Value: "7"}})
			r := newSizeLimitReceiver(t, 6, big)
			exp := laneExporterV(t, r.srv.URL, c.lanes, c.exp)
			var passed atomic.Bool
			for _, batch := range laneBatchesV(t, c.rec, 2, perBatch, nSeries) {
				if c.rec == c.exp {
					passed.Store(exp.passThrough(&batch[0]))
				}
				if err := exp.Send(waittest.Context(t), batch); err != nil {
					t.Fatalf("Send: %v", err)
				}
			}
			if c.rec == c.exp && !passed.Load() {
				t.Fatal("records took the convert path, not pass-through")
			}
			checkSamples(t, &laneReceiver{samples: r.samples}, nSeries, 2*perBatch, map[string]bool{big: true})
			st := &exp.Endpoints()[0].Stats
			if st.Splits.Load() == 0 {
				t.Error("no split counted")
			}
			// The big series goes alone once per record at least (in
			// each record's half), each request of it dropped and counted.
			if d := st.Dropped.Load(); d == 0 || d > 2*perBatch {
				t.Errorf("%d requests dropped, want 1 to %d (the big series' alone)", d, 2*perBatch)
			}
			if r.tooLarge.Load() <= int64(st.Dropped.Load()) {
				t.Errorf("%d answers 413, %d dropped: no request split", r.tooLarge.Load(), st.Dropped.Load())
			}
		})
	}
}

// TestTooLargeSeriesSplitBySamples: an endpoint whose size limit one
// series passes alone (a long backlog of it in one record) gets that
// series in parts of its samples, older first, each part halved again
// while refused: every sample arrives once and in order, nothing is
// dropped. The split works on the converter's entries, one per sample
// (convert.go), so halving entries halves a series' samples too; only a
// single sample or histogram still refused is dropped.
func TestTooLargeSeriesSplitBySamples(t *testing.T) {
	const nBig, maxSamples = 45, 8
	big := []prompb.Label{{Name: "__name__", Value: "backlog"}, {Name: "job", Value: "big"}}
	small := []prompb.Label{{Name: "__name__", Value: "backlog"}, {Name: "job", Value: "small"}}
	var wr prompb.WriteRequest
	ts0 := int64(1_700_000_000_000)
	bigTS := prompb.TimeSeries{Labels: big}
	for i := range nBig {
		bigTS.Samples = append(bigTS.Samples, prompb.Sample{Value: float64(i), Timestamp: ts0 + int64(i)*1000})
	}
	wr.Timeseries = []prompb.TimeSeries{bigTS, {Labels: small, Samples: []prompb.Sample{{Value: 1, Timestamp: ts0}}}}
	for _, c := range []struct {
		name     string
		rec, exp uint8
	}{
		{"v1 pass-through", 1, 1},
		{"v2 pass-through", 2, 2},
		{"v1 converted to v2", 1, 2},
		{"v2 converted to v1", 2, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newSizeLimitReceiver(t, 1000, "")
			r.maxSamples = maxSamples
			exp := laneExporterV(t, r.srv.URL, 1, c.exp)
			rec := v1Record(t, "t", &wr)
			if c.rec == 2 {
				rec = v2RecordOf(t, &wr)
			}
			if err := exp.Send(waittest.Context(t), []exporter.Record{rec}); err != nil {
				t.Fatal(err)
			}
			st := &exp.Endpoints()[0].Stats
			if d := st.Dropped.Load(); d != 0 {
				t.Errorf("%d requests dropped, want 0: the series fits when split by samples", d)
			}
			if st.Splits.Load() == 0 {
				t.Error("no split counted")
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			got := r.samples[seriesKey(big)]
			if len(got) != nBig {
				t.Fatalf("%d samples of the big series arrived, want %d", len(got), nBig)
			}
			for i, ts := range got {
				if ts != ts0+int64(i)*1000 {
					t.Fatalf("sample %d arrived at %d, want %d (out of order or twice)", i, ts, ts0+int64(i)*1000)
				}
			}
			if n := len(r.samples[seriesKey(small)]); n != 1 {
				t.Errorf("%d samples of the small series, want 1", n)
			}
		})
	}
}

// v2RecordOf is wr as a remote-write 2.0 record (samples only).
func v2RecordOf(t *testing.T, wr *prompb.WriteRequest) exporter.Record {
	t.Helper()
	st := writev2.NewSymbolTable()
	var req writev2.Request
	for _, p := range wr.Timeseries {
		var refs []uint32
		for _, l := range p.Labels {
			refs = append(refs, st.Symbolize(l.Name), st.Symbolize(l.Value))
		}
		ts := writev2.TimeSeries{LabelsRefs: refs, Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE}}
		for _, s := range p.Samples {
			ts.Samples = append(ts.Samples, writev2.Sample{Value: s.Value, Timestamp: s.Timestamp})
		}
		req.Timeseries = append(req.Timeseries, ts)
	}
	req.Symbols = st.Symbols()
	raw, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return exporter.Record{Kind: signal.KindMetrics, Tenant: "t", RemoteWrite: 2, Series: len(wr.Timeseries), Body: snappy.Encode(nil, raw)}
}
