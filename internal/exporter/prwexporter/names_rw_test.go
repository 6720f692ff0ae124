package prwexporter

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/sluice-dev/sluice/internal/prw"
)

// A remote-write point (scope prw.ScopeName: a partial write or a rule's
// output queued as OTLP) goes out with exactly its stored name and
// attribute keys, as the query API shows it; an OTLP point of the same
// names goes out mapped.
func TestConvertKeepsRemoteWriteNames(t *testing.T) {
	for _, c := range []struct {
		scope string
		want  []string
	}{
		{prw.ScopeName, []string{"__name__=nm.dot,__x=c,l__d=a,lbl.dot=b", "__name__=nm__,__x=c,l__d=a,lbl.dot=b", "__name__=9nm_digit,__x=c,l__d=a,lbl.dot=b"}},
		{"otel", []string{"__name__=nm_dot,_x=c,l_d=a,lbl_dot=b", "__name__=nm,_x=c,l_d=a,lbl_dot=b", "__name__=_9nm_digit,_x=c,l_d=a,lbl_dot=b"}},
	} {
		md := pmetric.NewMetrics()
		sm := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty()
		sm.Scope().SetName(c.scope)
		for _, n := range []string{"nm.dot", "nm__", "9nm_digit"} {
			g := sm.Metrics().AppendEmpty()
			g.SetName(n)
			p := g.SetEmptyGauge().DataPoints().AppendEmpty()
			p.SetTimestamp(pcommon.NewTimestampFromTime(time.Unix(1700000000, 0)))
			p.SetDoubleValue(1)
			p.Attributes().PutStr("l__d", "a")
			p.Attributes().PutStr("lbl.dot", "b")
			p.Attributes().PutStr("__x", "c")
		}
		got := convert(t, md)
		if len(got) != len(c.want) {
			t.Fatalf("%s: %q, want %q", c.scope, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: series %d %s, want %s", c.scope, i, got[i], c.want[i])
			}
		}
	}
}
