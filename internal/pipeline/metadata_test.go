package pipeline

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

// TestFamilyMetaLimits: a tenant keeps at most maxFamilies families (new
// ones beyond are refused and counted, changes to kept ones still land),
// a family sent twice in one request keeps the last entry, an unchanged
// resend writes nothing, and a second process (a restart) starts from
// what the catalog holds.
func TestFamilyMetaLimits(t *testing.T) {
	ctx := context.Background()
	cat, err := catalog.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	body := func(ms ...prompb.MetricMetadata) []byte {
		b, err := (&prompb.WriteRequest{Metadata: ms}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	g := func(name, help string) prompb.MetricMetadata {
		return prompb.MetricMetadata{Type: prompb.MetricMetadata_GAUGE, MetricFamilyName: name, Help: help}
	}
	f := newFamilyMeta(cat, 2, prometheus.NewRegistry())
	if err := f.put(ctx, "t", body(g("a", "1"), g("a", "2"), g("b", "1"), g("c", "1"))); err != nil {
		t.Fatal(err)
	}
	list := func() string {
		ms, err := cat.ListFamilyMetadata(ctx, "t", "")
		if err != nil {
			t.Fatal(err)
		}
		s := ""
		for _, m := range ms {
			s += fmt.Sprintf("%s=%s ", m.Name, m.Help)
		}
		return s
	}
	if got := list(); got != "a=2 b=1 " {
		t.Fatalf("stored %q", got)
	}
	val := func(c prometheus.Counter) float64 {
		var m dto.Metric
		if err := c.Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	counts := func(f *familyMeta) string {
		return fmt.Sprint(val(f.stored), val(f.unchanged), val(f.refused))
	}
	if got := counts(f); got != "2 0 1" {
		t.Fatalf("stored, unchanged, refused: %s", got)
	}
	// A change of a kept family lands at the limit; the same entries again
	// change nothing.
	if err := f.put(ctx, "t", body(g("b", "2"), g("a", "2"), g("c", "1"))); err != nil {
		t.Fatal(err)
	}
	if got, c := list(), counts(f); got != "a=2 b=2 " || c != "3 1 2" {
		t.Fatalf("after a change: %q, counts %s", got, c)
	}
	// Another process starts from the catalog: unchanged entries stay so,
	// and the limit counts the families already there.
	f2 := newFamilyMeta(cat, 2, prometheus.NewRegistry())
	if err := f2.put(ctx, "t", body(g("a", "2"), g("d", "1"))); err != nil {
		t.Fatal(err)
	}
	if got, c := list(), counts(f2); got != "a=2 b=2 " || c != "0 1 1" {
		t.Fatalf("second process: %q, counts %s", got, c)
	}
	// Other tenants have limits of their own.
	if err := f2.put(ctx, "u", body(g("d", "1"))); err != nil {
		t.Fatal(err)
	}
	if c := counts(f2); c != "1 1 1" {
		t.Fatalf("tenant u: counts %s", c)
	}
}
