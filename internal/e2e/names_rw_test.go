package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

// rwOddNames are metric names that Prometheus's OTLP mapping would change:
// three valid classic names (trailing, leading and double underscores) and
// four UTF-8 ones; "nm ü" and "nm__" would both become "nm".
var rwOddNames = []string{"nm_trailing_", "_nm_leading", "nm__double", "nm.dot", "9nm_digit", "nm ü", "nm__"}

// namesGet GETs path?query from the API and returns its data.
func namesGet(t *testing.T, base, path string, q url.Values, data any) {
	t.Helper()
	resp, err := http.Get(base + path + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var a struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &a); err != nil || a.Status != "success" {
		t.Fatalf("%s?%s: %s (%v)", path, q.Encode(), b, err)
	}
	if err := json.Unmarshal(a.Data, data); err != nil {
		t.Fatalf("%s: %s: %v", path, a.Data, err)
	}
}

// TestRemoteWriteNamesExact sends remote write 1.0 and 2.0 series whose
// metric and label names the OTLP mapping would change to a real `sluice
// run`: the query, series, labels, label values, metadata and exemplar APIs return
// exactly the names sent, "nm ü" and "nm__" stay two series, and a matcher
// on each exact name finds it.
func TestRemoteWriteNamesExact(t *testing.T) {
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

	// The same names by both protocols, told apart by the label proto.
	labelsOf := func(name, proto string) map[string]string {
		return map[string]string{"__name__": name, "l__d": "a", "lbl.dot": "b", "__x": "c", "proto": proto}
	}
	v1 := &prompb.WriteRequest{}
	st := writev2.NewSymbolTable()
	v2 := &writev2.Request{}
	for i, n := range rwOddNames {
		var ls []prompb.Label
		var refs []uint32
		for k, v := range labelsOf(n, "1") {
			ls = append(ls, prompb.Label{Name: k, Value: v})
		}
		for k, v := range labelsOf(n, "2") {
			refs = append(refs, st.Symbolize(k), st.Symbolize(v))
		}
		v1.Timeseries = append(v1.Timeseries, prompb.TimeSeries{Labels: ls, Samples: []prompb.Sample{{Value: float64(i), Timestamp: t0}}})
		v2.Timeseries = append(v2.Timeseries, writev2.TimeSeries{LabelsRefs: refs, Samples: []writev2.Sample{{Value: float64(100 + i), Timestamp: t0}},
			Exemplars: []writev2.Exemplar{{LabelsRefs: []uint32{st.Symbolize("trace_id"), st.Symbolize(fmt.Sprint("t", i))}, Value: float64(100 + i), Timestamp: t0}},
			Metadata:  writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE, HelpRef: st.Symbolize("help of " + n)}})
	}
	v2.Symbols = st.Symbols()
	if _, err := api.Write(ctx, remoteapi.WriteV1MessageType, v1); err != nil {
		t.Fatalf("1.0 write: %v", err)
	}
	if _, err := api.Write(ctx, remoteapi.WriteV2MessageType, v2); err != nil {
		t.Fatalf("2.0 write: %v", err)
	}

	at := time.UnixMilli(t0 + 1000)
	var want []string
	for i, n := range rwOddNames {
		want = append(want, fmt.Sprint(labelsOf(n, "1"), " ", i), fmt.Sprint(labelsOf(n, "2"), " ", 100+i))
	}
	slices.Sort(want)
	var got []string
	for deadline := time.Now().Add(60 * time.Second); ; {
		got = got[:0]
		for _, s := range promMatrix(t, base, `{__name__=~".+"}`, at) {
			got = append(got, fmt.Sprint(s.Metric, " ", s.Values[0][1]))
		}
		slices.Sort(got)
		if slices.Equal(got, want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("series\n got %q\nwant %q", got, want)
	}
	var names []string
	namesGet(t, base, "/api/v1/label/__name__/values", nil, &names)
	if w := slices.Sorted(slices.Values(rwOddNames)); !slices.Equal(names, w) {
		t.Errorf("__name__ values %q, want %q", names, w)
	}
	var lnames []string
	namesGet(t, base, "/api/v1/labels", nil, &lnames)
	if w := []string{"__name__", "__x", "l__d", "lbl.dot", "proto"}; !slices.Equal(lnames, w) {
		t.Errorf("label names %q, want %q", lnames, w)
	}
	var vals []string
	namesGet(t, base, "/api/v1/label/U__lbl_2e_dot/values", nil, &vals)
	if !slices.Equal(vals, []string{"b"}) {
		t.Errorf(`values of "lbl.dot": %q, want ["b"]`, vals)
	}
	md := getMetadata(t, base, "")
	for i, n := range rwOddNames {
		// A matcher on the exact name, in both PromQL spellings, finds its
		// two series and nothing else.
		for _, expr := range []string{fmt.Sprintf(`{%q}`, n), fmt.Sprintf(`{__name__=%q, "lbl.dot"="b"}`, n)} {
			got := promMatrix(t, base, expr, at)
			if len(got) != 2 || fmt.Sprint(got[0].Metric) != fmt.Sprint(labelsOf(n, "1")) || fmt.Sprint(got[1].Metric) != fmt.Sprint(labelsOf(n, "2")) {
				t.Errorf("%s: %v, want its two series", expr, got)
			}
		}
		var series []map[string]string
		namesGet(t, base, "/api/v1/series", url.Values{"match[]": {fmt.Sprintf(`{%q}`, n)}, "start": {fmt.Sprint(t0/1000 - 60)}, "end": {fmt.Sprint(t0/1000 + 60)}}, &series)
		if len(series) != 2 || fmt.Sprint(series) != fmt.Sprint([]map[string]string{labelsOf(n, "1"), labelsOf(n, "2")}) &&
			fmt.Sprint(series) != fmt.Sprint([]map[string]string{labelsOf(n, "2"), labelsOf(n, "1")}) {
			t.Errorf("series of %q: %v", n, series)
		}
		// Its exemplar, on its series.
		ex := queryExemplars(t, base, http.MethodGet, url.Values{"query": {fmt.Sprintf(`{%q}`, n)}, "start": {fmt.Sprint(t0/1000 - 60)}, "end": {fmt.Sprint(t0/1000 + 60)}})
		if len(ex) != 1 || fmt.Sprint(ex[0].SeriesLabels) != fmt.Sprint(labelsOf(n, "2")) || len(ex[0].Exemplars) != 1 ||
			fmt.Sprint(ex[0].Exemplars[0].Labels) != fmt.Sprint(map[string]string{"trace_id": fmt.Sprint("t", i)}) {
			t.Errorf("exemplars of %q: %+v", n, ex)
		}
		if !slices.Contains(md[n], metaEntry{Type: "gauge", Help: "help of " + n}) {
			t.Errorf("metadata of %q: %v", n, md[n])
		}
	}
	for name := range md {
		if !slices.Contains(rwOddNames, name) {
			t.Errorf("metadata names %q, which was not sent", name)
		}
	}
}
