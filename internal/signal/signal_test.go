package signal

import (
	"math"
	"testing"
)

// buildLogs makes a batch with two resources and hostile attribute values.
func buildLogs() *Logs {
	l := &Logs{}
	for r := 0; r < 2; r++ {
		start := uint32(l.Attrs.Len())
		l.Attrs.Append(l.Keys.IDString("service.name"), ValueString, uint64(l.AppendString([]string{"api", "db"}[r])))
		l.Attrs.Append(l.Keys.IDString("host.cpus"), ValueInt, uint64(int64(-4+r)))
		l.Resources = append(l.Resources, Resource{Attrs: Range{start, uint32(l.Attrs.Len())}, SchemaURL: l.AppendString("https://schema")})
	}
	l.Scopes = append(l.Scopes, Scope{Name: l.AppendString("scope"), Version: l.AppendString("1.0")})
	for i := 0; i < 5; i++ {
		idx := l.AppendRecord(uint32(i%2), 0)
		l.Time[idx] = int64(1000 + i)
		l.SeverityText[idx] = l.AppendString("WARN")
		l.BodyType[idx] = ValueString
		l.Body[idx] = uint64(l.AppendString("hello"))
		a := uint32(l.Attrs.Len())
		l.Attrs.Append(l.Keys.IDString("ratio"), ValueDouble, math.Float64bits(math.NaN()))
		l.Attrs.Append(l.Keys.IDString("ok"), ValueBool, 1)
		l.Attr[idx] = Range{a, uint32(l.Attrs.Len())}
		l.TraceID[idx] = TraceID{byte(i), 1}
	}
	return l
}

func TestLogsCopyFromSharesResources(t *testing.T) {
	src := buildLogs()
	var dst Logs
	// Pre-existing data in dst must not be disturbed.
	dst.Keys.IDString("unrelated")
	dst.AppendString("padding")
	for i := 0; i < src.Len(); i++ {
		dst.CopyFrom(src, i)
	}
	if dst.Len() != src.Len() {
		t.Fatalf("len %d, want %d", dst.Len(), src.Len())
	}
	if len(dst.Resources) != 2 || len(dst.Scopes) != 1 {
		t.Fatalf("resources %d scopes %d: shared entries must be copied once", len(dst.Resources), len(dst.Scopes))
	}
	for i := 0; i < src.Len(); i++ {
		if got, want := dst.ServiceName(dst.Resource[i]), src.ServiceName(src.Resource[i]); got != want {
			t.Errorf("record %d service %q want %q", i, got, want)
		}
		if dst.String(Str(dst.Body[i])) != "hello" || dst.String(dst.SeverityText[i]) != "WARN" {
			t.Errorf("record %d strings not copied", i)
		}
		if dst.Time[i] != src.Time[i] || dst.TraceID[i] != src.TraceID[i] {
			t.Errorf("record %d fixed fields differ", i)
		}
		r := dst.Attr[i]
		if r.Len() != 2 || dst.Keys.Name(dst.Attrs.Key[r.Start]) != "ratio" || !math.IsNaN(dst.AttrDouble(int(r.Start))) || !dst.AttrBool(int(r.Start+1)) {
			t.Errorf("record %d attributes not copied exactly", i)
		}
	}
	// Resetting and refilling the source at the same address must not reuse
	// stale resource mappings.
	src.Reset()
	start := uint32(src.Attrs.Len())
	src.Attrs.Append(src.Keys.IDString("service.name"), ValueString, uint64(src.AppendString("new")))
	src.Resources = append(src.Resources, Resource{Attrs: Range{start, uint32(src.Attrs.Len())}})
	src.Scopes = append(src.Scopes, Scope{})
	src.AppendRecord(0, 0)
	dst.CopyFrom(src, 0)
	if got := dst.ServiceName(dst.Resource[dst.Len()-1]); got != "new" {
		t.Errorf("after source reset, service %q want %q", got, "new")
	}
}

func TestSeriesIDIgnoresAttributeOrder(t *testing.T) {
	build := func(order []string, val string) *Metrics {
		m := &Metrics{}
		m.Resources = append(m.Resources, Resource{})
		m.Scopes = append(m.Scopes, Scope{})
		m.Descs = append(m.Descs, MetricDesc{Name: m.AppendString("http.requests"), Type: MetricSum})
		i := m.AppendPoint(0, 0, 0)
		a := uint32(m.Attrs.Len())
		for _, k := range order {
			v := val
			if k != "method" {
				v = k + "-value"
			}
			m.Attrs.Append(m.Keys.IDString(k), ValueString, uint64(m.AppendString(v)))
		}
		m.Attr[i] = Range{a, uint32(m.Attrs.Len())}
		m.ComputeSeriesIDs()
		return m
	}
	a := build([]string{"method", "code", "route"}, "GET")
	b := build([]string{"route", "method", "code"}, "GET")
	c := build([]string{"route", "method", "code"}, "POST")
	if a.SeriesID[0] != b.SeriesID[0] {
		t.Errorf("attribute order changed the series id")
	}
	if a.SeriesID[0] == c.SeriesID[0] {
		t.Errorf("different attribute values gave the same series id")
	}
	// Same value, different type: a different series.
	d := &Metrics{}
	d.Resources, d.Scopes = append(d.Resources, Resource{}), append(d.Scopes, Scope{})
	d.Descs = append(d.Descs, MetricDesc{Name: d.AppendString("x")})
	e := &Metrics{}
	e.Resources, e.Scopes = append(e.Resources, Resource{}), append(e.Scopes, Scope{})
	e.Descs = append(e.Descs, MetricDesc{Name: e.AppendString("x")})
	d.AppendPoint(0, 0, 0)
	e.AppendPoint(0, 0, 0)
	d.Attrs.Append(d.Keys.IDString("k"), ValueInt, 1)
	e.Attrs.Append(e.Keys.IDString("k"), ValueBool, 1)
	d.Attr[0], e.Attr[0] = Range{0, 1}, Range{0, 1}
	d.ComputeSeriesIDs()
	e.ComputeSeriesIDs()
	if d.SeriesID[0] == e.SeriesID[0] {
		t.Errorf("int 1 and bool true gave the same series id")
	}
}

func TestKeyTableNoAllocOnHit(t *testing.T) {
	var kt KeyTable
	key := []byte("http.method")
	kt.ID(key)
	if n := testing.AllocsPerRun(100, func() { kt.ID(key) }); n != 0 {
		t.Errorf("KeyTable.ID allocates %.1f times on a hit", n)
	}
}
