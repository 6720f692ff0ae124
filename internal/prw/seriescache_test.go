package prw

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/signal"
)

// decoded is what a Decode call gave, by content: every point with its
// descriptor, attributes and series id (dumpRows), the attributes' key ids
// and value Strs as stored, the stats and the error.
type decoded struct {
	rows []string
	vals []uint64
	keys []signal.KeyID
	st   Stats
	err  string
}

// decodeV1With decodes the 1.0 bodies one after the other into one batch
// with a decoder using cache c (nil: none).
func decodeV1With(t *testing.T, c *SeriesCache, bodies ...[]byte) decoded {
	t.Helper()
	var d Decoder
	d.SetSeriesCache(c)
	var m signal.Metrics
	var out decoded
	for _, body := range bodies {
		st, err := d.DecodeV1(&m, body)
		out.st.Series += st.Series
		out.st.Samples += st.Samples
		out.st.Histograms += st.Histograms
		out.st.Exemplars += st.Exemplars
		out.st.Dropped += st.Dropped
		out.st.ExemplarsDropped += st.ExemplarsDropped
		out.st.Unsorted += st.Unsorted
		if err != nil {
			out.err += err.Error() + ";"
		}
	}
	ids := slices.Clone(m.SeriesID)
	m.ComputeSeriesIDs()
	if !slices.Equal(ids, m.SeriesID) {
		t.Fatal("decoded series ids differ from ComputeSeriesIDs")
	}
	out.rows = dumpRows(&m)
	out.vals = slices.Clone(m.Attrs.Val)
	out.keys = slices.Clone(m.Attrs.Key)
	return out
}

// checkSame fails when got is not exactly want.
func checkSame(t *testing.T, what string, got, want decoded) {
	t.Helper()
	if got.err != want.err || got.st != want.st {
		t.Fatalf("%s: stats %+v error %q, want %+v %q", what, got.st, got.err, want.st, want.err)
	}
	if len(got.rows) != len(want.rows) {
		t.Fatalf("%s: %d points, want %d", what, len(got.rows), len(want.rows))
	}
	for i := range got.rows {
		if got.rows[i] != want.rows[i] {
			t.Fatalf("%s: point %d:\ngot  %s\nwant %s", what, i, got.rows[i], want.rows[i])
		}
	}
	if !slices.Equal(got.vals, want.vals) || !slices.Equal(got.keys, want.keys) {
		t.Fatalf("%s: attributes stored differently", what)
	}
}

func labelsOf(kv ...string) []prompb.Label {
	var out []prompb.Label
	for i := 0; i < len(kv); i += 2 {
		out = append(out, prompb.Label{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

func marshalV1(t *testing.T, series ...prompb.TimeSeries) []byte {
	t.Helper()
	b, err := (&prompb.WriteRequest{Timeseries: series}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// cacheBodies are 1.0 requests of every shape the cache must get right.
func cacheBodies(t *testing.T) map[string][]byte {
	out := map[string][]byte{}
	out["oracle"], _ = v1Request(oracleLoad()).Marshal() // histograms, exemplars, metadata, unsorted
	out["bench"], _ = benchBodies(300, 10)
	out["shared"], _ = benchBodiesShared(300, 10)
	out["reuse"] = marshalV1(t, reuseLoad(rand.New(rand.NewPCG(3, 1)), 300)...)
	long := strings.Repeat("v", 200) // a one-byte length no more
	sample := []prompb.Sample{{Value: 1, Timestamp: 5}}
	var mixed []prompb.TimeSeries
	for i, ls := range [][]prompb.Label{
		labelsOf("__name__", "a", "job", "j", "zone", "z"),
		labelsOf("zone", "z", "__name__", "a", "job", "j"), // unsorted: decoded, never cached
		labelsOf("__name__", "a", "job", "j", "job", "k"),  // duplicate: dropped
		labelsOf("__name__", "", "job", "j"),               // empty name: dropped
		labelsOf("job", "j"),                               // no __name__: dropped
		labelsOf("__name__", "a", "job", "\xff"),           // not UTF-8: dropped
		labelsOf("__name__", "a", "job", long),
		labelsOf("__name__", "a", strings.Repeat("n", 130), "x"),
		labelsOf("__name__", "a", "job", ""), // empty value, not written by the encoder
		labelsOf("__name__", "b"),
		labelsOf("A", "1", "__name__", "a", "job", "j"),
	} {
		ts := prompb.TimeSeries{Labels: ls, Samples: sample}
		if i%3 == 0 {
			ts.Samples = append(ts.Samples, prompb.Sample{Value: 2, Timestamp: 6})
		}
		mixed = append(mixed, ts)
	}
	// A series whose sample timestamp is out of range: dropped, hit or not.
	mixed = append(mixed, prompb.TimeSeries{Labels: labelsOf("__name__", "a", "job", "j", "zone", "z"), Samples: []prompb.Sample{{Value: 1, Timestamp: 1 << 62}}})
	// One without samples: nothing appended.
	mixed = append(mixed, prompb.TimeSeries{Labels: labelsOf("__name__", "a", "job", "j", "zone", "z")})
	out["mixed"] = marshalV1(t, mixed...)
	// Labels after the samples (a valid encoding no encoder writes): the
	// label fields at the start are a prefix of the series' labels.
	s1 := marshalV1(t, prompb.TimeSeries{Labels: labelsOf("__name__", "a", "job", "j"), Samples: sample})
	s2 := marshalV1(t, prompb.TimeSeries{Labels: labelsOf("zone", "z")})
	out["late labels"] = append(append(append([]byte{}, s1...), s1...), spliceSeries(s1, s2)...)
	return out
}

// spliceSeries appends the labels of the 1.0 request b (one series) to the
// series of request a (one series), after its samples.
func spliceSeries(a, b []byte) []byte {
	sa, sb := a[2:], b[2:] // one byte of tag, one of length (short series)
	body := append(append([]byte{}, sa...), sb...)
	return append([]byte{0x0a, byte(len(body))}, body...)
}

// TestSeriesCacheMatchesNoCache: a decode with the series cache, whether
// its series miss (first decode) or hit (the decodes after), gives exactly
// what the decode without the cache gives: the same points, attributes
// (the same Strs), series ids, stats and errors, for series of every
// shape (histograms, exemplars, unsorted, invalid, long labels, labels
// after samples, out-of-range samples) and requests decoded one after the
// other into one batch.
func TestSeriesCacheMatchesNoCache(t *testing.T) {
	bodies := cacheBodies(t)
	var all [][]byte
	for name, body := range bodies {
		all = append(all, body)
		want := decodeV1With(t, nil, body)
		c := NewSeriesCache(DefaultSeriesCacheBytes)
		for round := range 3 {
			checkSame(t, fmt.Sprintf("%s round %d", name, round), decodeV1With(t, c, body), want)
		}
		st := c.Stats()
		if st.Inserts == 0 || st.Hits == 0 {
			t.Fatalf("%s: %+v: no series cached or found", name, st)
		}
		if name == "bench" && (st.Hits != 2*300 || st.Inserts != 300) {
			t.Fatalf("%s: %+v, want 300 inserts and 600 hits", name, st)
		}
	}
	c := NewSeriesCache(DefaultSeriesCacheBytes)
	want := decodeV1With(t, nil, all...)
	for round := range 2 {
		checkSame(t, fmt.Sprintf("all round %d", round), decodeV1With(t, c, all...), want)
	}
}

// TestSeriesCacheNeverCachesInvalid: a series whose labels are invalid
// (duplicate, empty or missing __name__, not UTF-8) or unsorted is never
// inserted, so each decode drops it (or sorts it) again with its own error.
func TestSeriesCacheNeverCachesInvalid(t *testing.T) {
	sample := []prompb.Sample{{Value: 1, Timestamp: 5}}
	for _, ls := range [][]prompb.Label{
		labelsOf("__name__", "a", "job", "j", "job", "k"),
		labelsOf("__name__", "", "job", "j"),
		labelsOf("job", "j"),
		labelsOf("__name__", "a", "job", "\xff"),
		labelsOf("__name__", "a", "", "x"),
		labelsOf("zone", "z", "__name__", "a"),
	} {
		body := marshalV1(t, prompb.TimeSeries{Labels: ls, Samples: sample})
		want := decodeV1With(t, nil, body)
		c := NewSeriesCache(DefaultSeriesCacheBytes)
		for range 2 {
			checkSame(t, fmt.Sprint(ls), decodeV1With(t, c, body), want)
		}
		if st := c.Stats(); st.Inserts != 0 || st.Hits != 0 {
			t.Fatalf("%v: %+v, want nothing cached", ls, st)
		}
	}
}

// TestSeriesCacheOneByteChanged: a series whose labels differ from a
// cached one's in one byte (a value, a name, or a value's length) misses
// and is decoded as itself; the others hit.
func TestSeriesCacheOneByteChanged(t *testing.T) {
	body, _ := benchBodies(100, 5)
	for _, change := range []struct{ from, to string }{
		{"value_3_50", "value_3_5X"},                               // a value's byte
		{"label_2\x12\x0avalue_2_50", "label_x\x12\x0avalue_2_50"}, // a name's (sorted after the others now)
		{"value_4_50", "value_4_5\x00"},                            // the last label's value (NUL is valid UTF-8)
		{"metric_7_total", "metric_7_totaL"},                       // __name__ of series 7, 57
	} {
		c := NewSeriesCache(DefaultSeriesCacheBytes)
		decodeV1With(t, c, body)
		changed := bytes.Replace(body, []byte(change.from), []byte(change.to), 1)
		if bytes.Equal(changed, body) {
			t.Fatalf("%q not in the request", change.from)
		}
		before := c.Stats()
		checkSame(t, change.to, decodeV1With(t, c, changed), decodeV1With(t, nil, changed))
		st := c.Stats()
		if misses, hits := st.Misses-before.Misses, st.Hits-before.Hits; misses != 1 || hits != 99 {
			t.Fatalf("%s: %d misses, %d hits; want 1 and 99", change.to, misses, hits)
		}
	}
}

// TestSeriesCacheCollisions: with every key of a length hashing alike,
// keys are told apart by their bytes (every series still gets exactly its
// labels and id), probes stop at maxCacheProbes (inserts past them are
// skipped), and what was inserted is found.
func TestSeriesCacheCollisions(t *testing.T) {
	body, _ := benchBodies(300, 5)
	c := NewSeriesCache(DefaultSeriesCacheBytes)
	c.collide = true
	want := decodeV1With(t, nil, body)
	for round := range 3 {
		checkSame(t, fmt.Sprintf("round %d", round), decodeV1With(t, c, body), want)
	}
	st := c.Stats()
	if st.Skipped == 0 || st.Hits == 0 || st.Inserts > 300 {
		t.Fatalf("%+v: want inserts skipped past the probe bound and hits", st)
	}
}

// TestSeriesCacheBounded: a cache smaller than the series it is sent
// empties its shards (Clears) and still decodes every series exactly; a
// full names table stops caching series with new names, nothing else.
func TestSeriesCacheBounded(t *testing.T) {
	body, _ := benchBodies(2000, 10)
	want := decodeV1With(t, nil, body)
	c := NewSeriesCache(0)
	c.shardBytes = 12 << 10 // about 30 series a shard, about as many as each gets
	for round := range 3 {
		checkSame(t, fmt.Sprintf("round %d", round), decodeV1With(t, c, body), want)
	}
	if st := c.Stats(); st.Clears == 0 || st.Hits == 0 {
		t.Fatalf("%+v: want shards cleared and hits", st)
	}
	for i := range c.shards {
		sh := &c.shards[i]
		if n := len(sh.keys) + 8*len(sh.attrs) + cacheEntryBytes*len(sh.ents); n > c.shardBytes {
			t.Fatalf("a shard holds %d bytes, more than its %d", n, c.shardBytes)
		}
	}
	c = NewSeriesCache(DefaultSeriesCacheBytes)
	c.maxNames = 6 // __name__'s value and 5 label names: the 10-label series do not fit
	five, _ := benchBodies(50, 4)
	checkSame(t, "five", decodeV1With(t, c, five, five), decodeV1With(t, nil, five, five))
	checkSame(t, "ten", decodeV1With(t, c, body, body), decodeV1With(t, nil, body, body))
	if st := c.Stats(); st.Skipped == 0 || st.Inserts == 0 || len(c.names) != 6 {
		t.Fatalf("%+v, %d names: want inserts skipped for want of names", st, len(c.names))
	}
}

// TestSeriesCacheConcurrent: decoders on several goroutines share one
// cache (as the receiver's exchanges and the lake loop do) and each gets
// exactly what a decode without the cache gives (run with -race).
func TestSeriesCacheConcurrent(t *testing.T) {
	bodies := cacheBodies(t)
	var list [][]byte
	for _, b := range bodies {
		list = append(list, b)
	}
	wants := make([]decoded, len(list))
	for i, b := range list {
		wants[i] = decodeV1With(t, nil, b)
	}
	c := NewSeriesCache(0)
	c.shardBytes = 8 << 10 // clears while others read
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			for r := range 20 {
				i := (g + r) % len(list)
				got := decodeV1With(t, c, list[i])
				if !slices.Equal(got.rows, wants[i].rows) || !slices.Equal(got.vals, wants[i].vals) || got.err != wants[i].err {
					errs <- fmt.Errorf("goroutine %d round %d: request %d decoded differently", g, r, i)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestSeriesCacheOff: a decoder uses no cache unless SetSeriesCache gave
// it one, and SetSeriesCache(nil) turns it off again; a decoder with a
// cache allocates nothing once its series are cached.
func TestSeriesCacheOff(t *testing.T) {
	body, _ := benchBodies(100, 10)
	before := DefaultSeriesCache().Stats()
	var d Decoder
	var m signal.Metrics
	if _, err := d.DecodeV1(&m, body); err != nil {
		t.Fatal(err)
	}
	if st := DefaultSeriesCache().Stats(); st != before {
		t.Fatalf("a decoder without a cache used the default one: %+v, then %+v", before, st)
	}
	c := NewSeriesCache(DefaultSeriesCacheBytes)
	d.SetSeriesCache(c)
	allocs := testing.AllocsPerRun(20, func() {
		m.Reset()
		if _, err := d.DecodeV1(&m, body); err != nil {
			t.Fatal(err)
		}
	})
	if st := c.Stats(); allocs != 0 || st.Hits < 20*100 {
		t.Fatalf("%v allocations per decode, %+v; want 0 and every series found", allocs, st)
	}
	d.SetSeriesCache(nil)
	before = c.Stats()
	if _, err := d.DecodeV1(&m, body); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st != before {
		t.Fatalf("a cache turned off saw %+v after %+v", st, before)
	}
}

// TestSeriesCacheProbation: a decoder whose lookups do not hit (every
// request brings new series) for a window longer than the cache holds
// goes on probation and uses the cache for one
// call in probationEvery only; when its series recur, the probation calls
// cache them and it comes off. Every call decodes exactly as without the
// cache.
func TestSeriesCacheProbation(t *testing.T) {
	// New series every call: the last label's value ends in letters
	// that count the calls.
	body, _ := benchRequests(2000, 5, func(i int) int { return i % 50 }, func(k, i int) string {
		if k == 4 {
			return fmt.Sprintf("v%d_AAAA", i)
		}
		return fmt.Sprintf("value_%d_%d", k, i)
	})
	var at []int
	for i := 0; ; {
		j := bytes.Index(body[i:], []byte("AAAA"))
		if j < 0 {
			break
		}
		at = append(at, i+j)
		i += j + 4
	}
	churn := func(call int) []byte {
		for _, p := range at {
			for k, r := 0, call; k < 4; k, r = k+1, r/26 {
				body[p+k] = byte('A' + r%26)
			}
		}
		return body
	}
	c := NewSeriesCache(256 << 20) // no shard fills: every series stays
	var d Decoder
	d.SetSeriesCache(c)
	var m signal.Metrics
	decodeOne := func(body []byte) {
		t.Helper()
		m.Reset()
		if _, err := d.DecodeV1(&m, body); err != nil {
			t.Fatal(err)
		}
	}
	calls := admitWindow/2000 + 1 // no hit in a window of lookups
	for call := range calls {
		decodeOne(churn(call))
		if d.adm.probation != (call == calls-1) {
			t.Fatalf("call %d, %+v: on probation %t", call, c.Stats(), d.adm.probation)
		}
	}
	before := c.Stats()
	for call := calls; call < calls+2*probationEvery; call++ {
		decodeOne(churn(call))
	}
	st := c.Stats()
	if lookups := st.Hits + st.Misses - before.Hits - before.Misses; lookups != 2*2000 || st.ProbationCalls != 2*(probationEvery-1) {
		t.Fatalf("on probation: %d lookups in %d calls, %d calls without the cache; want 2 calls' 4000 and %d", lookups, 2*probationEvery, st.ProbationCalls, 2*(probationEvery-1))
	}
	stable, _ := benchBodies(2000, 5)
	want := decodeV1With(t, nil, stable)
	for call := 0; d.adm.probation; call++ {
		if call == 8*probationEvery {
			t.Fatalf("%+v: still on probation after %d calls of recurring series", c.Stats(), call)
		}
		decodeOne(stable)
		if !slices.Equal(dumpRows(&m), want.rows) {
			t.Fatalf("call %d: decoded differently", call)
		}
	}
	before = c.Stats()
	decodeOne(stable)
	if st := c.Stats(); st.Hits-before.Hits != 2000 || st.Clears != 0 {
		t.Fatalf("off probation: %d hits, %+v; want 2000 and no shard emptied", st.Hits-before.Hits, st)
	}
}

// TestSeriesCacheWarmsRoundRobin: a load of more series than one request
// holds, sent round robin (16 requests of 2,000 series), misses in its
// first round without putting the decoder on probation and hits every
// series from its second round on.
func TestSeriesCacheWarmsRoundRobin(t *testing.T) {
	var bodies [][]byte
	for r := range 16 {
		b, _ := benchRequests(2000, 3, func(i int) int { return i % 50 }, func(k, i int) string {
			return fmt.Sprintf("v_%d_%d", k, r*2000+i)
		})
		bodies = append(bodies, b)
	}
	c := NewSeriesCache(DefaultSeriesCacheBytes)
	var d Decoder
	d.SetSeriesCache(c)
	var m signal.Metrics
	for round := range 3 {
		before := c.Stats()
		for _, b := range bodies {
			m.Reset()
			if _, err := d.DecodeV1(&m, b); err != nil {
				t.Fatal(err)
			}
		}
		st := c.Stats()
		if hits := st.Hits - before.Hits; d.adm.probation || (round > 0 && hits != 16*2000) {
			t.Fatalf("round %d: %d hits, %+v, on probation %t", round, hits, st, d.adm.probation)
		}
	}
}
