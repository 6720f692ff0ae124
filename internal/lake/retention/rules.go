package retention

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/tenant"
)

// Table names retention knows; rules for other names are rejected.
const (
	TableLogs    = "logs"
	TableMetrics = "metrics"
	TableTraces  = "traces"
	TableRollup  = "metrics_rollup"
	// TableIOEvents holds traced I/O syscalls (sluice trace --record).
	TableIOEvents = "io_events"
)

var tables = []string{TableLogs, TableMetrics, TableTraces, TableRollup, TableIOEvents}

// Class names what a rule applies to: a table ("logs"), or one tier of the
// rollup table ("metrics_rollup.1m"). A rule for "metrics_rollup" alone
// covers every tier without a rule of its own.
func Class(table, tier string) string {
	if tier == "" {
		return table
	}
	return table + "." + tier
}

// Rules say how long each class of data is kept. Ages are compared with
// the end of an hour partition, so data lives between age and age+1h.
type Rules struct {
	// Keep maps a class to its age. Missing or 0: keep forever.
	Keep map[string]time.Duration
	// Tenants override Keep per tenant and class; an explicit 0 there
	// keeps that tenant's class forever.
	Tenants map[string]map[string]time.Duration
}

// Age returns the age after which tenant's data of (table, tier) goes, 0
// for never. Lookup order: the tenant's rule for the class, the tenant's
// rule for the whole rollup table (tiers only), then the same two in Keep.
func (r Rules) Age(tenantName, table, tier string) time.Duration {
	class := Class(table, tier)
	for _, m := range []map[string]time.Duration{r.Tenants[tenantName], r.Keep} {
		if age, ok := m[class]; ok {
			return age
		}
		if tier != "" {
			if age, ok := m[table]; ok {
				return age
			}
		}
	}
	return 0
}

// Active reports whether any rule removes anything.
func (r Rules) Active() bool {
	for _, m := range append([]map[string]time.Duration{r.Keep}, mapsOf(r.Tenants)...) {
		for _, age := range m {
			if age > 0 {
				return true
			}
		}
	}
	return false
}

func mapsOf(t map[string]map[string]time.Duration) []map[string]time.Duration {
	out := make([]map[string]time.Duration, 0, len(t))
	for _, m := range t {
		out = append(out, m)
	}
	return out
}

// Validate reports every rule with a negative age, an unknown table or a
// bad tenant name.
func (r Rules) Validate() error {
	var errs []error
	check := func(where string, m map[string]time.Duration) {
		for _, class := range sortedKeys(m) {
			if err := checkClass(class); err != nil {
				errs = append(errs, fmt.Errorf("%s%w", where, err))
			}
			if m[class] < 0 {
				errs = append(errs, fmt.Errorf("%s%s: negative age %s", where, class, m[class]))
			}
		}
	}
	check("", r.Keep)
	for _, t := range sortedKeys(r.Tenants) {
		if !tenant.Valid(t) {
			errs = append(errs, fmt.Errorf("tenant %q: not a valid tenant name", t))
		}
		check("tenant "+t+": ", r.Tenants[t])
	}
	return errors.Join(append(errs, r.checkRollupOrder()...)...)
}

// checkRollupOrder rejects a rollup tier that goes before the raw metrics
// it is computed from: rollups recompute an hour whose tiers are
// incomplete while its raw data is there, so such a tier would be rolled
// up again and deleted again at every pass.
func (r Rules) checkRollupOrder() []error {
	tiers := map[string]bool{}
	for _, m := range append([]map[string]time.Duration{r.Keep}, mapsOf(r.Tenants)...) {
		for class := range m {
			if table, tier, _ := strings.Cut(class, "."); table == TableRollup {
				tiers[tier] = true
			}
		}
	}
	var errs []error
	for _, t := range append([]string{""}, sortedKeys(r.Tenants)...) {
		raw := r.Age(t, TableMetrics, "")
		for _, tier := range sortedKeys(tiers) {
			age := r.Age(t, TableRollup, tier)
			if age > 0 && (raw == 0 || raw > age) {
				who := ""
				if t != "" {
					who = "tenant " + t + ": "
				}
				errs = append(errs, fmt.Errorf("%s%s=%s goes before metrics=%s: rollups are computed from raw metrics, so keep every rollup tier at least as long as metrics",
					who, Class(TableRollup, tier), FormatAge(age), FormatAge(raw)))
			}
		}
	}
	return errs
}

func checkClass(class string) error {
	table, tier, hasTier := strings.Cut(class, ".")
	if !slices.Contains(tables, table) {
		return fmt.Errorf("%q: unknown table (want logs, metrics, traces, io_events or metrics_rollup[.TIER])", class)
	}
	if hasTier {
		if table != TableRollup {
			return fmt.Errorf("%q: only metrics_rollup has tiers", class)
		}
		if tier == "" {
			return fmt.Errorf("%q: empty tier", class)
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// ParseAge parses an age: a Go duration (36h, 90m) or a whole number of
// days (7d). "0" or "forever" means keep forever.
func ParseAge(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" || s == "forever" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 100*366 {
			return 0, fmt.Errorf("age %q: want a number of days such as 7d, or a duration such as 36h", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("age %q: want a number of days such as 7d, or a duration such as 36h", s)
	}
	return d, nil
}

// ParseKeep adds rules written as comma-separated [TENANT:]CLASS=AGE items
// ("logs=7d,metrics_rollup.1h=400d,acme:logs=30d") to r, later items
// overriding earlier ones.
func (r *Rules) ParseKeep(s string) error {
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		lhs, ageStr, ok := strings.Cut(item, "=")
		if !ok {
			return fmt.Errorf("%q: want [TENANT:]TABLE[.TIER]=AGE, e.g. logs=7d", item)
		}
		age, err := ParseAge(ageStr)
		if err != nil {
			return fmt.Errorf("%q: %w", item, err)
		}
		t, class, scoped := strings.Cut(lhs, ":")
		if !scoped {
			class, t = t, ""
		}
		class = strings.TrimSpace(class)
		if err := checkClass(class); err != nil {
			return err
		}
		if !scoped {
			if r.Keep == nil {
				r.Keep = map[string]time.Duration{}
			}
			r.Keep[class] = age
			continue
		}
		if !tenant.Valid(t) {
			return fmt.Errorf("%q: tenant %q is not a valid tenant name", item, t)
		}
		if r.Tenants == nil {
			r.Tenants = map[string]map[string]time.Duration{}
		}
		if r.Tenants[t] == nil {
			r.Tenants[t] = map[string]time.Duration{}
		}
		r.Tenants[t][class] = age
	}
	return nil
}

// String renders the rules in ParseKeep's syntax, sorted; global rules of
// 0 are left out (no rule keeps forever too).
func (r Rules) String() string {
	var parts []string
	for _, c := range sortedKeys(r.Keep) {
		if r.Keep[c] != 0 { // the same as no rule
			parts = append(parts, c+"="+FormatAge(r.Keep[c]))
		}
	}
	for _, t := range sortedKeys(r.Tenants) {
		for _, c := range sortedKeys(r.Tenants[t]) {
			parts = append(parts, t+":"+c+"="+FormatAge(r.Tenants[t][c]))
		}
	}
	return strings.Join(parts, ",")
}

// FormatAge renders whole days as "7d", other ages as Go durations, and 0
// as "forever".
func FormatAge(d time.Duration) string {
	switch {
	case d == 0:
		return "forever"
	case d%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	return d.String()
}
