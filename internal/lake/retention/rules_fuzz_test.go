package retention

import (
	"testing"
)

// FuzzParseKeep: --keep input either fails with an error or gives rules
// that String renders back into the same rules.
func FuzzParseKeep(f *testing.F) {
	for _, s := range []string{"logs=7d", "acme:logs=30d,metrics_rollup.1h=400d", "traces=36h", "logs=forever",
		"x=1d", "logs=", ":logs=1d", "acme:metrics_rollup=90d,metrics=0", "logs=-1d", "logs=99999999999d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var r Rules
		if err := r.ParseKeep(s); err != nil {
			return
		}
		var back Rules
		if err := back.ParseKeep(r.String()); err != nil {
			t.Fatalf("%q: String() = %q does not parse: %v", s, r.String(), err)
		}
		if back.String() != r.String() {
			t.Fatalf("%q: %q then %q", s, r.String(), back.String())
		}
		for c, age := range r.Keep {
			if age < 0 {
				t.Fatalf("%q: negative age for %s", s, c)
			}
		}
	})
}
