package stats

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
)

// rwBody is a remote write 1.0 request of n series (names cycling over 7
// metrics, some labels named as sluice's own: job, instance, le,
// service_name) at time ms, one sample each.
func rwBody(t testing.TB, n, shift int, ms int64) []byte {
	t.Helper()
	return rwBodySamples(t, n, shift, ms, 1)
}

// rwBodySamples is rwBody with k samples per series, a second apart.
func rwBodySamples(t testing.TB, n, shift int, ms int64, k int) []byte {
	t.Helper()
	req := &prompb.WriteRequest{}
	for i := range n {
		id := i + shift
		ls := []prompb.Label{
			{Name: "__name__", Value: fmt.Sprintf("m_%d_total", id%7)},
			{Name: "instance", Value: fmt.Sprintf("host-%d", id%5)},
			{Name: "job", Value: "api"},
			{Name: "le", Value: "0.5"},
			{Name: "series", Value: fmt.Sprint(id)},
			{Name: "service_name", Value: "svc"},
		}
		ts := prompb.TimeSeries{Labels: ls}
		for j := range k {
			ts.Samples = append(ts.Samples, prompb.Sample{Value: float64(i + j), Timestamp: ms + int64(j)*1000})
		}
		req.Timeseries = append(req.Timeseries, ts)
	}
	b, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// observeBoth feeds body to a via the decoded batch (Observe) and to b via
// the scan (ObserveSeries).
func observeBoth(t *testing.T, a, b *Stats, tenant string, body []byte) {
	t.Helper()
	var m signal.Metrics
	var d prw.Decoder
	if _, err := d.DecodeV1(&m, body); err != nil {
		t.Fatal(err)
	}
	a.Observe(tenant, &m, len(body))
	sc := prw.Scanner{LabelKeys: true}
	if !sc.ScanV1(body) {
		t.Fatal("the scan refused a plain request")
	}
	var ll []prw.Label
	ss := Series{Names: sc.Names, NameHash: sc.NameHashes(), Name: sc.Name, ID: sc.ID, Time: sc.Time, Labels: func(i int, dst []Label) []Label {
		ll = sc.Labels(i, ll[:0])
		for _, l := range ll {
			dst = append(dst, Label{l.Name, l.Value})
		}
		return dst
	}}
	b.ObserveSeries(tenant, &ss, len(body))
}

// TestObserveSeriesMatchesObserve: the statistics of remote-write requests
// counted from the scan are those counted from the decoded batch, across
// new series, known ones, several samples per series, a window roll-over
// and two tenants, and when the two paths take turns (one table for both;
// the scan's name hashes given, and not).
func TestObserveSeriesMatchesObserve(t *testing.T) {
	a, ca := newTest(t, Config{})
	b, cb := newTest(t, Config{})
	mixed, cm := newTest(t, Config{})
	ms := ca.t.UnixMilli()
	bodies := [][]byte{rwBody(t, 40, 0, ms), rwBody(t, 40, 20, ms+1000), rwBody(t, 40, 0, ms+2000), rwBody(t, 10, 100, ms+3000),
		rwBodySamples(t, 30, 50, ms+4000, 3), rwBodySamples(t, 30, 0, ms+8000, 2)}
	check := func(when string) {
		t.Helper()
		for _, tenant := range []string{"", "t1", "t2"} {
			if x, y := a.TSDB(tenant, 100), b.TSDB(tenant, 100); !reflect.DeepEqual(x, y) {
				t.Fatalf("%s, tenant %q: TSDB differs:\nbatch %+v\nscan  %+v", when, tenant, x, y)
			}
			if x, y := a.Summary(tenant, 100), b.Summary(tenant, 100); !reflect.DeepEqual(x, y) {
				t.Fatalf("%s, tenant %q: Summary differs:\nbatch %+v\nscan  %+v", when, tenant, x, y)
			}
			if x, y := a.TSDB(tenant, 100), mixed.TSDB(tenant, 100); !reflect.DeepEqual(x, y) {
				t.Fatalf("%s, tenant %q: TSDB of the two paths taking turns differs:\nbatch %+v\nmixed %+v", when, tenant, x, y)
			}
		}
		if a.TSDB("t1", 10).HeadStats.NumSeries == 0 {
			t.Fatal("nothing counted")
		}
	}
	for round, body := range bodies {
		for _, tenant := range []string{"t1", "t2"} {
			observeBoth(t, a, b, tenant, body)
			var m signal.Metrics
			var d prw.Decoder
			if _, err := d.DecodeV1(&m, body); err != nil {
				t.Fatal(err)
			}
			if round%2 == 0 {
				mixed.Observe(tenant, &m, len(body))
			} else {
				sc := prw.Scanner{LabelKeys: true}
				sc.ScanV1(body)
				var ll []prw.Label
				mixed.ObserveSeries(tenant, &Series{Names: sc.Names, Name: sc.Name, ID: sc.ID, Time: sc.Time, Labels: func(i int, dst []Label) []Label {
					ll = sc.Labels(i, ll[:0])
					for _, l := range ll {
						dst = append(dst, Label{l.Name, l.Value})
					}
					return dst
				}}, len(body))
			}
		}
		check(fmt.Sprintf("round %d", round))
		if round == 1 || round == 4 {
			// Next window: known series move from the previous generation.
			for _, c := range []*clock{ca, cb, cm} {
				c.t = c.t.Add(DefaultWindow)
			}
			check("after the roll-over")
		}
	}
}

func TestObserveSeriesAllocatesNothingForKnownSeries(t *testing.T) {
	s, c := newTest(t, Config{})
	body := rwBody(t, 1500, 0, c.t.UnixMilli())
	sc := prw.Scanner{LabelKeys: true}
	if !sc.ScanV1(body) {
		t.Fatal("refused")
	}
	var ll []prw.Label
	ss := &Series{Names: sc.Names, Name: sc.Name, ID: sc.ID, Time: sc.Time, Labels: func(i int, dst []Label) []Label {
		ll = sc.Labels(i, ll[:0])
		for _, l := range ll {
			dst = append(dst, Label{l.Name, l.Value})
		}
		return dst
	}}
	s.ObserveSeries("t", ss, len(body))
	if n := testing.AllocsPerRun(20, func() { s.ObserveSeries("t", ss, len(body)) }); n != 0 {
		t.Fatalf("%v allocations per request of known series", n)
	}
}

// TestLabelKeysBounded: the label names ObserveSeries remembers are the
// names as sent, own their bytes, and stay within maxLabelKeys.
func TestLabelKeysBounded(t *testing.T) {
	s, _ := newTest(t, Config{})
	buf := []byte("le")
	if k := s.labelKey(buf); k != "le" {
		t.Fatalf("le: %q", k)
	}
	buf[0] = 'x' // the caller's bytes change: the remembered name must not
	if k := s.labelKey([]byte("le")); k != "le" {
		t.Fatalf("the remembered name aliases the caller's bytes: %q", k)
	}
	for i := range 2*maxLabelKeys + 10 {
		name := fmt.Sprintf("label.%d", i)
		if k := s.labelKey([]byte(name)); k != name {
			t.Fatalf("%s: %q", name, k)
		}
		if len(s.labelKeys) > maxLabelKeys {
			t.Fatalf("%d label names remembered, bound %d", len(s.labelKeys), maxLabelKeys)
		}
	}
}

// TestObserveSeriesTableGrowth: a request of more new series than the
// table holds grows it in the middle of ObserveSeries's blocks of read-ahead
// words; every series is counted once, the second time none is new, and
// the counts are Observe's.
func TestObserveSeriesTableGrowth(t *testing.T) {
	a, c := newTest(t, Config{})
	b, _ := newTest(t, Config{})
	body := rwBodySamples(t, 5000, 0, c.t.UnixMilli(), 2)
	for range 2 {
		observeBoth(t, a, b, "t", body)
	}
	if b.used != 5000 || b.TSDB("t", 1).HeadStats.NumSeries != 5000 {
		t.Fatalf("table holds %d series, TSDB counts %d, want 5000", b.used, b.TSDB("t", 1).HeadStats.NumSeries)
	}
	if x, y := a.TSDB("t", 100), b.TSDB("t", 100); !reflect.DeepEqual(x, y) {
		t.Fatalf("TSDB differs:\nbatch %+v\nscan  %+v", x, y)
	}
	if x, y := a.Summary("t", 100), b.Summary("t", 100); !reflect.DeepEqual(x, y) {
		t.Fatalf("Summary differs:\nbatch %+v\nscan  %+v", x, y)
	}
}
