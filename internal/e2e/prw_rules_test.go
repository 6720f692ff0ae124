package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/prompb"
)

// TestRemoteWriteRules: the processing rules see remote-write series (the
// consumer takes the receiver's decoded batch instead of decoding the
// queued body again): a drop rule removes a series, a relabel rule
// changes one, and the rest arrives untouched.
func TestRemoteWriteRules(t *testing.T) {
	lakeDir := t.TempDir()
	qaddr := freePort(t)
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte(`metrics:
  - name: drop-debug
    match: '{__name__="rwr_debug"}'
    action: drop
  - name: no-user
    match: '{__name__="rwr_requests_total"}'
    action: relabel
    relabel:
      - {action: labeldrop, regex: 'user_id'}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := freshConfig(t, lakeDir, qaddr)
	f, _ := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	fmt.Fprintf(f, "processors:\n  rules_file: %s\n", rules)
	f.Close()
	startServer(t, cfg)
	base := "http://" + qaddr
	api, err := remoteapi.NewAPI(base, remoteapi.WithAPIPath("api/v1/write"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t0 := time.Now().Add(-5 * time.Minute).Truncate(time.Second).UnixMilli()
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: []prompb.Label{{Name: "__name__", Value: "rwr_requests_total"}, {Name: "job", Value: "a"}, {Name: "user_id", Value: "42"}},
			Samples: []prompb.Sample{{Value: 3, Timestamp: t0}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "rwr_debug"}, {Name: "job", Value: "a"}},
			Samples: []prompb.Sample{{Value: 1, Timestamp: t0}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "rwr_kept"}, {Name: "job", Value: "a"}},
			Samples: []prompb.Sample{{Value: 5, Timestamp: t0}}},
	}}
	if _, err := api.Write(ctx, remoteapi.WriteV1MessageType, req); err != nil {
		t.Fatalf("write: %v", err)
	}
	got := promMatrix(t, base, `{__name__=~"rwr_.*"}`, time.UnixMilli(t0+1000))
	want := map[string]string{`rwr_requests_total map[__name__:rwr_requests_total job:a]`: "3", `rwr_kept map[__name__:rwr_kept job:a]`: "5"}
	if len(got) != len(want) {
		t.Fatalf("got %d series, want %d: %+v", len(got), len(want), got)
	}
	for _, s := range got {
		k := fmt.Sprintf("%s %v", s.Metric["__name__"], s.Metric)
		if v, ok := want[k]; !ok || fmt.Sprint(s.Values[0][1]) != v {
			t.Fatalf("unexpected series %s = %v (want %v)", k, s.Values, want)
		}
	}
}
