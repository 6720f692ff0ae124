package search

import (
	"testing"
	"time"
)

func FuzzDecodeCursor(f *testing.F) {
	f.Add((&cursor{t: 1766578000000000000, path: "logs/tenant=a/dt=2025-12-24/hour=12/x.parquet", row: 7}).encode())
	f.Add("")
	f.Add("!!")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := decodeCursor(s)
		if err != nil {
			return
		}
		again, err := decodeCursor(c.encode())
		if err != nil || *again != *c {
			t.Fatalf("round trip of %+v: %+v, %v", c, again, err)
		}
	})
}

func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"2026-01-01T00:00:00Z", "1772359200", "1772359200.5", "1772359200000000000", "-1", "1e300", "NaN"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { _, _ = parseTime(s) })
}

func TestParseTime(t *testing.T) {
	want := time.Date(2026, 3, 1, 10, 0, 0, 500_000_000, time.UTC).UnixNano()
	for _, s := range []string{"2026-03-01T10:00:00.5Z", "2026-03-01T11:00:00.5+01:00", "1772359200.5", "1772359200500000000"} {
		got, err := parseTime(s)
		if err != nil || got != want {
			t.Errorf("parseTime(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "soon", "1e300", "NaN", "2026-03-01", "99999999999"} {
		if _, err := parseTime(s); err == nil {
			t.Errorf("parseTime(%q) accepted", s)
		}
	}
}
