package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

// TestRemoteWrite2EmptyMetadataIsNoMetadata: a 2.0 series always carries
// a Metadata message, empty when its sender has nothing to say (writev2's
// Go type, as Prometheus's sender encodes it). Sent once with its type,
// help and unit and later with an empty one, a metric is listed by
// /api/v1/metadata with what it was described as, not also as "unknown";
// a metric only ever sent with empty metadata is "unknown", as one sent
// without any. Both before and after a restart (read from the files).
func TestRemoteWrite2EmptyMetadataIsNoMetadata(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	qaddr := freePort(t)
	cfg := fmt.Sprintf("receivers:\n  otlp: {grpc_addr: 127.0.0.1:0, http_addr: 127.0.0.1:0}\nadmin: {addr: 127.0.0.1:0}\nquery: {addr: %s}\nlake: {root: %s, flush_interval: 1s}\nshutdown_timeout: %s\n",
		qaddr, t.TempDir(), runShutdownTimeout)
	p := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, p)
	base := "http://" + qaddr
	t0 := time.Now().Add(-5 * time.Minute).UnixMilli()
	const ct = "application/x-protobuf;proto=io.prometheus.write.v2.Request"
	send := func(r *writev2.Request) {
		t.Helper()
		pb, err := r.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if code, msg, _ := postRW(t, base, ct, pb, "X-Prometheus-Remote-Write-Version", "2.0.0"); code != http.StatusNoContent {
			t.Fatalf("write: %d %s", code, msg)
		}
	}
	send(&writev2.Request{Symbols: []string{"", "__name__", "em_described", "job", "a", "Described.", "seconds"},
		Timeseries: []writev2.TimeSeries{{LabelsRefs: []uint32{1, 2, 3, 4}, Samples: []writev2.Sample{{Value: 1, Timestamp: t0}},
			Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE, HelpRef: 5, UnitRef: 6}}}})
	send(&writev2.Request{Symbols: []string{"", "__name__", "em_described", "job", "a", "em_bare"},
		Timeseries: []writev2.TimeSeries{
			{LabelsRefs: []uint32{1, 2, 3, 4}, Samples: []writev2.Sample{{Value: 2, Timestamp: t0 + 15000}}},
			{LabelsRefs: []uint32{1, 5, 3, 4}, Samples: []writev2.Sample{{Value: 3, Timestamp: t0 + 15000}}},
		}})
	want := map[string][]metaEntry{
		"em_described": {{"gauge", "Described.", "seconds"}},
		"em_bare":      {{"unknown", "", ""}},
	}
	check := func(when string) {
		t.Helper()
		var got map[string][]metaEntry
		if !waitFor(60*time.Second, func() bool {
			got = getMetadata(t, base, "")
			for name := range got {
				if _, ok := want[name]; !ok {
					delete(got, name)
				}
			}
			return reflect.DeepEqual(got, want)
		}) {
			t.Fatalf("%s: /api/v1/metadata %v, want %v", when, got, want)
		}
	}
	check("live")
	_ = s.cmd.Process.Signal(os.Interrupt)
	if code, _ := s.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("sluice run exited %d:\n%s", code, s.stderr)
	}
	s = startServer(t, p)
	check("after a restart")
}
