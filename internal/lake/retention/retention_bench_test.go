package retention

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

// BenchmarkPlan plans over a catalog of 10 tenants × 3 tables × 30 days of
// hours (21,600 segments), half of them expired.
func BenchmarkPlan(b *testing.B) {
	ctx := context.Background()
	c, err := catalog.Open(ctx, "sqlite:"+filepath.Join(b.TempDir(), "catalog.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var segs []catalog.Segment
	for tn := range 10 {
		for _, tb := range []string{"logs", "metrics", "traces"} {
			for h := range 30 * 24 {
				segs = append(segs, seg(tb, fmt.Sprint("t", tn), base.Add(time.Duration(h)*time.Hour), "s"))
			}
		}
	}
	if err := c.AddSegments(ctx, segs...); err != nil {
		b.Fatal(err)
	}
	now := base.Add(30 * 24 * time.Hour)
	rules := Rules{Keep: map[string]time.Duration{"logs": 15 * 24 * time.Hour, "metrics": 15 * 24 * time.Hour, "traces": 15 * 24 * time.Hour}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		parts, err := Plan(ctx, c, rules, now)
		if err != nil || len(parts) != len(segs)/2 {
			b.Fatalf("%d partitions, %v", len(parts), err)
		}
	}
	b.ReportMetric(float64(len(segs)/2)*float64(b.N)/b.Elapsed().Seconds(), "partitions/s")
}
