package prwreceiver

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

// TestLakeTimes: a receiver feeding the lake (LakeFutureSkew set) refuses a
// series with a sample or histogram further ahead than the skew, naming
// it, and writes the others (400, as any partial write), with the scan on
// and off alike; a forward-only relay (no skew) takes them. Time 0 is
// taken by both.
func TestLakeTimes(t *testing.T) {
	now := time.Now().UnixMilli()
	at := func(name string, ts int64) prompb.TimeSeries {
		return prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: name}, {Name: "job", Value: "j"}},
			Samples: []prompb.Sample{{Value: 1, Timestamp: ts}}}
	}
	hist := func(name string, ts int64) prompb.TimeSeries {
		return prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: name}},
			Histograms: []prompb.Histogram{prompb.FromIntHistogram(ts, &histogram.Histogram{Count: 1, ZeroCount: 1, Sum: 1, ZeroThreshold: 0.001})}}
	}
	syms := []string{"", "__name__", "ok", "zero", "ahead", "h"}
	v2 := func(series ...writev2.TimeSeries) []byte {
		b, _ := (&writev2.Request{Symbols: syms, Timeseries: series}).Marshal()
		return snappy.Encode(nil, b)
	}
	s2 := func(name uint32, ts int64) writev2.TimeSeries {
		return writev2.TimeSeries{LabelsRefs: []uint32{1, name}, Samples: []writev2.Sample{{Value: 1, Timestamp: ts}}}
	}
	h2 := writev2.TimeSeries{LabelsRefs: []uint32{1, 5}, Histograms: []writev2.Histogram{
		writev2.FromIntHistogram(0, now+3*3600_000, &histogram.Histogram{Count: 1, ZeroCount: 1, Sum: 1, ZeroThreshold: 0.001})}}
	cases := []struct {
		name, ct string
		body     []byte
		problems []string // in the 400's body; none: 204
		points   int      // handed over by the lake-fed receiver
	}{
		{"1.0 zero", ctV1, v1Body(at("ok", now), at("zero", 0)), nil, 2},
		{"1.0 ahead", ctV1, v1Body(at("ahead", now+2*3600_000), at("ok", now)), []string{`__name__="ahead"`, "the latest time accepted now"}, 1},
		{"1.0 within the skew", ctV1, v1Body(at("ok", now+50*60_000), at("ok2", 1)), nil, 2},
		{"1.0 histogram ahead", ctV1, v1Body(at("ok", now), hist("h", now+90*60_000)), []string{`__name__="h"`, "histogram timestamp"}, 1},
		{"2.0 zero", ctV2, v2(s2(2, now), s2(3, 0)), nil, 2},
		{"2.0 ahead", ctV2, v2(s2(4, now+2*3600_000), s2(2, now)), []string{`__name__="ahead"`, "the latest time accepted now"}, 1},
		{"2.0 histogram ahead", ctV2, v2(s2(2, now), h2), []string{`__name__="h"`, "histogram timestamp"}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, scan := range []bool{false, true} {
				rec := &recorder{scan: scan}
				srv := newLakeServer(t, rec, time.Hour)
				resp := post(t, srv.URL, c.ct, "snappy", c.body)
				msg, _ := io.ReadAll(resp.Body)
				if len(c.problems) == 0 {
					if resp.StatusCode != http.StatusNoContent {
						t.Fatalf("scan %v: %d %s, want 204", scan, resp.StatusCode, msg)
					}
				} else {
					if resp.StatusCode != http.StatusBadRequest {
						t.Fatalf("scan %v: %d %s, want 400", scan, resp.StatusCode, msg)
					}
					for _, p := range c.problems {
						if !strings.Contains(string(msg), p) {
							t.Fatalf("scan %v: %q does not say %q", scan, msg, p)
						}
					}
					if c.ct == ctV2 && resp.Header.Get(HeaderSamples) != "1" || c.ct == ctV2 && resp.Header.Get(HeaderHistograms) != "0" {
						t.Fatalf("scan %v: written samples %q histograms %q, want 1 and 0", scan, resp.Header.Get(HeaderSamples), resp.Header.Get(HeaderHistograms))
					}
				}
				if rec.points != c.points {
					t.Fatalf("scan %v: %d points handed over, want %d", scan, rec.points, c.points)
				}
				// A relay that only forwards takes every one of them.
				relay := &recorder{scan: scan}
				if resp := post(t, newServer(t, relay).URL, c.ct, "snappy", c.body); resp.StatusCode != http.StatusNoContent {
					b, _ := io.ReadAll(resp.Body)
					t.Fatalf("relay, scan %v: %d %s, want 204", scan, resp.StatusCode, b)
				}
			}
		})
	}
}

func newLakeServer(t *testing.T, rec *recorder, skew time.Duration) *httptest.Server {
	h, err := New(Config{MaxRequestBytes: 1 << 20, LakeFutureSkew: skew}, rec)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// TestStartTimestampsIgnored: 2.0 start (created) timestamps at or after
// their point's time are counted in
// sluice_prw_start_timestamps_ignored_total, the request answered 204 with
// every sample written (as Prometheus 3 takes it), with the scan on and
// off alike (the stored points: prw TestStartNotBeforePointIgnored).
func TestStartTimestampsIgnored(t *testing.T) {
	const t0 = 1_800_000_000_000
	req := &writev2.Request{Symbols: []string{"", "__name__", "c"}, Timeseries: []writev2.TimeSeries{
		{LabelsRefs: []uint32{1, 2}, Samples: []writev2.Sample{
			{Value: 1, Timestamp: t0, StartTimestamp: t0 - 10},
			{Value: 2, Timestamp: t0 + 1000, StartTimestamp: t0 + 1000},
			{Value: 3, Timestamp: t0 + 2000, StartTimestamp: t0 + 9000}}}}}
	b, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, scan := range []bool{false, true} {
		reg := prometheus.NewRegistry()
		rec := &recorder{scan: scan}
		h, err := New(Config{MaxRequestBytes: 1 << 20, Registerer: reg}, rec)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		resp := post(t, srv.URL, ctV2, "snappy", snappy.Encode(nil, b))
		srv.Close()
		if resp.StatusCode != http.StatusNoContent || resp.Header.Get(HeaderSamples) != "3" {
			t.Fatalf("scan %v: %d, written %q; want 204 and 3", scan, resp.StatusCode, resp.Header.Get(HeaderSamples))
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := -1.0
		for _, mf := range mfs {
			if mf.GetName() == "sluice_prw_start_timestamps_ignored_total" {
				got = mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		if got != 2 {
			t.Errorf("scan %v: sluice_prw_start_timestamps_ignored_total = %v, want 2", scan, got)
		}
		if rec.points != 3 {
			t.Errorf("scan %v: %d points handed over, want 3", scan, rec.points)
		}
	}
}
