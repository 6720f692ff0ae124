package rollup

import (
	"strings"
	"testing"
	"time"
)

// FuzzParseTiers: any input either fails with an error or gives tiers
// that hold ValidateTiers' promises, whose names parse back to them.
func FuzzParseTiers(f *testing.F) {
	for _, s := range []string{"1m,5m,1h", "30s,90s", "1h,1m", "2h", "0s", "1.5s", " , ,1m", "-1m", "7m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tiers, err := ParseTiers(s)
		if err != nil {
			return
		}
		var names []string
		for i, d := range tiers {
			if d <= 0 || d%time.Second != 0 || time.Hour%d != 0 || (i > 0 && d%tiers[i-1] != 0) {
				t.Fatalf("%q gave tier %s", s, d)
			}
			names = append(names, TierName(d))
		}
		back, err := ParseTiers(strings.Join(names, ","))
		if err != nil || len(back) != len(tiers) {
			t.Fatalf("%q: names %v parse to %v, %v", s, names, back, err)
		}
		for i := range back {
			if back[i] != tiers[i] {
				t.Fatalf("%q: names %v parse to %v, want %v", s, names, back, tiers)
			}
		}
	})
}
