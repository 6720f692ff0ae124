package compact

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/otlp"
	"github.com/sluice-dev/sluice/internal/signal"
)

// Inputs shaped like successive flushes merge in long runs, which go to the
// writer straight from the decoded row groups, while inputs whose rows tie
// merge row by row through the staged batches. Both must give the same
// records, sorted, with ties in input order.
func TestMergeRunsAndTies(t *testing.T) {
	// Metrics of the corpus have a point or two per series per copy, too
	// few for long runs; logs exercise both paths.
	for _, table := range []string{lake.TableLogs} {
		t.Run(table, func(t *testing.T) {
			e := newEnv(t)
			var one signal.Logs
			for _, pb := range corpus(t, "logs") {
				if err := otlp.DecodeLogs(&one, pb); err != nil {
					t.Fatal(err)
				}
			}
			lo, hi := timeSpan(one.Time, one.ObservedTime)
			// A copy of the corpus: every nth record, its times squeezed
			// into slot (of 6) of the hour, or all set to at when not 0.
			type copySpec struct{ slot, nth, at int }
			at := int(benchHour.Add(55 * time.Minute).Unix())
			inputs := [][]copySpec{
				{{0, 1, 0}, {1, 1, 0}, {0, 50, at}},
				{{2, 1, 0}, {3, 1, 0}},
				// Slot 0 ties input 0's slot 0 row for row (short runs,
				// staged); the copy at one instant ties input 0's sparse
				// one in long runs of each service (direct), after input
				// 0's staged rows of that instant.
				{{0, 1, 0}, {4, 1, 0}, {0, 1, at}},
			}
			var fns []func(*lake.Writer) error
			for in, specs := range inputs {
				b := new(signal.Logs)
				tag := b.AppendString(fmt.Sprintf("in%d", in))
				for _, sp := range specs {
					base := b.Len()
					for i := 0; i < one.Len(); i += sp.nth {
						b.CopyFrom(&one, i)
					}
					squeeze(b.Time[base:], lo, hi, sp.slot, 6)
					squeeze(b.ObservedTime[base:], lo, hi, sp.slot, 6)
					for i := base; i < b.Len(); i++ {
						b.EventName[i] = tag
						if sp.at != 0 {
							b.Time[i] = time.Unix(int64(sp.at), 0).UnixNano()
						}
					}
				}
				fns = append(fns, func(w *lake.Writer) error { return w.WriteLogs("acme", b) })
			}
			e.ingestRowGroups(t, 0, fns)
			jobs, err := Plan(context.Background(), e.cat, Options{Table: table})
			if err != nil || len(jobs) != 1 || len(jobs[0].Inputs) != len(inputs) {
				t.Fatalf("plan: %d jobs, %v", len(jobs), err)
			}
			job := jobs[0]
			// compactAll checks the records, their order and the swap.
			if rows, _ := compactAll(t, e, Options{}); rows == 0 {
				t.Fatal("nothing compacted")
			}
			// Ties keep input order: of rows with equal sort keys, input
			// 0's come before input 2's.
			for _, s := range live(t, e, job) {
				f, err := lake.OpenObject(e.store, s.Path)
				if err != nil {
					t.Fatal(err)
				}
				var l signal.Logs
				if err := f.ReadLogs(&l); err != nil {
					t.Fatal(err)
				}
				f.Close()
				ties := 0
				for i := 1; i < l.Len(); i++ {
					if l.ServiceName(l.Resource[i]) != l.ServiceName(l.Resource[i-1]) || l.PartitionTime(i) != l.PartitionTime(i-1) {
						continue
					}
					a, b := l.String(l.EventName[i-1]), l.String(l.EventName[i])
					if a == b {
						continue
					}
					ties++
					if a > b {
						t.Fatalf("row %d: tie of %s after %s", i, b, a)
					}
				}
				if ties == 0 {
					t.Fatal("no ties between inputs in the output")
				}
			}
		})
	}
}
