package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

// TestRemoteWrite2MetadataOnlySeries: a remote write 2.0 series with
// metadata and no sample (alone in its request, or beside series with
// samples) is answered 204 and its metadata is served on /api/v1/metadata,
// as 1.0 metadata sent on its own is, while the request's other series
// keep theirs. Before, it was answered 204 and its metadata lost.
func TestRemoteWrite2MetadataOnlySeries(t *testing.T) {
	qaddr := freePort(t)
	startServer(t, freshConfig(t, t.TempDir(), qaddr))
	base := "http://" + qaddr
	api, err := remoteapi.NewAPI(base, remoteapi.WithAPIPath("api/v1/write"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t0 := time.Now().Add(-time.Minute).UnixMilli()
	st := writev2.NewSymbolTable()
	meta := func(name string, typ writev2.Metadata_MetricType, help, unit string) writev2.TimeSeries {
		return writev2.TimeSeries{LabelsRefs: []uint32{st.Symbolize("__name__"), st.Symbolize(name), st.Symbolize("job"), st.Symbolize("mo")},
			Metadata: writev2.Metadata{Type: typ, HelpRef: st.Symbolize(help), UnitRef: st.Symbolize(unit)}}
	}
	alone := &writev2.Request{Timeseries: []writev2.TimeSeries{meta("rwmo_queue_bytes", writev2.Metadata_METRIC_TYPE_GAUGE, "Bytes queued.", "bytes")}}
	alone.Symbols = st.Symbols()
	if _, err := api.Write(ctx, remoteapi.WriteV2MessageType, alone); err != nil {
		t.Fatalf("2.0 write of metadata alone: %v", err)
	}
	st = writev2.NewSymbolTable()
	withSamples := meta("rwmo_served_total", writev2.Metadata_METRIC_TYPE_COUNTER, "Served.", "")
	withSamples.Samples = []writev2.Sample{{Value: 1, Timestamp: t0}}
	mixed := &writev2.Request{Timeseries: []writev2.TimeSeries{
		meta("rwmo_errors_total", writev2.Metadata_METRIC_TYPE_COUNTER, "Errors.", "errors"),
		withSamples,
	}}
	mixed.Symbols = st.Symbols()
	if _, err := api.Write(ctx, remoteapi.WriteV2MessageType, mixed); err != nil {
		t.Fatalf("2.0 write: %v", err)
	}
	want := map[string][]metaEntry{
		"rwmo_queue_bytes":  {{"gauge", "Bytes queued.", "bytes"}},
		"rwmo_errors_total": {{"counter", "Errors.", "errors"}},
		"rwmo_served_total": {{"counter", "Served.", ""}},
	}
	var got map[string][]metaEntry
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		got = getMetadata(t, base, "")
		if fmt.Sprint(got) == fmt.Sprint(want) || time.Now().After(deadline) {
			break
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("/api/v1/metadata:\n got %v\nwant %v", got, want)
	}
}
