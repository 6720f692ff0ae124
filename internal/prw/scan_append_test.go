package prw

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/signal"
)

// dumpRows renders every point of m with everything it references (its
// descriptor, resource and scope by content, its attributes by key name
// and value), so that batches built different ways compare by content.
func dumpRows(m *signal.Metrics) []string {
	attrs := func(r signal.Range) string {
		s := ""
		for a := r.Start; a < r.End; a++ {
			s += fmt.Sprintf("%s:%d=%q,", m.Keys.Name(m.Attrs.Key[a]), m.Attrs.Type[a], m.AttrString(int(a)))
		}
		return s
	}
	out := make([]string, m.Len())
	for i := range m.Len() {
		d := m.Descs[m.Desc[i]]
		res := m.Resources[m.Resource[i]]
		sc := m.Scopes[m.Scope[i]]
		out[i] = fmt.Sprintf("desc{%q %q %q %v %v %v [%s]} res{[%s] %d %q} scope{%q %q [%s] %d %q} t=%d st=%d attr=[%s] fl=%d ex=%d id=%x nt=%v n=%x c=%d s=%v h=%d b=%d/%d",
			m.String(d.Name), m.String(d.Description), m.String(d.Unit), d.Type, d.Temporality, d.Monotonic, attrs(d.Metadata),
			attrs(res.Attrs), res.DroppedAttrs, m.String(res.SchemaURL),
			m.String(sc.Name), m.String(sc.Version), attrs(sc.Attrs), sc.DroppedAttrs, m.String(sc.SchemaURL),
			m.Time[i], m.StartTime[i], attrs(m.Attr[i]), m.Flags[i], m.Exemplars[i].Len(), m.SeriesID[i],
			m.NumberType[i], m.Number[i], m.Count[i], m.Sum[i], m.Has[i], m.BucketCounts[i].Len(), m.Bounds[i].Len())
	}
	return out
}

// sharing describes which points of m share one attribute Range and which
// attribute values share one Str: what the lake's encoder compares by.
func sharing(m *signal.Metrics) string {
	s := ""
	for i := range m.Len() {
		for j := range i {
			if m.Attr[i] == m.Attr[j] && m.Attr[i].Len() > 0 {
				s += fmt.Sprintf("%d=%d ", i, j)
				break
			}
		}
	}
	return s
}

// TestAppendV1MatchesDecodeCopy: appending scanned requests straight into
// a batch (AppendV1, the lake loop's remote-write path) gives the batch the
// lake writer's copy of the decoded requests gives (DecodeV1, then
// signal.Metrics.CopyRows into a partition batch with ShareAttrSets): the
// same points with the same descriptors, resources, scopes, attributes,
// series ids, times and values bit for bit (NaN stale markers too), the
// same attribute sets shared and the same values interned, whichever way
// each request came in (the two ways mixed in one batch).
func TestAppendV1MatchesDecodeCopy(t *testing.T) {
	long := string(make([]byte, 300))
	handmade := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: []prompb.Label{{Name: "__name__", Value: "a"}, {Name: "x", Value: "1"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 5}, {Value: math.Float64frombits(0x7ff0000000000002), Timestamp: 6}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "b"}, {Name: "x", Value: "1"}, {Name: "y", Value: "ü"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 0}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "a"}, {Name: "x", Value: long}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 5}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "a"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 5}}},
		{Labels: []prompb.Label{{Name: "A", Value: "1"}, {Name: "__name__", Value: "a"}, {Name: "x", Value: "0"}}, Samples: []prompb.Sample{{Value: -0.0, Timestamp: 5}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "a"}, {Name: "x", Value: "1"}}, Samples: []prompb.Sample{{Value: 7, Timestamp: 8}}},
	}}
	hb, err := handmade.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var bodies [][]byte
	bodies = append(bodies, hb)
	for _, shape := range [][2]int{{1, 0}, {100, 5}, {1500, 8}, {300, 10}} {
		b1, _ := benchBodies(shape[0], shape[1])
		b2, _ := benchBodiesNamed(shape[0], shape[1], func(i int) int { return i % 7 })
		bodies = append(bodies, b1, b2, b1) // b1 twice: its series recur
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 6 {
		var copied, direct signal.Metrics
		copied.ShareAttrSets, direct.ShareAttrSets = true, true
		var d Decoder
		var sc Scanner
		var app Appender
		var dec signal.Metrics
		for i, body := range bodies {
			// The reference: decode, then the writer's copy.
			dec.Reset()
			if _, err := d.DecodeV1(&dec, body); err != nil {
				t.Fatalf("body %d: %v", i, err)
			}
			copied.CopyRows(&dec, signal.Rows{From: 0, To: dec.Len()})
			if !sc.ScanV1(body) {
				t.Fatalf("body %d: not plain", i)
			}
			// Round 0 appends every request, later rounds mix the ways.
			if round > 0 && rng.IntN(2) == 0 {
				direct.CopyRows(&dec, signal.Rows{From: 0, To: dec.Len()})
				continue
			}
			n0 := direct.Len()
			app.AppendV1(&direct, &sc)
			if got := direct.Len() - n0; got != sc.Samples() {
				t.Fatalf("body %d: appended %d points for %d samples", i, got, sc.Samples())
			}
		}
		a, b := dumpRows(&copied), dumpRows(&direct)
		if len(a) != len(b) {
			t.Fatalf("round %d: %d points copied, %d appended", round, len(a), len(b))
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("round %d point %d:\ncopied   %s\nappended %s", round, i, a[i], b[i])
			}
		}
		if sa, sb := sharing(&copied), sharing(&direct); sa != sb {
			t.Fatalf("round %d: attribute sets shared differently", round)
		}
		if copied.Attrs.Len() != direct.Attrs.Len() {
			t.Fatalf("round %d: %d attributes stored copied, %d appended", round, copied.Attrs.Len(), direct.Attrs.Len())
		}
		// Interned: equal values of one key are one Str in both batches.
		for _, m := range []*signal.Metrics{&copied, &direct} {
			seen := map[string]signal.Str{}
			for a := range m.Attrs.Len() {
				k := m.Keys.Name(m.Attrs.Key[a]) + "\x00" + m.AttrString(a)
				s := signal.Str(m.Attrs.Val[a])
				if p, ok := seen[k]; ok && p != s {
					t.Fatalf("round %d: value %q stored twice", round, k)
				}
				seen[k] = s
			}
		}
	}
}

// TestAppendV1AllocatesNothingInSteadyState: appending into a batch that
// has grown allocates nothing per request.
func TestAppendV1AllocatesNothingInSteadyState(t *testing.T) {
	b1, _ := benchBodies(1500, 8)
	var sc Scanner
	var app Appender
	var m signal.Metrics
	m.ShareAttrSets = true
	run := func() {
		m.Reset()
		for range 4 {
			if !sc.ScanV1(b1) {
				t.Fatal("not plain")
			}
			app.AppendV1(&m, &sc)
		}
	}
	run()
	if n := testing.AllocsPerRun(5, run); n > 0 {
		t.Fatalf("%v allocations per run", n)
	}
}
