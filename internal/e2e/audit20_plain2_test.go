package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

// a20Edge2 are remote write 2.0 requests as odd senders write them: the
// same series twice in one request, duplicate symbols and another symbol
// order for the same series, metadata conflicting within a family and
// across requests, start timestamps, stale markers, and requests with a
// series refused (unsorted labels, an empty value, no __name__) next to
// good ones.
func a20Edge2(t *testing.T, t0 int64) (bodies [][]byte, want []int) {
	t.Helper()
	stale := math.Float64frombits(0x7ff0000000000002)
	gauge, counter := writev2.Metadata_METRIC_TYPE_GAUGE, writev2.Metadata_METRIC_TYPE_COUNTER
	reqs := []struct {
		r    writev2.Request
		code int
	}{
		{writev2.Request{Symbols: []string{"", "__name__", "a20e_up", "instance", "x:1", "job", "a", "up help", "s"},
			Timeseries: []writev2.TimeSeries{{LabelsRefs: []uint32{1, 2, 3, 4, 5, 6}, Samples: []writev2.Sample{{Value: 1, Timestamp: t0}},
				Metadata: writev2.Metadata{Type: gauge, HelpRef: 7, UnitRef: 8}}}}, http.StatusNoContent},
		{writev2.Request{Symbols: []string{"", "__name__", "a20e_up", "instance", "x:1", "job", "a"},
			Timeseries: []writev2.TimeSeries{
				{LabelsRefs: []uint32{1, 2, 3, 4, 5, 6}, Samples: []writev2.Sample{{Value: 2, Timestamp: t0 + 15000}}},
				{LabelsRefs: []uint32{1, 2, 3, 4, 5, 6}, Samples: []writev2.Sample{{Value: 3, Timestamp: t0 + 30000}}},
			}}, http.StatusNoContent},
		{writev2.Request{Symbols: []string{"", "job", "a", "instance", "x:1", "__name__", "a20e_up", "a20e_up", "job", "a", "x:2"},
			Timeseries: []writev2.TimeSeries{
				{LabelsRefs: []uint32{5, 7, 3, 4, 8, 9}, Samples: []writev2.Sample{{Value: 4, Timestamp: t0 + 45000}}},
				{LabelsRefs: []uint32{5, 6, 3, 10, 1, 2}, Samples: []writev2.Sample{{Value: 5, Timestamp: t0 + 45000, StartTimestamp: t0 - 1000}, {Value: stale, Timestamp: t0 + 60000}}},
			}}, http.StatusNoContent},
		{writev2.Request{Symbols: []string{"", "__name__", "a20e_req_total", "a20e_req", "code", "200", "h1", "h2", "bytes"},
			Timeseries: []writev2.TimeSeries{
				{LabelsRefs: []uint32{1, 2, 4, 5}, Samples: []writev2.Sample{{Value: 10, Timestamp: t0}}},
				{LabelsRefs: []uint32{1, 3, 4, 5}, Samples: []writev2.Sample{{Value: 11, Timestamp: t0}}, Metadata: writev2.Metadata{Type: counter, HelpRef: 6, UnitRef: 8}},
				{LabelsRefs: []uint32{1, 2, 4, 5}, Samples: []writev2.Sample{{Value: 12, Timestamp: t0 + 15000}}, Metadata: writev2.Metadata{Type: gauge, HelpRef: 7}},
			}}, http.StatusNoContent},
		{writev2.Request{Symbols: []string{"", "__name__", "a20e_req", "a20e_req_total", "code", "200", "other help"},
			Timeseries: []writev2.TimeSeries{
				{LabelsRefs: []uint32{1, 3, 4, 5}, Samples: []writev2.Sample{{Value: 13, Timestamp: t0 + 30000}}},
				{LabelsRefs: []uint32{1, 2, 4, 5}, Samples: []writev2.Sample{{Value: 14, Timestamp: t0 + 30000}}, Metadata: writev2.Metadata{Type: gauge, HelpRef: 6}},
			}}, http.StatusNoContent},
		{writev2.Request{Symbols: []string{"", "__name__", "a20e_up", "instance", "x:1", "job", "a"},
			Timeseries: []writev2.TimeSeries{
				{LabelsRefs: []uint32{1, 2, 3, 4, 5, 6}, Samples: []writev2.Sample{{Value: 6, Timestamp: t0 + 75000}}},
				{LabelsRefs: []uint32{1, 2, 5, 6, 3, 4}, Samples: []writev2.Sample{{Value: 7, Timestamp: t0 + 90000}}},
			}}, http.StatusNoContent}, // unsorted: sorted, written
		{writev2.Request{Symbols: []string{"", "__name__", "a20e_up", "instance", "x:3", "job", "a"},
			Timeseries: []writev2.TimeSeries{
				{LabelsRefs: []uint32{1, 2, 3, 4, 5, 6}, Samples: []writev2.Sample{{Value: 8, Timestamp: t0 + 105000}}},
				{LabelsRefs: []uint32{1, 2, 3, 0, 5, 6}, Samples: []writev2.Sample{{Value: 9, Timestamp: t0 + 105000}}},
			}}, http.StatusNoContent}, // an empty value: the label dropped
		{writev2.Request{Symbols: []string{"", "__name__", "a20e_up", "instance", "x:1", "job", "a"},
			Timeseries: []writev2.TimeSeries{
				{LabelsRefs: []uint32{1, 2, 3, 4, 5, 6}, Samples: []writev2.Sample{{Value: 15, Timestamp: t0 + 120000}}},
				{LabelsRefs: []uint32{3, 4, 5, 6}, Samples: []writev2.Sample{{Value: 16, Timestamp: t0 + 120000}}},
			}}, http.StatusBadRequest},
		{writev2.Request{Symbols: []string{"", "a", "job", "x:1", "instance", "a20e_up", "__name__"},
			Timeseries: []writev2.TimeSeries{{LabelsRefs: []uint32{6, 5, 4, 3, 2, 1}, Samples: []writev2.Sample{{Value: 17, Timestamp: t0 + 135000}}}}}, http.StatusNoContent},
	}
	for _, q := range reqs {
		b, err := q.r.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		bodies, want = append(bodies, b), append(want, q.code)
	}
	return bodies, want
}

// TestAudit20RemoteWrite2HandoffOnOff (audit20): the same odd remote write
// 2.0 requests (a20Edge2) sent to a sluice with the handoff and the plain
// 2.0 append (lake.handoff_max_bytes default) and to one without the
// handoff get the same answers, and the same series, samples and metadata
// from PromQL and /api/v1/metadata, once committed to the lake and again
// after a restart (read from the lake files alone).
func TestAudit20RemoteWrite2HandoffOnOff(t *testing.T) {
	t0 := time.Now().Add(-20 * time.Minute).Truncate(time.Second).UnixMilli()
	bodies, codes := a20Edge2(t, t0)
	type run struct {
		base, cfg string
		s         *server
	}
	var runs [2]run
	for k, extra := range []string{"", ", handoff_max_bytes: 0"} {
		qaddr := freePort(t)
		cfg := fmt.Sprintf("receivers:\n  otlp: {grpc_addr: 127.0.0.1:0, http_addr: 127.0.0.1:0}\nadmin: {addr: 127.0.0.1:0}\nquery: {addr: %s}\nlake: {root: %s, flush_interval: 1s%s}\nshutdown_timeout: %s\n",
			qaddr, t.TempDir(), extra, runShutdownTimeout)
		p := filepath.Join(t.TempDir(), "sluice.yaml")
		if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		runs[k] = run{base: "http://" + qaddr, cfg: p, s: startServer(t, p)}
	}
	client := &http.Client{Timeout: 30 * time.Second}
	for i, b := range bodies {
		for k := range runs {
			code, msg, err := a20Post(client, runs[k].base, a20CT2, b, "")
			if err != nil || code != codes[i] {
				t.Fatalf("server %d request %d: %d %s %v, want %d", k, i, code, msg, err, codes[i])
			}
		}
	}
	committed := func(s *server) func() bool {
		return func() bool {
			return metricValue(t, s.admin, `sluice_lake_committed_queue_position`) >= metricValue(t, s.admin, `sluice_queue_durable_position`) &&
				metricValue(t, s.admin, `sluice_lake_uncommitted_queue_bytes`) == 0
		}
	}
	answers := func(when string) {
		t.Helper()
		var got [2]string
		for k := range runs {
			m := promMatrix(t, runs[k].base, `{__name__=~"a20e_.*"}[30m]`, time.UnixMilli(t0+10*60000))
			md := getMetadata(t, runs[k].base, "")
			for name := range md {
				if len(name) < 5 || name[:5] != "a20e_" {
					delete(md, name)
				}
			}
			b, _ := json.Marshal(struct {
				M []rwSeries
				D map[string][]metaEntry
			}{m, md})
			got[k] = string(b)
			if len(m) < 4 {
				t.Fatalf("%s: server %d: %d series: %s", when, k, len(m), got[k])
			}
		}
		if got[0] != got[1] {
			t.Fatalf("%s: with the handoff:\n%s\nwithout:\n%s", when, got[0], got[1])
		}
		t.Logf("%s: %s", when, got[0])
	}
	for k := range runs {
		if !waitFor(60*time.Second, committed(runs[k].s)) {
			t.Fatalf("server %d: the lake did not commit in 60s", k)
		}
	}
	if v := metricValue(t, runs[0].s.admin, `sluice_lake_handoff_taken_total`); v == 0 {
		t.Fatal("the handoff took no request: the test does not cover it")
	}
	answers("committed")
	for k := range runs {
		if err := runs[k].s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code, _ := runs[k].s.wait(t, runShutdownTimeout+30*time.Second); code != 0 {
			t.Fatalf("server %d: exit %d\n%s", k, code, runs[k].s.stderr)
		}
		runs[k].s = startServer(t, runs[k].cfg)
	}
	answers("after a restart")
	var want [2]any
	for k := range runs {
		want[k] = promMatrix(t, runs[k].base, `a20e_up[30m]`, time.UnixMilli(t0+10*60000))
	}
	if !reflect.DeepEqual(want[0], want[1]) {
		t.Fatal("a20e_up differs")
	}
}
