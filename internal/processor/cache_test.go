package processor

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/waittest"
)

const sharedRules = `
metrics:
  - {name: d, action: drop, match: '{user_id=~"u1.*"}'}
  - name: rl
    action: relabel
    relabel: [{action: replace, target_label: env, replacement: prod}, {action: labeldrop, regex: code}]
  - {name: lim, action: limit, per: label, label: user_id, max_values: 1000000}
`

// TestConcurrentRequestsShareDecisions: requests processed at once by
// several goroutines (one Scratch each, one shared decision cache) give
// what one goroutine gives alone.
func TestConcurrentRequestsShareDecisions(t *testing.T) {
	run := func(r *Rules, s *Scratch, k int) string {
		b := batch(t, 300, 150+k%3)
		r.ProcessMetrics(b, s)
		var out []string
		for _, l := range labelsOf(b) {
			out = append(out, l.String())
		}
		return strings.Join(out, "\n")
	}
	want := map[int]string{}
	for k := range 3 {
		want[k] = run(mustParse(t, sharedRules), &Scratch{Now: time.Unix(1, 0)}, k)
	}
	r := mustParse(t, sharedRules)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &Scratch{Now: time.Unix(1, 0)}
			for k := range 30 {
				if got := run(r, s, g+k); got != want[(g+k)%3] {
					errs <- fmt.Errorf("goroutine %d pass %d differs", g, k)
					return
				}
			}
		}()
	}
	waittest.Wait(t, &wg, "the concurrent requests")
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestStaleLabelIDsFallBackToNames: a decision whose label ids were
// numbered before the numbering started over (it was in flight) still
// removes the right attributes.
func TestStaleLabelIDsFallBackToNames(t *testing.T) {
	r := mustParse(t, sharedRules)
	s := &Scratch{Now: time.Unix(1, 0)}
	b := batch(t, 4, 4)
	r.ProcessMetrics(b, s)
	want := labelsOf(b)[0].String()
	fresh := batch(t, 4, 4)
	s.bind(r)
	d := s.evaluate(fresh, 0, nil)
	c := r.cache
	c.idMu.Lock()
	c.resetLocked()
	c.idMu.Unlock()
	c.labelID("some_other_label") // takes the id the old decision's label had
	s.keyLabel = s.keyLabel[:0]
	s.rewrite(fresh, 0, d)
	if got := labelsOf(fresh)[0].String(); got != want {
		t.Fatalf("rewritten with stale ids: %s, want %s", got, want)
	}
}
