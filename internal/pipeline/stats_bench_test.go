package pipeline

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/sluice-dev/sluice/internal/queue"
	"github.com/sluice-dev/sluice/internal/receiver/otlpreceiver"
	"github.com/sluice-dev/sluice/internal/signal"
	"github.com/sluice-dev/sluice/internal/stats"
)

// BenchmarkConsumeStats is a whole Consume (decode, validate, queue append
// with fsync) of 1000-point metric requests over 100K series, with the
// statistics off and on: what they cost at ingest.
func BenchmarkConsumeStats(b *testing.B) {
	const perReq, reqs = 1000, 100
	bodies := make([][]byte, reqs)
	for r := range reqs {
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", "api")
		g := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		g.SetName("http.server.active_requests")
		pts := g.SetEmptyGauge().DataPoints()
		for i := range perReq {
			dp := pts.AppendEmpty()
			dp.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
			dp.SetDoubleValue(float64(i))
			dp.Attributes().PutStr("user.id", fmt.Sprint("u", r*perReq+i))
			dp.Attributes().PutStr("http.route", "/api/v1/items")
		}
		body, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
		if err != nil {
			b.Fatal(err)
		}
		bodies[r] = body
	}
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("stats=%v", on), func(b *testing.B) {
			q, err := queue.Open(queue.Options{Dir: b.TempDir(), SegmentBytes: 64 << 20, MaxBytes: 1 << 40})
			if err != nil {
				b.Fatal(err)
			}
			defer q.Close()
			c := newConsumer(q, time.Second, newMetrics())
			if on {
				c.stats, _ = stats.New(stats.Config{})
			}
			ctx := context.Background()
			req := &otlpreceiver.Request{Tenant: "acme", Kind: signal.KindMetrics, Transport: otlpreceiver.TransportHTTP}
			for _, body := range bodies { // every series known: the steady state
				req.Body = body
				if _, err := c.Consume(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			cpu0 := cpuTime()
			b.ResetTimer()
			for n := range b.N {
				req.Body = bodies[n%reqs]
				if _, err := c.Consume(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*perReq)/b.Elapsed().Seconds(), "points/s")
			// CPU time, not wall time: fsync waits on a shared disk swamp
			// the difference.
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N*perReq), "cpu-ns/point")
		})
	}
}

// cpuTime is the process's user and system CPU time in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
