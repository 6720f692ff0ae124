package prom

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/sluice-dev/sluice/internal/query/prom/promtest"
)

// Series, label names and label values over part of a row group list
// only the series with a point in the range (Prometheus's head answers
// so): a service that stopped before the range and one that starts after
// it share the row group with one inside it; a range over the whole row
// group lists them all.
func TestLabelsOnlyExactRange(t *testing.T) {
	l := newTestLake(t)
	synth := func(svc string, from time.Duration, points int) []byte {
		return promtest.Synth{Start: synthStart.Add(from), Interval: 15 * time.Second, Points: points,
			Services: []string{svc}, Routes: []string{"/a"}, CounterStep: 1}.JSON()
	}
	l.Write(t, "acme", 0, synth("gone", 0, 40), synth("here", 0, 240), synth("later", 50*time.Minute, 20))
	a := adapterOf(t, l)
	ms := func(mint, maxt time.Time) (series, names, values string) {
		t.Helper()
		q, err := a.Queryable("acme", Limits{}).Querier(mint.UnixMilli(), maxt.UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		ctx := context.Background()
		name := labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "test_requests_total")
		ss := q.Select(ctx, true, &storage.SelectHints{Start: mint.UnixMilli(), End: maxt.UnixMilli(), Func: "series"}, name)
		var svcs []string
		for ss.Next() {
			svcs = append(svcs, ss.At().Labels().Get("service_name"))
		}
		if ss.Err() != nil {
			t.Fatal(ss.Err())
		}
		ln, _, err := q.LabelNames(ctx, nil, labels.MustNewMatcher(labels.MatchEqual, "service_name", "gone"))
		if err != nil {
			t.Fatal(err)
		}
		lv, _, err := q.LabelValues(ctx, "service_name", nil, name)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(svcs), fmt.Sprint(ln), fmt.Sprint(lv)
	}
	// 20 to 30 minutes: "gone" stopped at 10, "later" starts at 50.
	s, n, v := ms(synthStart.Add(20*time.Minute), synthStart.Add(30*time.Minute))
	if s != "[here]" || n != "[]" || v != "[here]" {
		t.Errorf("20m-30m: series %s, names of gone %s, values %s; want [here] [] [here]", s, n, v)
	}
	// The edges are inclusive: the range ends on gone's last point.
	s, _, _ = ms(synthStart.Add(39*15*time.Second), synthStart.Add(30*time.Minute))
	if s != "[gone here]" {
		t.Errorf("from gone's last point: series %s", s)
	}
	s, n, v = ms(synthStart.Add(-time.Hour), synthStart.Add(2*time.Hour))
	if s != "[gone here later]" || n != "[__name__ http_route job service_name]" || v != "[gone here later]" {
		t.Errorf("whole range: series %s, names %s, values %s", s, n, v)
	}
}
