package promtest

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// Lake is a real lake in a temp dir: files written by lake.Writer,
// segments in an SQLite catalog.
type Lake struct {
	Root    string
	Catalog *catalog.Catalog
	Store   lake.Store
}

func NewLake(t testing.TB) *Lake {
	t.Helper()
	root := t.TempDir()
	cat, err := catalog.Open(context.Background(), "sqlite:"+filepath.Join(root, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	return &Lake{Root: root, Catalog: cat, Store: lake.NewLocalStore(root)}
}

// Write ingests OTLP JSON metrics requests for tenant, one file per call
// (plus hour splits).
func (l *Lake) Write(t testing.TB, tenant string, rowGroupRows int, reqs ...[]byte) {
	t.Helper()
	w, err := lake.NewWriter(lake.Options{Root: l.Root, Store: l.Store, RowGroupRows: rowGroupRows,
		MaxFutureSkew: 100 * 365 * 24 * time.Hour}, func(seg lake.Segment) error {
		return l.Catalog.AddSegments(context.Background(), seg.CatalogRow())
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, js := range reqs {
		var m signal.Metrics
		if err := otlp.DecodeMetricsJSON(&m, js); err != nil {
			t.Fatalf("decode test request: %v", err)
		}
		if err := w.WriteMetrics(tenant, &m); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// WriteBatches ingests decoded metric batches (e.g. from internal/prw)
// for tenant, one file per call (plus hour splits).
func (l *Lake) WriteBatches(t testing.TB, tenant string, ms ...*signal.Metrics) {
	t.Helper()
	w, err := lake.NewWriter(lake.Options{Root: l.Root, Store: l.Store,
		MaxFutureSkew: 100 * 365 * 24 * time.Hour}, func(seg lake.Segment) error {
		return l.Catalog.AddSegments(context.Background(), seg.CatalogRow())
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if err := w.WriteMetrics(tenant, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// Synth describes a synthetic workload with known values: per service, a
// cumulative counter that grows by counterStep every interval, a classic
// histogram that gets the bucket counts histStep every interval, and a
// gauge equal to the point index.
type Synth struct {
	Start       time.Time
	Interval    time.Duration
	Points      int
	Services    []string
	Routes      []string
	CounterStep float64
	Bounds      []float64
	HistStep    []int // per bucket, len(Bounds)+1
	// Vary makes increments uneven: the counter grows by
	// CounterStep*(route+1)*(1+k%5) at point k, bucket b by
	// HistStep[b]*(1+(k+b)%3). Without it they are constant.
	Vary bool
}

// counter is the counter value of route ri at point i.
func (s Synth) counter(ri, i int) float64 {
	if !s.Vary {
		return s.CounterStep * float64(i) * float64(ri+1)
	}
	var v float64
	for k := 1; k <= i; k++ {
		v += s.CounterStep * float64(ri+1) * float64(1+k%5)
	}
	return v
}

// bucket is the cumulative-over-time count of bucket b at point i.
func (s Synth) bucket(b, i int) int {
	if !s.Vary {
		return s.HistStep[b] * i
	}
	var n int
	for k := 1; k <= i; k++ {
		n += s.HistStep[b] * (1 + (k+b)%3)
	}
	return n
}

func Attr(k, v string) string {
	return fmt.Sprintf(`{"key":%q,"value":{"stringValue":%q}}`, k, v)
}

// JSON renders one OTLP JSON ExportMetricsServiceRequest.
func (s Synth) JSON() []byte {
	var b strings.Builder
	b.WriteString(`{"resourceMetrics":[`)
	for si, svc := range s.Services {
		if si > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"resource":{"attributes":[%s,%s]},"scopeMetrics":[{"scope":{"name":"synth"},"metrics":[`,
			Attr("service.name", svc), Attr("host.name", "h-"+svc))
		var ctr, hist, gauge []string
		for ri, route := range s.Routes {
			for i := 0; i < s.Points; i++ {
				ts := s.Start.Add(time.Duration(i) * s.Interval).UnixNano()
				st := s.Start.UnixNano()
				attrs := Attr("http.route", route)
				ctr = append(ctr, fmt.Sprintf(`{"attributes":[%s],"startTimeUnixNano":"%d","timeUnixNano":"%d","asDouble":%g}`,
					attrs, st, ts, s.counter(ri, i)))
				var counts []string
				var total int
				for b := range s.HistStep {
					c := s.bucket(b, i)
					counts = append(counts, fmt.Sprintf(`"%d"`, c))
					total += c
				}
				var bounds []string
				for _, x := range s.Bounds {
					bounds = append(bounds, fmt.Sprintf("%g", x))
				}
				hist = append(hist, fmt.Sprintf(`{"attributes":[%s],"startTimeUnixNano":"%d","timeUnixNano":"%d","count":"%d","sum":%g,"bucketCounts":[%s],"explicitBounds":[%s]}`,
					attrs, st, ts, total, float64(total)*0.25, strings.Join(counts, ","), strings.Join(bounds, ",")))
				gauge = append(gauge, fmt.Sprintf(`{"attributes":[%s],"timeUnixNano":"%d","asInt":"%d"}`, attrs, ts, i))
			}
		}
		fmt.Fprintf(&b, `{"name":"test.requests","unit":"{request}","sum":{"aggregationTemporality":2,"isMonotonic":true,"dataPoints":[%s]}},`, strings.Join(ctr, ","))
		fmt.Fprintf(&b, `{"name":"test.latency","unit":"s","histogram":{"aggregationTemporality":2,"dataPoints":[%s]}},`, strings.Join(hist, ","))
		fmt.Fprintf(&b, `{"name":"test.queue.depth","gauge":{"dataPoints":[%s]}}`, strings.Join(gauge, ","))
		b.WriteString(`]}]}`)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}
