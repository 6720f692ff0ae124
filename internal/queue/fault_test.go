package queue

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

type ackedBatch struct {
	end  Position
	recs [][]byte
}

// checkImage reopens a crash image and verifies that every acknowledged
// record is there, intact, at its position, and that everything else read
// back is a record some appender really tried to write.
func checkImage(t *testing.T, label string, img *memFS, acked []ackedBatch, attempted map[[2]uint64]bool, released Position) {
	t.Helper()
	q, err := Open(Options{Dir: "/q", SegmentBytes: 2048, MaxBytes: 1 << 20, fs: img, Logger: discardLogger()})
	if err != nil {
		t.Fatalf("%s: Open crash image: %v", label, err)
	}
	defer q.Close()
	got, r := drain(t, q, 0)
	defer r.Close()
	byEnd := make(map[Position][]byte, len(got))
	for _, g := range got {
		byEnd[g.end] = g.payload
		if len(g.payload) < 16 {
			t.Fatalf("%s: record of %d bytes at %d was never written", label, len(g.payload), g.end)
		}
		key := [2]uint64{binary.LittleEndian.Uint64(g.payload), binary.LittleEndian.Uint64(g.payload[8:])}
		if !attempted[key] || !bytes.Equal(g.payload, payload(int(key[0]), int(key[1]), len(g.payload))) {
			t.Fatalf("%s: record at %d (%v) was never appended or is damaged", label, g.end, key)
		}
	}
	for _, b := range acked {
		end := b.end
		for i := len(b.recs) - 1; i >= 0; i-- {
			p, ok := byEnd[end]
			if end <= released {
				// Released: its segment may be gone; if read, it is intact.
				if ok && !bytes.Equal(p, b.recs[i]) {
					t.Fatalf("%s: released record %d of batch ending %d damaged", label, i, b.end)
				}
			} else if !ok || !bytes.Equal(p, b.recs[i]) {
				t.Fatalf("%s: acknowledged record %d of batch ending %d lost (at %d, found=%v); stats %+v",
					label, i, b.end, end, ok, q.Stats())
			}
			end -= Position(recordHeaderSize + len(b.recs[i]))
		}
	}
	// The recovered queue keeps working.
	end, err := q.Append([]byte("after crash, still usable"))
	if err != nil {
		t.Fatalf("%s: append after recovery: %v", label, err)
	}
	if end <= r.Position() {
		t.Fatalf("%s: position went backwards: %d <= %d", label, end, r.Position())
	}
}

func TestFaultInjectionNoAckedLoss(t *testing.T) {
	seeds := 80
	if testing.Short() {
		seeds = 20
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { faultRun(t, seed, false) })
	}
}

// TestFaultInjectionRecycled is TestFaultInjectionNoAckedLoss with a
// consumer that releases what was acknowledged as it goes, so segments are
// started in released files (recycle) and power cuts hit every step of
// that: every acknowledged record not released survives, and nothing read
// back is a record an earlier use of a file held at another position.
func TestFaultInjectionRecycled(t *testing.T) {
	seeds := 80
	if testing.Short() {
		seeds = 20
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { faultRun(t, seed, true) })
	}
}

func faultRun(t *testing.T, seed int, release bool) {
	{
		{
			faultRng := rand.New(rand.NewPCG(uint64(seed), 7))
			var pWrite, pSync, pCreate, pTrunc float64
			switch seed % 4 {
			case 1:
				pWrite, pTrunc = 0.03, 0.2
			case 2:
				pSync = 0.02
			case 3:
				pWrite, pSync, pCreate, pTrunc = 0.01, 0.01, 0.05, 0.1
			}
			mfs := newMemFS()
			q, err := Open(Options{Dir: "/q", SegmentBytes: 2048, MaxBytes: 1 << 20, fs: mfs, Logger: discardLogger(),
				GroupCommitDelay: time.Duration(seed%3) * 50 * time.Microsecond})
			if err != nil {
				t.Fatal(err)
			}

			var ackMu sync.Mutex
			var acked []ackedBatch
			attempted := map[[2]uint64]bool{}
			var releasedMu sync.Mutex
			var released, snapReleased Position
			// A power cut at a random point while appenders run.
			var snap *memFS
			var snapAcked []ackedBatch
			snapAt, ops := 20+faultRng.IntN(300), 0
			mfs.hook = func(op, name string, n int) (int, error) {
				ops++
				if ops == snapAt {
					snap = mfs.crashImageLocked(faultRng)
					if release {
						// Under mu: the releaser is not inside trimLocked,
						// and released only grows before a Release.
						releasedMu.Lock()
						snapReleased = released
						releasedMu.Unlock()
					}
					ackMu.Lock()
					snapAcked = append([]ackedBatch(nil), acked...)
					ackMu.Unlock()
				}
				switch op {
				case "write":
					if faultRng.Float64() < pWrite {
						return faultRng.IntN(n + 1), errInjected
					}
				case "sync", "syncdir":
					if faultRng.Float64() < pSync {
						return 0, errInjected
					}
				case "create", "rename":
					if faultRng.Float64() < pCreate {
						return 0, errInjected
					}
				case "truncate":
					if faultRng.Float64() < pTrunc {
						return 0, errInjected
					}
				}
				return n, nil
			}

			var appenders sync.WaitGroup
			for w := range 6 {
				appenders.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(seed), uint64(w)))
					for i := range 40 {
						recs := make([][]byte, 1+rng.IntN(3))
						ackMu.Lock()
						for j := range recs {
							id, sq := uint64(w*4+j), uint64(i)
							recs[j] = payload(int(id), int(sq), 16+rng.IntN(300))
							attempted[[2]uint64{id, sq}] = true
						}
						ackMu.Unlock()
						end, err := q.Append(recs...)
						if err != nil {
							continue
						}
						ackMu.Lock()
						acked = append(acked, ackedBatch{end, recs})
						var upTo Position
						if n := len(acked); release && n > 4 {
							upTo = acked[n-4].end
						}
						ackMu.Unlock()
						if upTo > 0 {
							// A consumer that commits as it goes: released
							// before Release, so a crash image never misses
							// a segment the check expects.
							releasedMu.Lock()
							released = max(released, upTo)
							releasedMu.Unlock()
							_ = q.Release(upTo)
						}
					}
				})
			}
			appenders.Wait()

			// The live queue reads back to its durable end.
			_, r := drain(t, q, 0)
			r.Close()
			mfs.mu.Lock()
			mfs.hook = nil
			final := mfs.crashImageLocked(faultRng)
			mfs.mu.Unlock()

			ackMu.Lock()
			defer ackMu.Unlock()
			t.Logf("acked %d batches, stats %+v", len(acked), q.Stats())
			releasedMu.Lock()
			finalReleased := released
			releasedMu.Unlock()
			if snap != nil {
				checkImage(t, "mid-run crash", snap, snapAcked, attempted, snapReleased)
			}
			checkImage(t, "final crash", final, acked, attempted, finalReleased)
			if release && seed%4 == 0 && q.Stats().Recycled == 0 {
				t.Errorf("no segment was started in a released file: stats %+v", q.Stats())
			}
			q.Close()
			if seed%4 == 0 && len(acked) != 6*40 {
				t.Fatalf("no faults injected, yet only %d of %d appends succeeded", len(acked), 6*40)
			}
		}
	}
}
