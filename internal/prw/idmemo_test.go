package prw

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/prometheus/prompb"

	"github.com/sluice-dev/sluice/internal/signal"
)

// pbLabel is a Label field (1) of a TimeSeries: 0x0a len {0x0a name 0x12 value}.
func pbLabel(name, value string) []byte {
	var l []byte
	l = binary.AppendUvarint(append(l, 0x0a), uint64(len(name)))
	l = append(l, name...)
	l = binary.AppendUvarint(append(l, 0x12), uint64(len(value)))
	l = append(l, value...)
	return append(binary.AppendUvarint([]byte{0x0a}, uint64(len(l))), l...)
}

// pbSample is a Sample field (2) of a TimeSeries.
func pbSample(v float64, ts int64) []byte {
	s, _ := (&prompb.Sample{Value: v, Timestamp: ts}).Marshal()
	return append(binary.AppendUvarint([]byte{0x12}, uint64(len(s))), s...)
}

// pbSeries is a TimeSeries field (1) of a WriteRequest holding fields.
func pbSeries(fields ...[]byte) []byte {
	ts := bytes.Join(fields, nil)
	return append(binary.AppendUvarint([]byte{0x0a}, uint64(len(ts))), ts...)
}

// memoLoads are 1.0 requests for the memo tests: plain ones, whose series
// the memo takes, and every shape it must not take or must take as the
// decoder alone does.
func memoLoads() map[string][]byte {
	loads := map[string][]byte{}
	loads["bench"], _ = benchBodies(100, 10)
	loads["shared"], _ = benchBodiesShared(200, 10)
	loads["oracle"], _ = v1Request(oracleLoad()).Marshal()
	const ts = 1700000000000
	long := string(bytes.Repeat([]byte("v"), 200))
	loads["odd"] = bytes.Join([][]byte{
		// unsorted: sorted in the batch, the id of the sorted labels
		pbSeries(pbLabel("__name__", "up"), pbLabel("zone", "a"), pbLabel("job", "x"), pbSample(1, ts)),
		// an empty value: the label is dropped
		pbSeries(pbLabel("__name__", "up"), pbLabel("job", ""), pbLabel("zone", "b"), pbSample(2, ts)),
		// a value of two-byte length: not in the memo's key
		pbSeries(pbLabel("__name__", "up"), pbLabel("job", long), pbSample(3, ts)),
		// labels after the sample
		pbSeries(pbLabel("__name__", "up"), pbSample(4, ts), pbLabel("zone", "c")),
		// a sample out of range: dropped in the second pass
		pbSeries(pbLabel("__name__", "up"), pbLabel("zone", "d"), pbSample(5, 1<<62)),
		// invalid UTF-8, a duplicate name, no name: dropped
		pbSeries(pbLabel("__name__", "up"), pbLabel("zone", "\xff"), pbSample(6, ts)),
		pbSeries(pbLabel("__name__", "up"), pbLabel("zone", "e"), pbLabel("zone", "f"), pbSample(7, ts)),
		pbSeries(pbLabel("zone", "g"), pbSample(8, ts)),
		// the plain ones again, after the odd ones
		pbSeries(pbLabel("__name__", "up"), pbLabel("job", "x"), pbLabel("zone", "a"), pbSample(9, ts)),
		pbSeries(pbLabel("__name__", "up"), pbLabel("zone", "b"), pbSample(10, ts)),
		// the labels a key of the long and the late ones covered
		pbSeries(pbLabel("__name__", "up"), pbSample(11, ts)),
	}, nil)
	return loads
}

// decodeMemo decodes body into a new batch with d.
func decodeMemo(t *testing.T, d *Decoder, body []byte) (*signal.Metrics, string) {
	t.Helper()
	m := &signal.Metrics{}
	st, err := d.DecodeV1(m, body)
	return m, fmt.Sprintf("%+v %v", st, err)
}

// sameBatch fails unless a and b hold the same points, attributes and ids.
func sameBatch(t *testing.T, what string, a, b *signal.Metrics) {
	t.Helper()
	switch {
	case !slices.Equal(a.SeriesID, b.SeriesID):
		t.Fatalf("%s: series ids %x, want %x", what, b.SeriesID, a.SeriesID)
	case !slices.Equal(a.Time, b.Time) || !slices.Equal(a.Number, b.Number) || !slices.Equal(a.Desc, b.Desc):
		t.Fatalf("%s: points differ", what)
	case !slices.Equal(a.Attr, b.Attr) || !slices.Equal(a.Attrs.Key, b.Attrs.Key) ||
		!slices.Equal(a.Attrs.Type, b.Attrs.Type) || !slices.Equal(a.Attrs.Val, b.Attrs.Val):
		t.Fatalf("%s: attributes differ", what)
	case !bytes.Equal(a.Buf, b.Buf):
		t.Fatalf("%s: arenas differ", what)
	}
	if ra, rb := readBackString(t, a), readBackString(t, b); ra != rb {
		t.Fatalf("%s: read back differently:\n%s\nwant\n%s", what, rb, ra)
	}
	ids := slices.Clone(b.SeriesID)
	b.ComputeSeriesIDs()
	if !slices.Equal(ids, b.SeriesID) {
		t.Fatalf("%s: ids %x, ComputeSeriesIDs %x", what, ids, b.SeriesID)
	}
}

// readBackString is readBack as text, sorted, histograms by String: two
// batches whose points hold a NaN compare equal (reflect.DeepEqual would
// not, NaN != NaN) when their points print alike.
func readBackString(t *testing.T, m *signal.Metrics) string {
	var sb strings.Builder
	rb := readBack(t, m)
	for _, k := range slices.Sorted(maps.Keys(rb)) {
		for _, p := range rb[k] {
			fmt.Fprintf(&sb, "%s %d %d %x %d %d", k, p.t, p.start, p.v, p.hint, p.nEx)
			if p.h != nil {
				sb.WriteString(" " + p.h.String())
			}
			if p.fh != nil {
				sb.WriteString(" " + p.fh.String())
			}
			sb.WriteByte('\n')
		}
	}
	return sb.String()
}

// TestIDMemoMatchesNoMemo: a request decoded with the memo, its series
// first missing then hitting, gives what the decoder gives without it.
func TestIDMemoMatchesNoMemo(t *testing.T) {
	for name, body := range memoLoads() {
		var plain Decoder
		plain.useIDMemo(nil)
		want, wantSt := decodeMemo(t, &plain, body)
		var d Decoder
		d.useIDMemo(NewIDMemo(1 << 12))
		for round := range 3 {
			h0 := d.ids.hits
			got, st := decodeMemo(t, &d, body)
			if st != wantSt {
				t.Fatalf("%s round %d: %s, want %s", name, round, st, wantSt)
			}
			sameBatch(t, fmt.Sprintf("%s round %d", name, round), want, got)
			if round > 0 && d.ids.hits == h0 {
				t.Fatalf("%s round %d: no series hit the memo", name, round)
			}
		}
	}
}

// TestIDMemoOneByteChanged: a series whose value, name or metric name
// differs by one byte from one the memo holds misses and gets its own id.
func TestIDMemoOneByteChanged(t *testing.T) {
	body, _ := benchBodies(100, 10)
	var d Decoder
	// 16,384 buckets for ~100 series: a bucket overflowing (a second
	// miss) has a chance of about 1e-9.
	d.useIDMemo(NewIDMemo(1 << 16))
	decodeMemo(t, &d, body)
	for _, change := range []struct{ from, to string }{
		{"value_3_42", "value_3_4X"},           // a value
		{"label_7", "label_X"},                 // a label name (every series has it)
		{"metric_42_total", "metric_42_totaX"}, // a metric name
	} {
		changed := bytes.Replace(body, []byte(change.from), []byte(change.to), 1)
		if bytes.Equal(changed, body) {
			t.Fatalf("%q not in the request", change.from)
		}
		var plain Decoder
		plain.useIDMemo(nil)
		want, _ := decodeMemo(t, &plain, changed)
		h0, l0 := d.ids.hits, d.ids.look
		got, _ := decodeMemo(t, &d, changed)
		sameBatch(t, change.to, want, got)
		if misses := (d.ids.look - l0) - (d.ids.hits - h0); misses != 1 {
			t.Fatalf("%s: %d misses, want 1", change.to, misses)
		}
	}
}

// TestIDMemoTrustsItsKey: a key is trusted without comparing bytes (see
// IDMemo: a collision has probability 2^-64 per pair, and the seed is per
// process): an entry forced under a series' key gives that series the
// entry's id; its attributes, name and point are still its own.
func TestIDMemoTrustsItsKey(t *testing.T) {
	body := pbSeries(pbLabel("__name__", "up"), pbLabel("job", "x"), pbSample(1, 1700000000000))
	var plain Decoder
	plain.useIDMemo(nil)
	want, _ := decodeMemo(t, &plain, body)
	var d Decoder
	memo := NewIDMemo(64)
	d.useIDMemo(memo)
	// The label fields are the TimeSeries' bytes before its sample.
	labels := bytes.Join([][]byte{pbLabel("__name__", "up"), pbLabel("job", "x")}, nil)
	const forced = 0x1234567890abcdef
	memo.insert(idKey(labels), forced)
	got, _ := decodeMemo(t, &d, body)
	if got.SeriesID[0] != forced {
		t.Fatalf("series id %x, want the forced entry's %x", got.SeriesID[0], uint64(forced))
	}
	got.SeriesID[0] = want.SeriesID[0]
	sameBatch(t, "forced", want, got)
	// Any other series of the request is not affected.
	other := pbSeries(pbLabel("__name__", "up"), pbLabel("job", "y"), pbSample(1, 1700000000000))
	want, _ = decodeMemo(t, &plain, other)
	got, _ = decodeMemo(t, &d, other)
	sameBatch(t, "other", want, got)
}

// TestIDMemoTable: lookups find what was inserted, a full bucket replaces
// a slot, the table never grows, idKey is never 0 (an empty slot's).
func TestIDMemoTable(t *testing.T) {
	m := NewIDMemo(100)
	if len(m.slots) != 128 {
		t.Fatalf("%d slots, want 128", len(m.slots))
	}
	if _, ok := m.lookup(1); ok {
		t.Fatal("a key found in an empty table")
	}
	for k := uint64(1); k <= 20000; k++ {
		m.insert(k*0x9E3779B97F4A7C15|1, k)
	}
	if len(m.slots) != 128 {
		t.Fatal("the table grew")
	}
	found := 0
	for k := uint64(1); k <= 20000; k++ {
		if id, ok := m.lookup(k*0x9E3779B97F4A7C15 | 1); ok {
			if id != k {
				t.Fatalf("key %d: id %d", k, id)
			}
			found++
		}
	}
	if found == 0 || found > 128 {
		t.Fatalf("%d keys found in 128 slots", found)
	}
	if idKey(nil) == 0 || idKey([]byte("a")) == idKey([]byte("b")) {
		t.Fatal("idKey")
	}
}

// TestIDMemoAdmission: a decoder whose series are all new stops using the
// memo but for one call in 16, and takes it again when those calls hit.
func TestIDMemoAdmission(t *testing.T) {
	var d Decoder
	d.useIDMemo(NewIDMemo(1 << 16))
	var m signal.Metrics
	for r := 0; !d.ids.probation; r++ {
		if r > 100 {
			t.Fatal("all new series for 100 calls: not on probation")
		}
		body, _ := benchRequests(1000, 3, func(i int) int { return i % 50 }, func(k, i int) string {
			return fmt.Sprintf("new_%d_%d_%d", r, k, i)
		})
		m.Reset()
		if _, err := d.DecodeV1(&m, body); err != nil {
			t.Fatal(err)
		}
	}
	on := 0
	body, _ := benchBodies(1000, 3)
	for r := range 64 {
		m.Reset()
		if _, err := d.DecodeV1(&m, body); err != nil {
			t.Fatal(err)
		}
		if d.ids.on {
			on++
		}
		if !d.ids.probation {
			if on == 0 || r < 16 {
				t.Fatalf("left probation after %d calls, %d with the memo", r+1, on)
			}
			return
		}
	}
	t.Fatalf("the same series 64 times: still on probation (%d calls with the memo)", on)
}

// TestIDMemoConcurrent: decoders sharing one small memo (entries replaced
// under them) give every series its id; run with -race.
func TestIDMemoConcurrent(t *testing.T) {
	memo := NewIDMemo(256)
	var bodies [][]byte
	for r := range 8 {
		b, _ := benchRequests(300, 5, func(i int) int { return i % 7 }, func(k, i int) string {
			return fmt.Sprintf("c_%d_%d", k, (r*300+i)%1000)
		})
		bodies = append(bodies, b)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			var d Decoder
			d.useIDMemo(memo)
			var m signal.Metrics
			for r := range 40 {
				m.Reset()
				if _, err := d.DecodeV1(&m, bodies[(g+r)%len(bodies)]); err != nil {
					errs <- err
					return
				}
				ids := slices.Clone(m.SeriesID)
				m.ComputeSeriesIDs()
				if !slices.Equal(ids, m.SeriesID) {
					errs <- fmt.Errorf("goroutine %d round %d: wrong series ids", g, r)
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
