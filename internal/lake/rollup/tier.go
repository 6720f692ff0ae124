package rollup

import (
	"fmt"
	"strings"
	"time"
)

// DefaultTiers are the rollup tiers when none are configured.
var DefaultTiers = []time.Duration{time.Minute, 5 * time.Minute, time.Hour}

// ParseTiers parses a comma-separated tier list such as "1m,5m,1h" and
// validates it with ValidateTiers.
func ParseTiers(s string) ([]time.Duration, error) {
	var tiers []time.Duration
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		d, err := time.ParseDuration(part)
		if err != nil {
			return nil, fmt.Errorf("rollup: tier %q: %w", part, err)
		}
		tiers = append(tiers, d)
	}
	if err := ValidateTiers(tiers); err != nil {
		return nil, err
	}
	return tiers, nil
}

// ValidateTiers checks that tiers are whole seconds, finest first, each a
// multiple of the one before, and that every tier divides one hour: the
// unit of work is one raw hour, so tiers above 1h are not supported.
func ValidateTiers(tiers []time.Duration) error {
	if len(tiers) == 0 {
		return fmt.Errorf("rollup: no tiers")
	}
	for i, d := range tiers {
		switch {
		case d <= 0 || d%time.Second != 0:
			return fmt.Errorf("rollup: tier %s: want a positive whole number of seconds", d)
		case d > time.Hour:
			return fmt.Errorf("rollup: tier %s: tiers above 1h are not supported (the unit of work is one hour)", d)
		case time.Hour%d != 0:
			return fmt.Errorf("rollup: tier %s does not divide 1h", d)
		case i > 0 && (d <= tiers[i-1] || d%tiers[i-1] != 0):
			return fmt.Errorf("rollup: tier %s must be a larger multiple of the tier before it (%s)", d, tiers[i-1])
		}
	}
	return nil
}

// TierName is the tier's name in the tier column and in config: "1m",
// "5m", "1h", "30s", "90s" (seconds when not a whole number of minutes).
func TierName(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}

// Level is the catalog level (and footer sluice.level) of a tier's
// segments: the tier in seconds, so a planner asks the catalog for
// Filter{Table: "metrics_rollup", Level: &lvl}.
func Level(d time.Duration) int { return int(d / time.Second) }

// TierOfLevel is the tier of a metrics_rollup segment of catalog level lvl.
func TierOfLevel(lvl int) time.Duration { return time.Duration(lvl) * time.Second }

// FormatTiers renders tiers as ParseTiers reads them.
func FormatTiers(tiers []time.Duration) string {
	names := make([]string, len(tiers))
	for i, d := range tiers {
		names[i] = TierName(d)
	}
	return strings.Join(names, ",")
}
