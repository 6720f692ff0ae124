package prom

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// TestOverflowLabels: point attributes a file keeps in attr_overflow (past
// lake.max_attribute_columns) are series labels like column attributes:
// the series stay apart and label matchers select them.
func TestOverflowLabels(t *testing.T) {
	l := newTestLake(t)
	ts := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var pts []string
	for i, h := range []string{"h1", "h2", "h3"} {
		pts = append(pts, fmt.Sprintf(`{"timeUnixNano":"%d","asDouble":%d,"attributes":[
			{"key":"dc","value":{"stringValue":"x"}},{"key":"host","value":{"stringValue":"%s"}},
			{"key":"cpu","value":{"intValue":"%d"}},{"key":"up","value":{"boolValue":true}}]}`, ts.UnixNano(), i+1, h, i))
	}
	js := `{"resourceMetrics":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]},
		"scopeMetrics":[{"metrics":[{"name":"temp","gauge":{"dataPoints":[` + strings.Join(pts, ",") + `]}}]}]}]}`
	var m signal.Metrics
	if err := otlp.DecodeMetricsJSON(&m, []byte(js)); err != nil {
		t.Fatal(err)
	}
	w, err := lake.NewWriter(lake.Options{Root: l.Root, Store: l.Store, MaxAttributeColumns: 1, MaxFutureSkew: 100 * 365 * 24 * time.Hour},
		func(seg lake.Segment) error { return l.Catalog.AddSegments(context.Background(), seg.CatalogRow()) })
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMetrics("acme", &m); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	q := adapterOf(t, l).Queryable("acme", Limits{})
	at := ts.Add(time.Second)
	if v := instant(t, q, `count(temp)`, at); len(v) != 1 || v[0].F != 3 {
		t.Fatalf("count(temp) = %v, want 3 series", v)
	}
	v := instant(t, q, `temp{host="h2", cpu="1", up="true", dc="x"}`, at)
	if len(v) != 1 || v[0].F != 2 {
		t.Fatalf(`temp{host="h2",...} = %v, want the one series with value 2`, v)
	}
	if got := v[0].Metric.Get("host"); got != "h2" {
		t.Errorf("labels %v", v[0].Metric)
	}
}
