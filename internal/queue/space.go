package queue

import (
	"fmt"
	"time"
)

// Free-space headroom. When the queue fills the disk, the lake writer
// cannot write the Parquet files that would let the queue release its
// segments, so nothing recovers even after space is freed: the queue takes
// it again first. Append therefore stops short of the disk, leaving
// MinFreeBytes for the lake writer and the catalog.

// initSpace resolves Options.MinFreeBytes once the directory exists.
func (q *Queue) initSpace() {
	if q.opts.MinFreeBytes < 0 {
		return
	}
	free, total, err := q.fs.Space(q.opts.Dir)
	if err != nil {
		q.log.Warn("queue: cannot read free disk space; no headroom is kept (queue.min_free_bytes)", "err", err)
		q.spaceErr = true
		return
	}
	q.minFree = q.opts.MinFreeBytes
	if q.minFree == 0 {
		q.minFree = min(DefaultMinFreeBytes, total/10)
	}
	q.free, q.freeAt = free, time.Now()
	if free < q.minFree {
		q.log.Warn("queue: free disk space is below the headroom; appends are refused until it is freed",
			"free_bytes", free, "min_free_bytes", q.minFree)
	}
}

// refreshSpaceLocked asks the file system for free space when the last
// answer is stale: older than spaceCheckEvery, or a quarter of the
// headroom was written since (the queue's own writes are subtracted from
// the last answer in between, other writers' are not).
func (q *Queue) refreshSpaceLocked(now time.Time) {
	if q.minFree <= 0 || q.spaceErr {
		return
	}
	if now.Sub(q.freeAt) < spaceCheckEvery && q.writtenSince < q.minFree/4 {
		return
	}
	free, _, err := q.fs.Space(q.opts.Dir)
	if err != nil {
		q.spaceErr = true
		q.log.Warn("queue: cannot read free disk space; no headroom is kept from now on", "err", err)
		return
	}
	q.free, q.freeAt, q.writtenSince = free, now, 0
}

// checkSpaceLocked refuses a batch of need bytes that would leave less than
// the headroom free.
func (q *Queue) checkSpaceLocked(need int64) error {
	if q.minFree <= 0 || q.spaceErr {
		return nil
	}
	q.refreshSpaceLocked(time.Now())
	if q.free-q.writtenSince-need < q.minFree && len(q.spares) > 0 {
		// Spare segment files (recycle) go before any append is refused.
		q.dropSparesLocked()
		q.freeAt = time.Time{}
		q.refreshSpaceLocked(time.Now())
	}
	if left := q.free - q.writtenSince - need; left < q.minFree {
		if !q.lowDisk.Swap(true) {
			q.log.Warn("queue: free disk space below the headroom; refusing appends until the lake writer or an operator frees space",
				"free_bytes", q.free-q.writtenSince, "min_free_bytes", q.minFree)
		}
		q.lowDiskRefusals.Add(1)
		q.refusedNeed = need
		return fmt.Errorf("%w: %d bytes free on the queue's file system, %d kept free (queue.min_free_bytes)",
			ErrLowDisk, max(q.free-q.writtenSince, 0), q.minFree)
	}
	if q.lowDisk.Swap(false) {
		q.log.Info("queue: free disk space above the headroom again; appends accepted", "free_bytes", q.free-q.writtenSince)
	}
	return nil
}

// DiskSpace reports the free bytes on the queue's file system, the
// headroom kept and whether free space is below it now. It reads the file
// system at most every spaceCheckEvery, so readiness probes may call it
// freely; min is 0 when no headroom is kept.
func (q *Queue) DiskSpace() (free, min int64, low bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.minFree <= 0 || q.spaceErr {
		return q.free, 0, false
	}
	q.refreshSpaceLocked(time.Now())
	free = q.free - q.writtenSince
	if q.lowDisk.Load() {
		// Low until the append that was refused would fit.
		return free, q.minFree, free-q.refusedNeed < q.minFree
	}
	return free, q.minFree, free < q.minFree
}
