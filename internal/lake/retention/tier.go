package retention

import (
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/lake/rollup"
)

// TierOf returns the rollup tier of a metrics_rollup segment ("1m", "5m",
// "1h"), "" for other tables. The rollup package stores a segment's tier
// as its catalog level, in seconds (rollup.Level).
func TierOf(s catalog.Segment) string {
	if s.Table != TableRollup {
		return ""
	}
	return rollup.TierName(rollup.TierOfLevel(s.Level))
}
