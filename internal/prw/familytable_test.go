package prw

import (
	"strings"
	"testing"

	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/signal"
)

func metadataRequest(t *testing.T, ms ...prompb.MetricMetadata) []byte {
	t.Helper()
	req := &prompb.WriteRequest{Metadata: ms, Timeseries: []prompb.TimeSeries{{
		Labels: []prompb.Label{{Name: "__name__", Value: "up"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 1}},
	}}}
	b, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// describedAs decodes a request of series names (no metadata) and
// returns each series' help and metadata as the table describes them.
func describedAs(t *testing.T, ft *FamilyTable, tenant string, names ...string) []string {
	t.Helper()
	req := &prompb.WriteRequest{}
	for _, n := range names {
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
			Labels: []prompb.Label{{Name: "__name__", Value: n}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 1}}})
	}
	b, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var m signal.Metrics
	var d Decoder
	if _, err := d.DecodeV1(&m, b); err != nil {
		t.Fatal(err)
	}
	ft.Describe(tenant, &m, 0)
	var out []string
	for _, md := range m.Descs {
		s := m.String(md.Name) + ":" + m.String(md.Description)
		for a := md.Metadata.Start; a < md.Metadata.End; a++ {
			s += " " + m.Keys.Name(m.Attrs.Key[a]) + "=" + m.String(signal.Str(m.Attrs.Val[a]))
		}
		out = append(out, s)
	}
	return out
}

func TestFamilyTable(t *testing.T) {
	ft := NewFamilyTable(0)
	n := ft.LearnV1("acme", metadataRequest(t,
		prompb.MetricMetadata{Type: prompb.MetricMetadata_COUNTER, MetricFamilyName: "http_requests", Help: "Requests."},
		prompb.MetricMetadata{Type: prompb.MetricMetadata_SUMMARY, MetricFamilyName: "gc_seconds", Unit: "seconds"},
		prompb.MetricMetadata{Type: prompb.MetricMetadata_GAUGE, Help: "no family name: not learnt"},
	))
	if n != 2 {
		t.Fatalf("learnt %d entries, want 2", n)
	}
	got := strings.Join(describedAs(t, ft, "acme", "http_requests_total", "gc_seconds_count", "gc_seconds", "other"), "\n")
	want := strings.Join([]string{
		"http_requests_total:Requests. prometheus.type=counter",
		"gc_seconds_count: prometheus.type=summary prometheus.unit=seconds",
		"gc_seconds: prometheus.type=summary prometheus.unit=seconds",
		"other:",
	}, "\n")
	if got != want {
		t.Fatalf("described:\n%s\nwant:\n%s", got, want)
	}
	if got := describedAs(t, ft, "other-tenant", "http_requests_total"); got[0] != "http_requests_total:" {
		t.Fatalf("another tenant's series described by acme's metadata: %s", got[0])
	}
	// The sender changes a family's help: the new text wins.
	ft.LearnV1("acme", metadataRequest(t, prompb.MetricMetadata{Type: prompb.MetricMetadata_COUNTER, MetricFamilyName: "http_requests", Help: "Requests served."}))
	if got := describedAs(t, ft, "acme", "http_requests_total"); got[0] != "http_requests_total:Requests served. prometheus.type=counter" {
		t.Fatalf("after an update: %s", got[0])
	}
	// A request without metadata, and a malformed one, teach nothing.
	plain := metadataRequest(t)
	if n := ft.LearnV1("acme", plain); n != 0 {
		t.Fatalf("learnt %d from a request without metadata", n)
	}
	if a := testing.AllocsPerRun(100, func() { ft.LearnV1("acme", plain) }); a != 0 {
		t.Fatalf("%v allocations per request without metadata, want 0", a)
	}
	if n := ft.LearnV1("acme", []byte{0x1a, 0xff}); n != 0 {
		t.Fatalf("learnt %d from a truncated request", n)
	}
}

// The table holds at most its bound of text; what does not fit is
// refused and counted, and what it holds stays.
func TestFamilyTableBound(t *testing.T) {
	ft := NewFamilyTable(1000)
	help := strings.Repeat("h", 300)
	var ms []prompb.MetricMetadata
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		ms = append(ms, prompb.MetricMetadata{Type: prompb.MetricMetadata_GAUGE, MetricFamilyName: name, Help: help})
	}
	if n := ft.LearnV1("t", metadataRequest(t, ms...)); n != 2 {
		t.Fatalf("learnt %d entries of ~370 bytes into 1,000, want 2", n)
	}
	if r := ft.Refused(); r != 3 {
		t.Fatalf("refused %d, want 3", r)
	}
	got := describedAs(t, ft, "t", "a", "c")
	if !strings.HasPrefix(got[0], "a:"+help) || got[1] != "c:" {
		t.Fatalf("described %q", got)
	}
}
