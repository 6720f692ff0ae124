package config

import (
	"strings"
	"testing"
)

// The stats section has protective defaults and each bad value is named.
func TestStatsConfig(t *testing.T) {
	d := Default()
	if s := d.Stats; !s.Enabled || s.Window.D().Minutes() != 5 || s.MaxSeries != 1_000_000 || s.MaxMetrics != 10_000 || s.MaxLabelPairs != 100_000 {
		t.Errorf("defaults %+v", s)
	}
	c, err := Parse([]byte("stats:\n  window: 500ms\n  max_series: 0\n  max_metrics: -1\n  max_label_pairs: 0\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate()
	for _, want := range []string{"stats.window: 500ms is shorter than 1s", "stats.max_series: 0 out of range", "stats.max_metrics: must be positive", "stats.max_label_pairs: must be positive"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want %q", err, want)
		}
	}
	c, _ = Parse([]byte("stats:\n  enabled: false\n"), nil)
	if c.Stats.Enabled || c.Validate() != nil {
		t.Errorf("stats off: %+v %v", c.Stats, c.Validate())
	}
}
