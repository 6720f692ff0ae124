package e2e

import (
	"math"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
)

// TestGovOTLPInvalidHistogramPartialSuccess: a histogram point of a shape
// OTLP forbids is dropped alone, and the sender gets a partial success
// naming it, as the OTLP specification asks (the Collector logs it and
// does not retry); the request's other points are stored. A histogram
// whose count disagrees with its buckets is stored with a warning (a
// partial success rejecting nothing). A request of nothing but bad points
// is still a 400 (TestOTLPSpecHostile).
func TestGovOTLPInvalidHistogramPartialSuccess(t *testing.T) {
	lakeDir, qaddr := t.TempDir(), freePort(t)
	s := startServer(t, freshConfig(t, lakeDir, qaddr))
	now := time.Now().Add(-time.Minute).Truncate(time.Second)
	md := pmetric.NewMetrics()
	sm := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty()
	g := sm.Metrics().AppendEmpty()
	g.SetName("gov_ok")
	gp := g.SetEmptyGauge().DataPoints().AppendEmpty()
	gp.SetTimestamp(pcommon.NewTimestampFromTime(now))
	gp.SetDoubleValue(7)
	hist := func(name string, count uint64, counts []uint64, bounds []float64) {
		m := sm.Metrics().AppendEmpty()
		m.SetName(name)
		h := m.SetEmptyHistogram()
		h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		dp := h.DataPoints().AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(now))
		dp.BucketCounts().FromRaw(counts)
		dp.ExplicitBounds().FromRaw(bounds)
		dp.SetCount(count)
		dp.SetSum(1)
	}
	hist("gov_good_h", 6, []uint64{1, 2, 3}, []float64{1, 2})
	hist("gov_bad_h", 3, []uint64{1, 2}, []float64{1, 2})             // 2 counts for 2 bounds
	hist("gov_nan_h", 6, []uint64{1, 2, 3}, []float64{1, math.NaN()}) // a NaN bound
	hist("gov_mis_h", 10, []uint64{1, 2, 3}, []float64{1, 2})         // count 10, buckets 6
	body, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	code, ans := otlpPost(t, s.http, "", "/v1/metrics", "application/x-protobuf", body)
	if code != 200 {
		t.Fatalf("a request with two bad histogram points among good ones: %d %q, want 200", code, ans)
	}
	resp := pmetricotlp.NewExportResponse()
	if err := resp.UnmarshalProto([]byte(ans)); err != nil {
		t.Fatal(err)
	}
	ps := resp.PartialSuccess()
	for _, want := range []string{`2 histogram data points are invalid`, `metric "gov_bad_h": 2 bucket_counts for 2 explicit_bounds`,
		`metric "gov_mis_h": count 10 disagrees with its buckets (sum 6)`} {
		if !strings.Contains(ps.ErrorMessage(), want) {
			t.Errorf("partial success message %q lacks %q", ps.ErrorMessage(), want)
		}
	}
	if ps.RejectedDataPoints() != 2 {
		t.Errorf("rejected_data_points %d, want 2 (gov_bad_h, gov_nan_h)", ps.RejectedDataPoints())
	}
	for series, want := range map[string]float64{
		`sluice_pipeline_rejected_records_total{reason="invalid",signal="metrics",tenant="default"}`: 2,
		`sluice_pipeline_bucket_count_mismatch_points_total{signal="metrics",tenant="default"}`:      1,
		`sluice_pipeline_received_records_total{signal="metrics",tenant="default"}`:                  5,
		`sluice_pipeline_accepted_records_total{signal="metrics",tenant="default"}`:                  3,
	} {
		if got := metricValue(t, s.admin, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	// The good points, the mismatched histogram among them, are stored.
	base := "http://" + qaddr
	for _, q := range []string{`gov_ok`, `gov_good_h_count`, `gov_mis_h_count`} {
		if !waitFor(30*time.Second, func() bool { return len(promMatrix(t, base, q+`[5m]`, time.Now())) == 1 }) {
			t.Fatalf("%s is not stored", q)
		}
	}
	for _, q := range []string{`gov_bad_h_count`, `gov_nan_h_count`} {
		if got := promMatrix(t, base, q+`[5m]`, time.Now()); len(got) != 0 {
			t.Errorf("%s stored: %v", q, got)
		}
	}
}
