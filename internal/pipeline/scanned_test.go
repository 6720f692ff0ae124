package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/processor"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/queue"
	"github.com/sluice-dev/sluice/internal/receiver/otlpreceiver"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/stats"
)

// scannedRequest is a plain remote write 1.0 request as the receiver hands
// it over without a batch (and the scanner, which the caller keeps alive).
func scannedRequest(t *testing.T, body []byte) (*otlpreceiver.Request, *prw.Scanner) {
	t.Helper()
	return scannedRequestV(t, 1, body)
}

// scannedRequestV is scannedRequest for remote write version v.
func scannedRequestV(t *testing.T, v uint8, body []byte) (*otlpreceiver.Request, *prw.Scanner) {
	t.Helper()
	sc := &prw.Scanner{LabelKeys: true} // as the receiver scans
	if v == 1 && !sc.ScanV1(body) || v == 2 && !sc.ScanV2(body) {
		t.Fatal("the scan refused a plain request")
	}
	var ll []prw.Label
	x := &otlpreceiver.Scanned{Points: sc.Samples(), NumSeries: sc.Series, Attrs: sc.Attrs, MaxAttrs: sc.MaxAttrs,
		Series: stats.Series{Names: sc.Names, Name: sc.Name, ID: sc.ID, Time: sc.Time, Labels: func(i int, dst []stats.Label) []stats.Label {
			ll = sc.Labels(i, ll[:0])
			for _, l := range ll {
				dst = append(dst, stats.Label{Name: l.Name, Value: l.Value})
			}
			return dst
		}}}
	return &otlpreceiver.Request{Tenant: "acme", Kind: signal.KindMetrics, Body: snappy.Encode(nil, body),
		Transport: "prometheus_remote_write", RemoteWrite: v, Scanned: x}, sc
}

// TestConsumeScannedV2Requests: a scanned 2.0 request is queued as
// received with its series count (encPRW2N), counted in the statistics
// exactly as the decoded one, and decodes from the queue into its points.
func TestConsumeScannedV2Requests(t *testing.T) {
	now := time.Now().UnixMilli()
	st := writev2.NewSymbolTable()
	req2 := &writev2.Request{}
	for i := range 30 {
		var refs []uint32
		for _, l := range [][2]string{{"__name__", fmt.Sprintf("m%d", i%4)}, {"instance", "h"}, {"job", "j"}, {"n", fmt.Sprint(i)}} {
			refs = append(refs, st.Symbolize(l[0]), st.Symbolize(l[1]))
		}
		req2.Timeseries = append(req2.Timeseries, writev2.TimeSeries{LabelsRefs: refs, Samples: []writev2.Sample{{Value: 1, Timestamp: now}},
			Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE}})
	}
	req2.Symbols = st.Symbols()
	body, _ := req2.Marshal()
	open := func() (*consumer, *queue.Queue) {
		q, err := queue.Open(queue.Options{Dir: t.TempDir(), SegmentBytes: 64 << 20, MaxBytes: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.Close() })
		c := newConsumer(q, time.Second, newMetrics())
		if c.stats, err = stats.New(stats.Config{}); err != nil {
			t.Fatal(err)
		}
		return c, q
	}
	dc, _ := open()
	var m signal.Metrics
	if _, err := new(prw.Decoder).DecodeV2(&m, body); err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Consume(context.Background(), &otlpreceiver.Request{Tenant: "acme", Kind: signal.KindMetrics, Body: snappy.Encode(nil, body),
		Transport: "prometheus_remote_write", Metrics: &m, RemoteWrite: 2}); err != nil {
		t.Fatal(err)
	}
	sc, q := open()
	req, _ := scannedRequestV(t, 2, body)
	if _, err := sc.Consume(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if x, y := dc.stats.TSDB("acme", 100), sc.stats.TSDB("acme", 100); !reflect.DeepEqual(x, y) || x.HeadStats.NumSeries != 30 {
		t.Fatalf("statistics differ:\ndecoded %+v\nscanned %+v", x, y)
	}
	r := q.NewReader(0)
	defer r.Close()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	rec, _, err := r.Next(done)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := parseRecord(rec)
	if err != nil || pr.Enc != encPRW2N {
		t.Fatalf("record %+v (%v), want encoding prw2n", pr, err)
	}
	n, raw, err := splitCounted(pr.Body)
	if err != nil || n != 30 || !bytes.Equal(raw, snappy.Encode(nil, body)) {
		t.Fatalf("counted record: %d series (%v), body as received %v", n, err, bytes.Equal(raw, snappy.Encode(nil, body)))
	}
	m.Reset() // Consume swapped its buffers
	if _, err := new(prw.Decoder).DecodeV2(&m, body); err != nil {
		t.Fatal(err)
	}
	var got signal.Metrics
	if err := decodeMetricsRecord(&got, pr.Enc, pr.Body); err != nil || got.Len() != 30 || got.Len() != m.Len() {
		t.Fatalf("the record decodes to %d points (%v), want 30", got.Len(), err)
	}
	for i := range got.Len() {
		if got.SeriesID[i] != m.SeriesID[i] || got.Time[i] != m.Time[i] {
			t.Fatalf("point %d differs from the decoded request's", i)
		}
	}
}

// TestConsumeScannedRequests: the consumer queues a scanned request as
// received and counts it in the statistics exactly as the decoded one;
// with rules loaded since the receiver asked, it decodes the body and
// runs them; past an attribute limit it refuses it as the decoded one.
func TestConsumeScannedRequests(t *testing.T) {
	now := time.Now().UnixMilli()
	var series []prompb.TimeSeries
	for i := range 30 {
		series = append(series, prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: fmt.Sprintf("m%d", i%4)},
			{Name: "instance", Value: "h"}, {Name: "job", Value: "j"}, {Name: "n", Value: fmt.Sprint(i)}},
			Samples: []prompb.Sample{{Value: 1, Timestamp: now}}})
	}
	body, _ := (&prompb.WriteRequest{Timeseries: series}).Marshal()
	open := func() (*consumer, *queue.Queue) {
		q, err := queue.Open(queue.Options{Dir: t.TempDir(), SegmentBytes: 64 << 20, MaxBytes: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.Close() })
		c := newConsumer(q, time.Second, newMetrics())
		if c.stats, err = stats.New(stats.Config{}); err != nil {
			t.Fatal(err)
		}
		return c, q
	}
	// The same request, decoded (as before) and scanned.
	dc, _ := open()
	var m signal.Metrics
	if _, err := new(prw.Decoder).DecodeV1(&m, body); err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Consume(context.Background(), &otlpreceiver.Request{Tenant: "acme", Kind: signal.KindMetrics, Body: snappy.Encode(nil, body),
		Transport: "prometheus_remote_write", Metrics: &m, RemoteWrite: 1}); err != nil {
		t.Fatal(err)
	}
	sc, q := open()
	if !sc.TakesScanned() {
		t.Fatal("a consumer without rules does not take scanned requests")
	}
	req, _ := scannedRequest(t, body)
	if _, err := sc.Consume(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if x, y := dc.stats.TSDB("acme", 100), sc.stats.TSDB("acme", 100); !reflect.DeepEqual(x, y) || x.HeadStats.NumSeries != 30 {
		t.Fatalf("statistics differ:\ndecoded %+v\nscanned %+v", x, y)
	}

	// Rules loaded after the receiver asked: the body is decoded and the
	// rule runs.
	hit, err := processor.Parse([]byte("metrics:\n  - {name: hit, match: 'm1', action: drop}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	sc.rules.Store(hit)
	if sc.TakesScanned() {
		t.Fatal("a consumer with rules takes scanned requests")
	}
	req, _ = scannedRequest(t, body)
	if _, err := sc.Consume(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	sc.rules.Store(nil)

	// Past an attribute limit: refused as the decoded request is.
	sc.limits = otlp.Limits{MaxAttrsPerRecord: 2}
	dc.limits = sc.limits
	req, _ = scannedRequest(t, body)
	_, serr := sc.Consume(context.Background(), req)
	m.Reset()
	new(prw.Decoder).DecodeV1(&m, body)
	_, derr := dc.Consume(context.Background(), &otlpreceiver.Request{Tenant: "acme", Kind: signal.KindMetrics, Body: snappy.Encode(nil, body),
		Transport: "prometheus_remote_write", Metrics: &m, RemoteWrite: 1})
	if serr == nil || !errors.Is(serr, otlpreceiver.ErrInvalid) || serr.Error() != fmt.Sprint(derr) || !strings.Contains(serr.Error(), otlp.LimitAttrsPerRecord) {
		t.Fatalf("past the limit: scanned %v, decoded %v", serr, derr)
	}

	r := q.NewReader(0)
	defer r.Close()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	var encs []bodyEnc
	var points []int
	for {
		rec, _, err := r.Next(done)
		if err != nil {
			break
		}
		pr, err := parseRecord(rec)
		if err != nil {
			t.Fatal(err)
		}
		encs = append(encs, pr.Enc)
		if pr.Enc == encPRW1N {
			// The receiver's series count, then the request as received.
			n, raw, err := splitCounted(pr.Body)
			if err != nil || n != 30 || !bytes.Equal(raw, snappy.Encode(nil, body)) {
				t.Fatalf("counted record: %d series (%v), body as received %v", n, err, bytes.Equal(raw, snappy.Encode(nil, body)))
			}
		}
		var got signal.Metrics
		if err := decodeMetricsRecord(&got, pr.Enc, pr.Body); err != nil {
			t.Fatal(err)
		}
		points = append(points, got.Len())
	}
	if fmt.Sprint(encs) != fmt.Sprint([]bodyEnc{encPRW1N, encOTLP}) || fmt.Sprint(points) != "[30 22]" {
		t.Fatalf("records %v of %v points, want [prw1n otlp] of [30 22]", encs, points)
	}
}
