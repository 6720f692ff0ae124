package prwexporter

import (
	"fmt"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/exporter"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/waittest"
)

// TestSendManyRecordsKeepsLabels: one Send of many records (two tenants
// interleaved, a malformed body among them) decodes them into one batch
// whose arena the series' label values alias; every sample must arrive
// with exactly its own labels, none overwritten by a later record.
func TestSendManyRecordsKeepsLabels(t *testing.T) {
	var recs []exporter.Record
	var want []string
	var dec prw.Decoder
	for r := range 40 {
		req := &prompb.WriteRequest{}
		for s := range 25 {
			val := fmt.Sprintf("rec%d-series%d-%s", r, s, strings.Repeat("x", r))
			req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
				Labels:  []prompb.Label{{Name: "__name__", Value: fmt.Sprintf("m_%d", s%3)}, {Name: "id", Value: val}, {Name: "rec", Value: fmt.Sprint(r)}},
				Samples: []prompb.Sample{{Value: float64(r*100 + s), Timestamp: 1_800_000_000_000 + int64(r)}}})
			want = append(want, fmt.Sprintf("__name__=m_%d,id=%s,rec=%d @%d = %d", s%3, val, r, 1_800_000_000_000+int64(r), r*100+s))
		}
		raw, err := req.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var m signal.Metrics
		if _, err := dec.DecodeV1(&m, raw); err != nil {
			t.Fatal(err)
		}
		tenant := []string{"a", "b"}[r/10%2]
		recs = append(recs, exporter.Record{Kind: signal.KindMetrics, Tenant: tenant, Body: otlp.AppendMetricsProto(nil, &m)})
		if r == 17 {
			recs = append(recs, exporter.Record{Kind: signal.KindMetrics, Tenant: tenant, Body: []byte{0x0a, 0xff}})
		}
	}
	st := &refStore{}
	srv := httptest.NewServer(remoteapi.NewWriteHandler(st, remoteapi.MessageTypes{remoteapi.WriteV1MessageType}))
	defer srv.Close()
	exp, err := New(Config{Endpoints: []string{srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Send(waittest.Context(t), recs); err != nil {
		t.Fatal(err)
	}
	sort.Strings(st.lines)
	sort.Strings(want)
	if strings.Join(st.lines, "\n") != strings.Join(want, "\n") {
		n := min(len(st.lines), len(want))
		for i := range n {
			if st.lines[i] != want[i] {
				t.Fatalf("%d lines, want %d; first difference:\n got %s\nwant %s", len(st.lines), len(want), st.lines[i], want[i])
			}
		}
		t.Fatalf("%d lines, want %d", len(st.lines), len(want))
	}
}
