package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

const (
	a20CT1 = "application/x-protobuf"
	a20CT2 = "application/x-protobuf;proto=io.prometheus.write.v2.Request"
)

// a20Request is request r of tenant g: remote write 1.0 for even r, 2.0
// for odd r (a 2.0 request described by metadata), series s00..s(n-1) of
// a20_gauge{job="j"} at t0+r*15s with value g*1e6+r*1000+i; every third
// request also has a series without __name__ (refused: 400, the others
// written).
func a20Request(t *testing.T, g, r, n int, t0 int64) (ct string, body []byte, bad bool) {
	t.Helper()
	bad = r%3 == 2
	ts := t0 + int64(r)*15000
	if r%2 == 0 {
		req := &prompb.WriteRequest{}
		for i := range n {
			req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
				Labels:  []prompb.Label{{Name: "__name__", Value: "a20_gauge"}, {Name: "job", Value: "j"}, {Name: "series", Value: fmt.Sprintf("s%02d", i)}},
				Samples: []prompb.Sample{{Value: float64(g*1_000_000 + r*1000 + i), Timestamp: ts}},
			})
		}
		if bad {
			req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
				Labels: []prompb.Label{{Name: "job", Value: "nameless"}}, Samples: []prompb.Sample{{Value: -1, Timestamp: ts}}})
		}
		b, err := req.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return a20CT1, b, bad
	}
	syms := []string{"", "__name__", "a20_gauge", "job", "j", "series", "gauge of the audit", "nameless"}
	req := &writev2.Request{}
	for i := range n {
		syms = append(syms, fmt.Sprintf("s%02d", i))
		req.Timeseries = append(req.Timeseries, writev2.TimeSeries{
			LabelsRefs: []uint32{1, 2, 3, 4, 5, uint32(len(syms) - 1)},
			Samples:    []writev2.Sample{{Value: float64(g*1_000_000 + r*1000 + i), Timestamp: ts}},
			Metadata:   writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE, HelpRef: 6},
		})
	}
	if bad {
		req.Timeseries = append(req.Timeseries, writev2.TimeSeries{LabelsRefs: []uint32{3, 7}, Samples: []writev2.Sample{{Value: -1, Timestamp: ts}}})
	}
	req.Symbols = syms
	b, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return a20CT2, b, bad
}

// a20Query is PromQL expr at at for tenant (X-Scope-OrgID): each series'
// samples as timestamp (ms) -> values (a timestamp twice is two values).
func a20Query(t *testing.T, base, tenant, expr string, at int64) map[string]map[int64][]float64 {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/api/v1/query", nil)
	if err != nil {
		t.Fatal(err)
	}
	q := url.Values{"query": {expr}, "time": {fmt.Sprintf("%.3f", float64(at)/1000)}}
	req.URL.RawQuery = q.Encode()
	req.Header.Set("X-Scope-OrgID", tenant)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a struct {
		Status string `json:"status"`
		Data   struct {
			Result []rwSeries `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &a); err != nil || a.Status != "success" {
		t.Fatalf("%s for %s: %s (%v)", expr, tenant, b, err)
	}
	out := map[string]map[int64][]float64{}
	for _, s := range a.Data.Result {
		if s.Metric["__name__"] != "a20_gauge" || s.Metric["job"] != "j" || len(s.Metric) != 3 {
			t.Fatalf("tenant %s: series %v: not one that was sent", tenant, s.Metric)
		}
		m := map[int64][]float64{}
		for _, v := range s.Values {
			ts, _ := v[0].(float64)
			str, _ := v[1].(string)
			f, err := strconv.ParseFloat(str, 64)
			if err != nil {
				t.Fatalf("tenant %s: value %v", tenant, v)
			}
			ms := int64(ts*1000 + 0.5)
			m[ms] = append(m[ms], f)
		}
		out[s.Metric["series"]] = m
	}
	return out
}

// TestAudit20RemoteWriteTenantsKill (audit20): four remote-write clients of
// four tenants write into one `sluice run` at once, mixing 1.0 and 2.0
// (scanned requests go to the lake through the handoff, lake.handoff_max_bytes
// default), every third request with a series refused (400, the others
// written: such a request takes the decode path), retrying what was not
// acknowledged (connection refused, 5xx) as Prometheus does; sluice is
// SIGKILLed mid-load (half the clients a third through, the others
// sending on through the kill and the restart) and started again. Every sample of every acknowledged
// request is then in the tenant's PromQL answer exactly once, with its
// value (values carry the tenant: a body of another tenant's request, or
// another request's, lent to the wrong record would show), and nothing
// else is (no refused series, no other tenant's); a request retried after
// an unanswered attempt may be there twice (at-least-once), never with
// another value.
func TestAudit20RemoteWriteTenantsKill(t *testing.T) {
	lakeDir := t.TempDir()
	qaddr := freePort(t)
	cfg := fmt.Sprintf(`receivers:
  otlp: {grpc_addr: 127.0.0.1:0, http_addr: 127.0.0.1:0, tenant_header: X-Scope-OrgID}
admin: {addr: 127.0.0.1:0}
query: {addr: %s}
lake: {root: %s, flush_interval: 1s}
shutdown_timeout: %s
`, qaddr, lakeDir, runShutdownTimeout)
	p := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	base := "http://" + qaddr
	const tenants, requests, series = 4, 40, 30
	t0 := time.Now().Add(-20 * time.Minute).Truncate(time.Second).UnixMilli()
	var cur atomic.Pointer[server]
	cur.Store(startServer(t, p))

	var acked atomic.Int64
	retried := make([][]bool, tenants) // a request with an unanswered attempt
	ackedReq := make([][]bool, tenants)
	deadline := time.Now().Add(3 * time.Minute)
	var wg, atGate sync.WaitGroup
	atGate.Add(tenants / 2)
	killed := make(chan struct{})
	errs := make(chan error, tenants)
	client := &http.Client{Timeout: 30 * time.Second}
	for g := range tenants {
		retried[g], ackedReq[g] = make([]bool, requests), make([]bool, requests)
		wg.Add(1)
		go func() {
			defer wg.Done()
			tenant := fmt.Sprintf("tenant-%d", g)
			for r := range requests {
				if r == requests/3 && g%2 == 0 {
					// Half the clients wait here for the kill (so that it
					// is mid-load whatever the machine's speed); the
					// others go on through it.
					atGate.Done()
					<-killed
				}
				ct, body, bad := a20Request(t, g, r, series, t0)
				for {
					if time.Now().After(deadline) {
						errs <- fmt.Errorf("%s request %d: not acknowledged by the deadline", tenant, r)
						return
					}
					code, msg, err := a20Post(client, base, ct, body, tenant)
					if err == nil && (code == http.StatusNoContent || code == http.StatusOK) {
						if bad {
							errs <- fmt.Errorf("%s request %d: a nameless series was accepted", tenant, r)
							return
						}
						break
					}
					if err == nil && code == http.StatusBadRequest {
						if !bad {
							errs <- fmt.Errorf("%s request %d: 400 %s", tenant, r, msg)
							return
						}
						break // the good series were written
					}
					// Unanswered (the kill), refused while starting, or
					// backpressure: sent again, as Prometheus does.
					retried[g][r] = true
					time.Sleep(50 * time.Millisecond)
				}
				ackedReq[g][r] = true
				acked.Add(1)
			}
		}()
	}
	// SIGKILL once the gated clients are a third through.
	gated := make(chan struct{})
	go func() { atGate.Wait(); close(gated) }()
	select {
	case <-gated:
	case <-time.After(120 * time.Second):
		t.Fatalf("only %d requests acknowledged in 120s:\n%s", acked.Load(), cur.Load().stderr)
	}
	s1 := cur.Load()
	if err := s1.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-s1.exited
	killedAt := acked.Load()
	close(killed)
	s2 := startServer(t, p)
	cur.Store(s2)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	committed := func() bool {
		return metricValue(t, s2.admin, `sluice_lake_committed_queue_position`) >= metricValue(t, s2.admin, `sluice_queue_durable_position`) &&
			metricValue(t, s2.admin, `sluice_lake_uncommitted_queue_bytes`) == 0
	}
	if !waitFor(90*time.Second, committed) {
		t.Fatal("the lake did not commit the requests in 90s (lake.flush_interval 1s)")
	}
	taken := metricValue(t, s2.admin, `sluice_lake_handoff_taken_total`)
	if taken == 0 {
		t.Fatal("sluice_lake_handoff_taken_total = 0 after the restart: the handoff was not exercised")
	}
	nretried, dups := 0, 0
	for g := range tenants {
		tenant := fmt.Sprintf("tenant-%d", g)
		got := a20Query(t, base, tenant, `a20_gauge[30m]`, t0+requests*15000)
		if len(got) != series {
			t.Fatalf("%s: %d series, want %d", tenant, len(got), series)
		}
		for i := range series {
			s := got[fmt.Sprintf("s%02d", i)]
			if len(s) != requests {
				t.Fatalf("%s series s%02d: %d timestamps, want %d", tenant, i, len(s), requests)
			}
			for r := range requests {
				vs := s[t0+int64(r)*15000]
				want := float64(g*1_000_000 + r*1000 + i)
				if len(vs) == 0 {
					t.Fatalf("%s series s%02d request %d (acknowledged %v): missing", tenant, i, r, ackedReq[g][r])
				}
				for _, v := range vs {
					if v != want {
						t.Fatalf("%s series s%02d request %d: value %v, want %v (another request's or tenant's body)", tenant, i, r, v, want)
					}
				}
				if len(vs) > 1 {
					if !retried[g][r] {
						t.Fatalf("%s series s%02d request %d: %d times, sent once", tenant, i, r, len(vs))
					}
					dups++
				}
			}
		}
		for r := range requests {
			if retried[g][r] {
				nretried++
			}
		}
	}
	t.Logf("acknowledged %d before the kill, %d requests retried, %d samples of retried requests twice, handoff taken after restart %v",
		killedAt, nretried, dups, taken)
}

func a20Post(c *http.Client, base, ct string, pb []byte, tenant string) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, base+"/api/v1/write", bytesReaderSnappy(pb))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", ct)
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("X-Scope-OrgID", tenant)
	if ct == a20CT2 {
		req.Header.Set("X-Prometheus-Remote-Write-Version", "2.0.0")
	} else {
		req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func bytesReaderSnappy(pb []byte) io.Reader { return bytes.NewReader(snappy.Encode(nil, pb)) }
