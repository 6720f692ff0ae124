package prw

import (
	"fmt"
	"time"
)

// A Decoder's or Scanner's MaxTime is the latest sample or histogram time
// (milliseconds, included) it accepts: a series with a later one is
// refused (dropped and named, as any invalid series; the scan leaves it to
// the decoder). 0 sets no bound beyond what the lake can store at all
// (msToNs: up to 2262-04-11).
//
// A receiver that feeds the lake sets it per request (LakeMaxTime) to the
// latest time the lake files where queries look for it: lake.max_future_skew
// past the clock. A later time is filed by its arrival instead, where the
// PromQL API would never find it, so it is refused rather than
// acknowledged; Prometheus refuses such samples too (more than 10 minutes
// ahead). A relay that only forwards sets none, and passes them on as it
// got them.

// LakeMaxTime returns the MaxTime of a receiver feeding a lake whose
// max_future_skew is skew, at now.
func LakeMaxTime(now time.Time, skew time.Duration) int64 { return now.Add(skew).UnixMilli() }

// timeNs converts a sample or histogram time ms to nanoseconds; false
// when the lake cannot store it (msToNs) or it is past max (0: no bound).
func timeNs(ms, max int64) (int64, bool) {
	tn, ok := msToNs(ms)
	return tn, ok && (max == 0 || ms <= max)
}

// timeProblem says why timeNs refuses ms with max; what names the time
// ("sample timestamp", "histogram timestamp").
func timeProblem(what string, ms, max int64) string {
	if _, ok := msToNs(ms); !ok {
		return fmt.Sprintf("%s %d out of range"+tsRange, what, ms)
	}
	return fmt.Sprintf("%s %d (%s) is past %s, the latest time accepted now (lake.max_future_skew ahead of sluice's clock)",
		what, ms, time.UnixMilli(ms).UTC().Format(time.RFC3339Nano), time.UnixMilli(max).UTC().Format(time.RFC3339Nano))
}

// startOf is the start time stored for a point at tn whose sender gave
// start (both ns; 0: none): none when it is not before tn, counted in
// ignored. Prometheus 3 does the same with a remote-write 2.0 start
// (created) timestamp: its head refuses one at or after the sample's time
// (ErrSTNewerThanSample: "ST is newer or the same as sample's timestamp,
// ignoring", logged at debug), writes no zero sample for it, and writes
// the sample; a start after the point's time would make a cumulative
// series look reset in the future.
func startOf(start, tn int64, ignored *int) int64 {
	if start != 0 && start >= tn {
		*ignored++
		return 0
	}
	return start
}
