package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

type exemplarAnswer []struct {
	SeriesLabels map[string]string `json:"seriesLabels"`
	Exemplars    []struct {
		Labels    map[string]string `json:"labels"`
		Value     string            `json:"value"`
		Timestamp float64           `json:"timestamp"`
	} `json:"exemplars"`
}

func queryExemplars(t *testing.T, base, method string, form url.Values) exemplarAnswer {
	t.Helper()
	var resp *http.Response
	var err error
	if method == http.MethodPost {
		resp, err = http.PostForm(base+"/api/v1/query_exemplars", form)
	} else {
		resp, err = http.Get(base + "/api/v1/query_exemplars?" + form.Encode())
	}
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a struct {
		Status string         `json:"status"`
		Data   exemplarAnswer `json:"data"`
	}
	if err := json.Unmarshal(b, &a); err != nil || a.Status != "success" {
		t.Fatalf("query_exemplars %v: %d %s (%v)", form, resp.StatusCode, b, err)
	}
	return a.Data
}

// TestRemoteWriteExemplars: a real remote-write 2.0 request (the reference
// client) carrying exemplars into `sluice run`, then
// /api/v1/query_exemplars answers, in Prometheus's format, exactly the
// exemplars of the selected series within the time range.
func TestRemoteWriteExemplars(t *testing.T) {
	lakeDir := t.TempDir()
	qaddr := freePort(t)
	startServer(t, freshConfig(t, lakeDir, qaddr))
	base := "http://" + qaddr
	api, err := remoteapi.NewAPI(base, remoteapi.WithAPIPath("api/v1/write"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t0 := time.Now().Add(-10 * time.Minute).Truncate(time.Second).UnixMilli()
	st := writev2.NewSymbolTable()
	ref := func(s ...string) []uint32 {
		var out []uint32
		for _, x := range s {
			out = append(out, st.Symbolize(x))
		}
		return out
	}
	v2 := &writev2.Request{Timeseries: []writev2.TimeSeries{
		{
			LabelsRefs: ref("__name__", "rwx_requests_total", "job", "x", "code", "200"),
			Samples:    []writev2.Sample{{Value: 1, Timestamp: t0}, {Value: 4, Timestamp: t0 + 15000}},
			Exemplars: []writev2.Exemplar{
				{LabelsRefs: ref("trace_id", "abc123"), Value: 1, Timestamp: t0},
				{LabelsRefs: ref("trace_id", "def456", "span_id", "0102"), Value: 2.5, Timestamp: t0 + 15000},
			},
		},
		{
			LabelsRefs: ref("__name__", "rwx_other", "job", "x"),
			Samples:    []writev2.Sample{{Value: 7, Timestamp: t0 + 60000}},
			Exemplars:  []writev2.Exemplar{{LabelsRefs: ref("trace_id", "zzz"), Value: 7, Timestamp: t0 + 60000}},
		},
		{
			LabelsRefs: ref("__name__", "rwx_requests_total", "job", "y", "code", "500"),
			Samples:    []writev2.Sample{{Value: 2, Timestamp: t0}},
		},
	}}
	v2.Symbols = st.Symbols()
	stats, err := api.Write(ctx, remoteapi.WriteV2MessageType, v2)
	if err != nil {
		t.Fatalf("2.0 write: %v", err)
	}
	if stats.Exemplars != 3 {
		t.Fatalf("written stats %+v, want 3 exemplars", stats)
	}
	sec := func(ms int64) string { return fmt.Sprintf("%.3f", float64(ms)/1000) }

	got := queryExemplars(t, base, http.MethodGet, url.Values{"query": {`rwx_requests_total`}, "start": {sec(t0 - 1000)}, "end": {sec(t0 + 30000)}})
	if len(got) != 1 {
		t.Fatalf("want exactly the one series with exemplars, got %+v", got)
	}
	s := got[0]
	if fmt.Sprint(s.SeriesLabels) != fmt.Sprint(map[string]string{"__name__": "rwx_requests_total", "job": "x", "code": "200"}) {
		t.Fatalf("seriesLabels %v", s.SeriesLabels)
	}
	if len(s.Exemplars) != 2 {
		t.Fatalf("want 2 exemplars, got %+v", s.Exemplars)
	}
	e0, e1 := s.Exemplars[0], s.Exemplars[1]
	if e0.Value != "1" || e0.Timestamp != float64(t0)/1000 || fmt.Sprint(e0.Labels) != "map[trace_id:abc123]" {
		t.Fatalf("first exemplar %+v", e0)
	}
	if e1.Value != "2.5" || e1.Timestamp != float64(t0+15000)/1000 || fmt.Sprint(e1.Labels) != "map[span_id:0102 trace_id:def456]" {
		t.Fatalf("second exemplar %+v", e1)
	}

	// The time range cuts: only the second exemplar is in [t0+1s, t0+30s].
	got = queryExemplars(t, base, http.MethodPost, url.Values{"query": {`rwx_requests_total{job="x"}`}, "start": {sec(t0 + 1000)}, "end": {sec(t0 + 30000)}})
	if len(got) != 1 || len(got[0].Exemplars) != 1 || got[0].Exemplars[0].Value != "2.5" {
		t.Fatalf("time range [t0+1s, t0+30s]: %+v", got)
	}
	// Every selector of an expression counts, as in Prometheus.
	got = queryExemplars(t, base, http.MethodPost, url.Values{"query": {`sum(rate(rwx_requests_total[5m])) + on() rwx_other`}, "start": {sec(t0 - 1000)}, "end": {sec(t0 + 120000)}})
	var names []string
	for _, s := range got {
		names = append(names, s.SeriesLabels["__name__"]+"/"+s.SeriesLabels["job"])
	}
	if strings.Join(names, ",") != "rwx_other/x,rwx_requests_total/x" {
		t.Fatalf("series with exemplars of a two-selector expression: %v", names)
	}
	// A selector whose series carry none: an empty list, not an error.
	if got := queryExemplars(t, base, http.MethodGet, url.Values{"query": {`rwx_requests_total{job="y"}`}}); len(got) != 0 {
		t.Fatalf("job=y has no exemplars: %+v", got)
	}
}
