package stats

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/prompb"
)

// TestRemoteWriteNamesExact: remote-write metrics and labels are counted
// under exactly the names they were sent with, as the query API shows
// them (names outside Prometheus's classic form, double and edge
// underscores, dots, a leading digit), through the decoded batch and the
// scan alike; an OTLP metric of the same stored name is still named the
// OTLP way, and is a metric and series of its own.
func TestRemoteWriteNamesExact(t *testing.T) {
	names := []string{"nm__double", "nm_trailing_", "_nm_leading", "nm.dot", "9nm_digit", "nm ü", "nm__"}
	a, c := newTest(t, Config{})
	b, _ := newTest(t, Config{})
	req := &prompb.WriteRequest{}
	for _, n := range names {
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
			Labels:  []prompb.Label{{Name: "__name__", Value: n}, {Name: "l__d", Value: "1"}, {Name: "lbl.dot", Value: "2"}},
			Samples: []prompb.Sample{{Value: 1, Timestamp: c.t.UnixMilli()}},
		})
	}
	body, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	observeBoth(t, a, b, "t", body)
	for _, s := range []*Stats{a, b} {
		st := s.TSDB("t", 100)
		var got []string
		for _, m := range st.SeriesCountByMetricName {
			got = append(got, fmt.Sprintf("%s:%d", m.Name, m.Value))
		}
		for _, n := range names {
			if !strings.Contains(" "+strings.Join(got, " ")+" ", " "+n+":1 ") {
				t.Errorf("metric %q not counted exactly: %v", n, got)
			}
		}
		if got, want := stats(st.LabelValueCountByLabelName...), "__name__:7 l__d:1 lbl.dot:1"; got != want {
			t.Errorf("label names %s, want %s", got, want)
		}
	}
	if x, y := a.TSDB("t", 100), b.TSDB("t", 100); !reflect.DeepEqual(x, y) {
		t.Fatalf("TSDB differs:\nbatch %+v\nscan  %+v", x, y)
	}

	// An OTLP gauge stored as "nm.dot" with an attribute "lbl.dot": named
	// the OTLP way, apart from the remote-write one.
	a.Observe("t", decode(t, fmt.Sprintf(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"nm.dot","gauge":{"dataPoints":[
		{"timeUnixNano":"%d","asDouble":1,"attributes":[{"key":"lbl.dot","value":{"stringValue":"2"}}]}]}}]}]}]}`, c.t.UnixNano())), 100)
	st := a.TSDB("t", 100)
	if st.HeadStats.NumSeries != uint64(len(names))+1 {
		t.Errorf("%d series, want %d", st.HeadStats.NumSeries, len(names)+1)
	}
	if got := stats(st.SeriesCountByMetricName...); !strings.Contains(got, "nm_dot:1") || !strings.Contains(got, "nm.dot:1") {
		t.Errorf("by metric %s: want nm.dot (remote write) and nm_dot (OTLP)", got)
	}
	if got := stats(st.LabelValueCountByLabelName...); !strings.Contains(got, "lbl_dot:1") || !strings.Contains(got, "lbl.dot:1") {
		t.Errorf("label names %s: want lbl.dot (remote write) and lbl_dot (OTLP)", got)
	}
}
