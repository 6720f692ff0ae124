package processor

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/prw"
	"github.com/sluice-dev/sluice/internal/signal"
)

// oddBatch decodes one gauge point per name under scope, with the
// attributes l__d and lbl.dot.
func oddBatch(t *testing.T, scope string, names ...string) *signal.Metrics {
	t.Helper()
	var ms []string
	for i, n := range names {
		ms = append(ms, fmt.Sprintf(`{"name":%q,"gauge":{"dataPoints":[{"timeUnixNano":"1","asDouble":%d,"attributes":[`+
			`{"key":"l__d","value":{"stringValue":"a"}},{"key":"lbl.dot","value":{"stringValue":"b"}}]}]}}`, n, i))
	}
	js := fmt.Sprintf(`{"resourceMetrics":[{"scopeMetrics":[{"scope":{"name":%q},"metrics":[%s]}]}]}`, scope, strings.Join(ms, ","))
	var b signal.Metrics
	if err := otlp.DecodeMetricsJSON(&b, []byte(js)); err != nil {
		t.Fatal(err)
	}
	return &b
}

// Remote-write points are matched by exactly their names and labels, as
// the query API shows them; OTLP points of the same names by their mapped
// ones.
func TestRemoteWriteNamesMatchExactly(t *testing.T) {
	names := []string{"nm_trailing_", "_nm_leading", "nm__double", "nm.dot", "9nm_digit", "nm ü", "nm__"}
	rw := oddBatch(t, prw.ScopeName, names...)
	var got []string
	for _, l := range labelsOf(rw) {
		got = append(got, l.String())
	}
	for i, n := range names {
		if want := fmt.Sprintf(`{__name__=%q, l__d="a", "lbl.dot"="b"}`, n); got[i] != want {
			t.Errorf("remote-write labels %s, want %s", got[i], want)
		}
	}
	if got := labelsOf(oddBatch(t, "otel", "nm.dot"))[0].String(); got != `{__name__="nm_dot", l_d="a", lbl_dot="b"}` {
		t.Errorf("OTLP labels %s", got)
	}
	// One set of rules, run over a remote-write batch and an OTLP batch
	// of the same names (one Scratch, one decision cache: the series ids
	// are equal, the decisions must not be).
	m, err := NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Parse([]byte(`
metrics:
  - name: exact
    match: '{__name__=~"nm__double|nm ü|nm.dot", "lbl.dot"="b"}'
    action: drop
  - name: mapped
    match: '{__name__="nm_trailing", l_d="a"}'
    action: drop
`), m)
	if err != nil {
		t.Fatal(err)
	}
	s := Scratch{Tenant: "acme"}
	kept := func(b *signal.Metrics) []string {
		_, n := r.ProcessMetrics(b, &s)
		var out []string
		for i := range n {
			out = append(out, b.String(b.Descs[b.Desc[i]].Name))
		}
		return out
	}
	for range 2 { // the second round reads the cached decisions
		if got, want := kept(oddBatch(t, prw.ScopeName, names...)), []string{"nm_trailing_", "_nm_leading", "9nm_digit", "nm__"}; !slices.Equal(got, want) {
			t.Errorf("remote write kept %q, want %q", got, want)
		}
		if got, want := kept(oddBatch(t, "otel", names...)), []string{"_nm_leading", "nm__double", "nm.dot", "9nm_digit", "nm ü", "nm__"}; !slices.Equal(got, want) {
			t.Errorf("OTLP kept %q, want %q", got, want)
		}
	}
	// The rule effects name each metric as the query API does.
	var effs []string
	for _, e := range sortedEffects(m, "") {
		effs = append(effs, fmt.Sprintf("%s %s %d", e.Rule, e.Metric, e.Dropped))
	}
	want := []string{"exact nm ü 2", "exact nm.dot 2", "exact nm__double 2", "mapped nm_trailing 2"}
	if !slices.Equal(effs, want) {
		t.Errorf("effects %q, want %q", effs, want)
	}
}
