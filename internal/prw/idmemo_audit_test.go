package prw

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/internal/signal"
)

// pbLabelValueFirst is pbLabel with the value field before the name (an
// encoder may write a message's fields in any order).
func pbLabelValueFirst(name, value string) []byte {
	var l []byte
	l = binary.AppendUvarint(append(l, 0x12), uint64(len(value)))
	l = append(l, value...)
	l = binary.AppendUvarint(append(l, 0x0a), uint64(len(name)))
	l = append(l, name...)
	return append(binary.AppendUvarint([]byte{0x0a}, uint64(len(l))), l...)
}

// TestIDMemoNormalisedFormsAudit (audit20): one series written in forms
// whose label bytes differ only in what the decoder normalises (labels
// unsorted, a label of empty value added, a label's value before its
// name) gets one id, the one the decoder computes without the memo, in
// every form, from decoders sharing one small memo (entries replaced
// under them) at once; run with -race. Each form's key is its own bytes,
// so every form may sit in the memo, each with the same id.
func TestIDMemoNormalisedFormsAudit(t *testing.T) {
	const ts = 1700000000000
	const n = 200
	forms := func(i int) [][]byte {
		zone, job := fmt.Sprint("z", i), fmt.Sprint("j", i%7)
		return [][]byte{
			pbSeries(pbLabel("__name__", "up"), pbLabel("job", job), pbLabel("zone", zone), pbSample(1, ts)),
			pbSeries(pbLabel("zone", zone), pbLabel("__name__", "up"), pbLabel("job", job), pbSample(1, ts)),
			pbSeries(pbLabel("__name__", "up"), pbLabel("empty", ""), pbLabel("job", job), pbLabel("zone", zone), pbSample(1, ts)),
			pbSeries(pbLabel("__name__", "up"), pbLabelValueFirst("job", job), pbLabel("zone", zone), pbSample(1, ts)),
		}
	}
	// One request per form, and one of the forms interleaved.
	nf := len(forms(0))
	bodies := make([][]byte, nf+1)
	for i := range n {
		fs := forms(i)
		for f := range nf {
			bodies[f] = append(bodies[f], fs[f]...)
		}
		bodies[nf] = append(bodies[nf], fs[i%nf]...)
	}
	var plain Decoder
	plain.useIDMemo(nil)
	var want signal.Metrics
	if _, err := plain.DecodeV1(&want, bodies[0]); err != nil || want.Len() != n {
		t.Fatalf("decode: %d points, %v", want.Len(), err)
	}
	for f := 1; f <= nf; f++ {
		var m signal.Metrics
		if _, err := plain.DecodeV1(&m, bodies[f]); err != nil || m.Len() != n {
			t.Fatalf("form %d: %d points, %v", f, m.Len(), err)
		}
		for i := range n {
			if m.SeriesID[i] != want.SeriesID[i] {
				t.Fatalf("form %d series %d: the decoder alone gives another id: the forms are not one series", f, i)
			}
		}
	}
	memo := NewIDMemo(256)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	hits := make([]uint32, 4)
	for g := range 4 {
		wg.Go(func() {
			var d Decoder
			d.useIDMemo(memo)
			var m signal.Metrics
			for r := range 30 {
				f := (g + r) % len(bodies)
				m.Reset()
				if _, err := d.DecodeV1(&m, bodies[f]); err != nil {
					errs <- err
					return
				}
				for i := range n {
					if m.SeriesID[i] != want.SeriesID[i] {
						errs <- fmt.Errorf("goroutine %d round %d form %d series %d: id %x, the decoder's %x", g, r, f, i, m.SeriesID[i], want.SeriesID[i])
						return
					}
				}
			}
			hits[g] = d.ids.hits
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := uint32(0)
	for _, h := range hits {
		total += h
	}
	if total == 0 {
		t.Fatal("no lookup hit the memo: the test does not cover the hit path")
	}
}
