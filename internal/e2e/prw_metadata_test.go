package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

type metaEntry struct{ Type, Help, Unit string }

// getMetadata reads /api/v1/metadata (with query, e.g. "?metric=x").
func getMetadata(t *testing.T, base, query string) map[string][]metaEntry {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/metadata" + query)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var a struct {
		Status string                         `json:"status"`
		Data   map[string][]map[string]string `json:"data"`
	}
	if err := json.Unmarshal(b, &a); err != nil || a.Status != "success" {
		t.Fatalf("metadata%s: %s (%v)", query, b, err)
	}
	out := map[string][]metaEntry{}
	for name, es := range a.Data {
		for _, e := range es {
			out[name] = append(out[name], metaEntry{e["type"], e["help"], e["unit"]})
		}
	}
	return out
}

// TestRemoteWriteMetadataOnItsOwn sends remote write 1.0 metadata in a
// request without series, as Prometheus sends it, then the families'
// series in requests without metadata, to a real `sluice run`:
// /api/v1/metadata reports every family with the type, help and unit
// sent, and no family's series as "unknown"; the metadata outlives a
// restart (it is in the catalog), an unchanged resend writes nothing, and
// an entry without a family name is counted, not kept.
func TestRemoteWriteMetadataOnItsOwn(t *testing.T) {
	lakeDir := t.TempDir()
	qaddr := freePort(t)
	cfg := freshConfig(t, lakeDir, qaddr)
	s := startServer(t, cfg)
	base := "http://" + qaddr
	api, err := remoteapi.NewAPI(base, remoteapi.WithAPIPath("api/v1/write"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	meta := &prompb.WriteRequest{Metadata: []prompb.MetricMetadata{
		{Type: prompb.MetricMetadata_COUNTER, MetricFamilyName: "sep_jobs_total", Help: "Jobs run."},
		{Type: prompb.MetricMetadata_HISTOGRAM, MetricFamilyName: "sep_latency_seconds", Help: "Latency.", Unit: "seconds"},
		{Type: prompb.MetricMetadata_GAUGE, MetricFamilyName: "sep_heap_bytes", Help: "Heap in use.", Unit: "bytes"},
		{Type: prompb.MetricMetadata_GAUGE, Help: "no family name"},
	}}
	// The entry without a family name makes it a partial write: 400,
	// the other entries kept.
	if _, err := api.Write(ctx, remoteapi.WriteV1MessageType, meta); err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "no metric_family_name") {
		t.Fatalf("metadata-only write with an entry without a name: %v, want a 400 naming it", err)
	}
	meta.Metadata = meta.Metadata[:3]
	t0 := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
	ts := func(v float64, lbls ...string) prompb.TimeSeries {
		var l []prompb.Label
		for i := 0; i < len(lbls); i += 2 {
			l = append(l, prompb.Label{Name: lbls[i], Value: lbls[i+1]})
		}
		return prompb.TimeSeries{Labels: l, Samples: []prompb.Sample{{Value: v, Timestamp: t0}}}
	}
	series := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		ts(1, "__name__", "sep_heap_bytes", "job", "j"),
		ts(2, "__name__", "sep_jobs_total", "job", "j"),
		ts(3, "__name__", "sep_latency_seconds_bucket", "job", "j", "le", "+Inf"),
		ts(4, "__name__", "sep_latency_seconds_count", "job", "j"),
		ts(5, "__name__", "sep_latency_seconds_sum", "job", "j"),
		ts(6, "__name__", "sep_other", "job", "j"),
	}}
	if _, err := api.Write(ctx, remoteapi.WriteV1MessageType, series); err != nil {
		t.Fatalf("series write: %v", err)
	}
	want := map[string][]metaEntry{
		"sep_heap_bytes":      {{"gauge", "Heap in use.", "bytes"}},
		"sep_jobs_total":      {{"counter", "Jobs run.", ""}},
		"sep_latency_seconds": {{"histogram", "Latency.", "seconds"}},
		"sep_other":           {{"unknown", "", ""}},
	}
	waitMetadata := func(when string) {
		t.Helper()
		var got map[string][]metaEntry
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			got = getMetadata(t, base, "")
			if fmt.Sprint(got) == fmt.Sprint(want) || time.Now().After(deadline) {
				break
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: metadata\n got %v\nwant %v", when, got, want)
		}
		if got, w := getMetadata(t, base, "?metric=sep_latency_seconds"), want["sep_latency_seconds"]; !slices.Equal(got["sep_latency_seconds"], w) || len(got) != 1 {
			t.Fatalf("%s: ?metric=sep_latency_seconds: %v", when, got)
		}
	}
	waitMetadata("after the writes")
	const counter = `sluice_prw_metadata_families_total{result="%s"}`
	for result, n := range map[string]float64{"stored": 3, "invalid": 1, "unchanged": 0} {
		if v := metricValue(t, s.admin, fmt.Sprintf(counter, result)); v != n {
			t.Errorf("%s: %v, want %v", result, v, n)
		}
	}
	// Prometheus resends the same metadata every minute: nothing changes.
	if _, err := api.Write(ctx, remoteapi.WriteV1MessageType, meta); err != nil {
		t.Fatal(err)
	}
	if v := metricValue(t, s.admin, fmt.Sprintf(counter, "unchanged")); v != 3 {
		t.Errorf("unchanged after a resend: %v, want 3", v)
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, _ := s.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM\n%s", code, s.stderr)
	}
	startServer(t, cfg)
	waitMetadata("after a restart")
}

// TestPrometheusMetadataToSluice runs Debian's real Prometheus scraping
// itself and remote-writing to `sluice run` with its metadata sent every
// second (on its own, as Prometheus sends it): every family Prometheus's
// own /api/v1/metadata lists, sluice lists with the same type, help and
// unit, and none of those families' series reads as "unknown".
func TestPrometheusMetadataToSluice(t *testing.T) {
	lakeDir := t.TempDir()
	qaddr := freePort(t)
	startServer(t, freshConfig(t, lakeDir, qaddr))
	paddr := freePort(t)
	pbase, stderr := startPrometheus(t, paddr, selfScrapeConfig(paddr, qaddr, "    metadata_config: {send: true, send_interval: 1s}\n"))
	sbase := "http://" + qaddr
	var pm map[string][]metaEntry
	for start := time.Now(); len(pm) < 20; time.Sleep(500 * time.Millisecond) {
		if time.Since(start) > 60*time.Second {
			t.Fatalf("prometheus lists %d metadata families:\n%s", len(pm), stderr)
		}
		pm = getMetadata(t, pbase, "")
	}
	var missing []string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		sm := getMetadata(t, sbase, "")
		missing = missing[:0]
		for name, es := range pm {
			if !slices.Contains(sm[name], es[0]) {
				missing = append(missing, fmt.Sprintf("%s: prometheus %v, sluice %v", name, es, sm[name]))
			}
		}
		if len(missing) == 0 {
			// No series of a family Prometheus describes reads as unknown.
			for name, es := range sm {
				if len(es) == 1 && es[0].Type == "unknown" {
					for _, f := range []string{name, trimAny(name, "_total", "_bucket", "_sum", "_count")} {
						if _, ok := pm[f]; ok {
							t.Errorf("%s: unknown in sluice, %v in prometheus", name, pm[f])
						}
					}
				}
			}
			t.Logf("%d families agree", len(pm))
			return
		}
		if time.Now().After(deadline) {
			break
		}
	}
	slices.Sort(missing)
	t.Fatalf("%d of %d families differ, e.g. %v\n%s", len(missing), len(pm), missing[:min(5, len(missing))], stderr)
}

// v2MetaStore keeps, per series name, the metadata of the 2.0 series the
// reference handler got.
type v2MetaStore struct {
	mu   sync.Mutex
	meta map[string]writev2.Metadata
	syms map[string][]string
}

func (s *v2MetaStore) Store(r *http.Request, _ remoteapi.WriteMessageType) (*remoteapi.WriteResponse, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	var req writev2.Request
	if err := req.Unmarshal(b); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.syms == nil {
		s.syms = map[string][]string{}
	}
	for _, ts := range req.Timeseries {
		for i := 0; i+1 < len(ts.LabelsRefs); i += 2 {
			if req.Symbols[ts.LabelsRefs[i]] == "__name__" {
				name := req.Symbols[ts.LabelsRefs[i+1]]
				s.meta[name] = ts.Metadata
				s.syms[name] = []string{req.Symbols[ts.Metadata.HelpRef], req.Symbols[ts.Metadata.UnitRef]}
			}
		}
	}
	return remoteapi.NewWriteResponse(), nil
}

// got returns "TYPE help unit" per series name.
func (s *v2MetaStore) got() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for name, md := range s.meta {
		out[name] = md.Type.String() + " " + s.syms[name][0] + " " + s.syms[name][1]
	}
	return out
}

func trimAny(s string, suffixes ...string) string {
	for _, suf := range suffixes {
		if n := len(s) - len(suf); n > 0 && s[n:] == suf {
			return s[:n]
		}
	}
	return s
}

// TestRelayForwardsMetadata: a `sluice run` with a lake, a remote write
// 1.0 exporter and an OTLP exporter, both into a second sluice, and a
// remote write 2.0 exporter into the reference 2.0 handler, gets metadata
// sent without series, then the series: the downstream sluice serves the
// metadata (forwarded as received, as a request of its own) and both
// series (sent twice: over remote write and over OTLP, which name them
// alike); the relay serves the metadata too, writes its series into its
// lake with no record quarantined, and its OTLP exporter, which cannot
// carry metadata without series, skips the record instead of sending an
// empty request. The 2.0 handler gets each series with its family's
// metadata on it, as Prometheus's own 2.0 sender sends it.
func TestRelayForwardsMetadata(t *testing.T) {
	downLake := t.TempDir()
	downQuery := freePort(t)
	down := startServer(t, freshConfig(t, downLake, downQuery))

	v2 := &v2MetaStore{meta: map[string]writev2.Metadata{}}
	v2srv := httptest.NewServer(remoteapi.NewWriteHandler(v2, remoteapi.MessageTypes{remoteapi.WriteV2MessageType}))
	defer v2srv.Close()

	dir := t.TempDir()
	relayQuery := freePort(t)
	cfg := writeConfig(t, fmt.Sprintf(`receivers:
  otlp: {grpc_addr: 127.0.0.1:0, http_addr: 127.0.0.1:0}
admin: {addr: 127.0.0.1:0}
query: {addr: %s}
lake: {root: %s}
exporters:
  prometheus_remote_write/down:
    endpoints: [http://%s/api/v1/write]
    batch_delay: 20ms
  prometheus_remote_write/v2:
    endpoints: [%s]
    protocol: "2.0"
    batch_delay: 20ms
  otlp/down:
    endpoints: [http://%s]
    batch_delay: 20ms
pipelines:
  metrics: {receivers: [prometheus_remote_write], exporters: [lake, prometheus_remote_write/down, prometheus_remote_write/v2, otlp/down]}
shutdown_timeout: %s
`, relayQuery, filepath.Join(dir, "lake"), downQuery, v2srv.URL, down.http, runShutdownTimeout))
	relay := startServer(t, cfg)
	api, err := remoteapi.NewAPI("http://"+relayQuery, remoteapi.WithAPIPath("api/v1/write"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	meta := &prompb.WriteRequest{Metadata: []prompb.MetricMetadata{
		{Type: prompb.MetricMetadata_COUNTER, MetricFamilyName: "fwm_jobs_total", Help: "Jobs run."},
		{Type: prompb.MetricMetadata_GAUGE, MetricFamilyName: "fwm_heap_bytes", Help: "Heap in use.", Unit: "bytes"},
	}}
	if _, err := api.Write(ctx, remoteapi.WriteV1MessageType, meta); err != nil {
		t.Fatalf("metadata-only write: %v", err)
	}
	t0 := time.Now().Add(-10 * time.Minute).Truncate(time.Second).UnixMilli()
	series := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: []prompb.Label{{Name: "__name__", Value: "fwm_jobs_total"}, {Name: "job", Value: "j"}}, Samples: []prompb.Sample{{Value: 7, Timestamp: t0}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "fwm_heap_bytes"}, {Name: "job", Value: "j"}}, Samples: []prompb.Sample{{Value: 9, Timestamp: t0}}},
	}}
	if _, err := api.Write(ctx, remoteapi.WriteV1MessageType, series); err != nil {
		t.Fatalf("series write: %v", err)
	}
	want := map[string][]metaEntry{
		"fwm_heap_bytes": {{"gauge", "Heap in use.", "bytes"}},
		"fwm_jobs_total": {{"counter", "Jobs run.", ""}},
	}
	at := time.UnixMilli(t0 + 1000)
	for _, base := range []string{"http://" + downQuery, "http://" + relayQuery} {
		var got map[string][]metaEntry
		var n float64
		ok := waitFor(60*time.Second, func() bool {
			got = getMetadata(t, base, "")
			n = queryCount(t, base, "", `count({__name__=~"fwm_.*"})`, at)
			return fmt.Sprint(got) == fmt.Sprint(want) && n == 2
		})
		if !ok {
			t.Fatalf("%s: metadata %v, %v series; want %v", base, got, n, want)
		}
	}
	wantV2 := map[string]string{
		"fwm_jobs_total": "METRIC_TYPE_COUNTER Jobs run. ",
		"fwm_heap_bytes": "METRIC_TYPE_GAUGE Heap in use. bytes",
	}
	var gotV2 map[string]string
	if !waitFor(60*time.Second, func() bool { gotV2 = v2.got(); return fmt.Sprint(gotV2) == fmt.Sprint(wantV2) }) {
		t.Fatalf("2.0 endpoint: series metadata %q, want %q", gotV2, wantV2)
	}
	if v := metricValue(t, relay.admin, "sluice_lake_bad_records_total"); v != 0 {
		t.Fatalf("relay quarantined %v records", v)
	}
	if v := metricValue(t, relay.admin, `sluice_exporter_skipped_records_total{exporter="otlp/down"}`); v < 1 {
		t.Fatalf("the OTLP exporter skipped %v records, want the metadata record", v)
	}
}
