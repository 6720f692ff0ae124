package prwexporter

import (
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/waittest"
)

func v1Record(t *testing.T, tenant string, req *prompb.WriteRequest) exporter.Record {
	t.Helper()
	body, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return exporter.Record{Kind: signal.KindMetrics, Tenant: tenant, Body: snappy.Encode(nil, body), RemoteWrite: 1}
}

// promMetadata is what Prometheus sends every metadata_config.send_interval:
// a 1.0 request with metadata and no series.
func promMetadata() *prompb.WriteRequest {
	return &prompb.WriteRequest{Metadata: []prompb.MetricMetadata{
		{Type: prompb.MetricMetadata_COUNTER, MetricFamilyName: "http_requests", Help: "Requests served."},
		{Type: prompb.MetricMetadata_HISTOGRAM, MetricFamilyName: "rpc_seconds", Help: "RPC latency.", Unit: "seconds"},
	}}
}

func series(name string, extra ...prompb.Label) prompb.TimeSeries {
	return prompb.TimeSeries{
		Labels:  append([]prompb.Label{{Name: "__name__", Value: name}, {Name: "job", Value: "api"}}, extra...),
		Samples: []prompb.Sample{{Value: 1, Timestamp: 1_800_000_000_000}},
	}
}

// A 2.0 exporter relaying a 1.0 sender puts the metadata Prometheus sent in
// requests of their own on the series of later requests, by family (the
// name itself or without _total, _bucket, _sum, _count), per tenant.
func TestMetadataSentApartReachesV2Series(t *testing.T) {
	store, exp := v2ReferenceExporter(t)
	ctx := waittest.Context(t)
	if err := exp.Send(ctx, []exporter.Record{v1Record(t, "acme", promMetadata())}); err != nil {
		t.Fatal(err)
	}
	samples := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		series("http_requests_total"),
		series("rpc_seconds_bucket", prompb.Label{Name: "le", Value: "0.5"}),
		series("rpc_seconds_sum"),
		series("queue_depth"),
	}}
	if err := exp.Send(ctx, []exporter.Record{v1Record(t, "acme", samples), v1Record(t, "other", samples)}); err != nil {
		t.Fatal(err)
	}
	type meta struct {
		typ        writev2.Metadata_MetricType
		help, unit string
	}
	got := map[string]meta{} // tenant/name
	for _, b := range store.bodies {
		var req writev2.Request
		if err := req.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		for _, ts := range req.Timeseries {
			name := ""
			for i := 0; i+1 < len(ts.LabelsRefs); i += 2 {
				if req.Symbols[ts.LabelsRefs[i]] == "__name__" {
					name = req.Symbols[ts.LabelsRefs[i+1]]
				}
			}
			tenant := "acme"
			if _, ok := got["acme/"+name]; ok {
				tenant = "other" // the second record of the call
			}
			got[tenant+"/"+name] = meta{ts.Metadata.Type, req.Symbols[ts.Metadata.HelpRef], req.Symbols[ts.Metadata.UnitRef]}
		}
	}
	want := map[string]meta{
		"acme/http_requests_total": {writev2.Metadata_METRIC_TYPE_COUNTER, "Requests served.", ""},
		"acme/rpc_seconds_bucket":  {writev2.Metadata_METRIC_TYPE_HISTOGRAM, "RPC latency.", "seconds"},
		"acme/rpc_seconds_sum":     {writev2.Metadata_METRIC_TYPE_HISTOGRAM, "RPC latency.", "seconds"},
		"acme/queue_depth":         {},
		// Another tenant's series of the same names: not described by
		// acme's metadata.
		"other/http_requests_total": {},
		"other/rpc_seconds_bucket":  {},
		"other/rpc_seconds_sum":     {},
		"other/queue_depth":         {},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d series, want %d: %v", len(got), len(want), got)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: metadata %+v, want %+v", k, got[k], w)
		}
	}
}

// In shard mode a request of metadata only (what Prometheus sends) goes to
// every endpoint: each holds series of the families it describes.
func TestShardMetadataOnlyToEveryEndpoint(t *testing.T) {
	css, urls := captureServers(t, 3)
	exp, err := New(Config{Endpoints: urls, Protocol: "1.0", Shard: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Send(waittest.Context(t), []exporter.Record{v1Record(t, "acme", promMetadata())}); err != nil {
		t.Fatal(err)
	}
	for k, cs := range css {
		if len(cs.bodies) != 1 {
			t.Fatalf("endpoint %d: %d requests, want 1", k, len(cs.bodies))
		}
		var wr prompb.WriteRequest
		if err := wr.Unmarshal(cs.bodies[0]); err != nil {
			t.Fatal(err)
		}
		if len(wr.Timeseries) != 0 || len(wr.Metadata) != 2 || wr.Metadata[1].String() != promMetadata().Metadata[1].String() {
			t.Fatalf("endpoint %d: %d series, metadata %v", k, len(wr.Timeseries), wr.Metadata)
		}
	}
}
