package queue

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// FullPolicy decides what Append does when a batch does not fit under
// Options.MaxBytes.
type FullPolicy int

const (
	// Backpressure makes Append return ErrFull at once; nothing stored is lost.
	Backpressure FullPolicy = iota
	// DropOldest deletes the oldest segments to make room and counts what was
	// deleted in Stats.DroppedRecords/DroppedBytes.
	DropOldest
)

func (p FullPolicy) String() string {
	switch p {
	case Backpressure:
		return "backpressure"
	case DropOldest:
		return "drop_oldest"
	}
	return fmt.Sprintf("FullPolicy(%d)", int(p))
}

const (
	DefaultSegmentBytes = 64 << 20
	DefaultMaxBytes     = 1 << 30
	// DefaultMinFreeBytes is the headroom kept free on the queue's file
	// system, unless that is a tenth of it (see Options.MinFreeBytes).
	DefaultMinFreeBytes = 512 << 20

	// spaceCheckEvery bounds statfs calls: free space is asked at most
	// this often (and after a Release or a quarter of the headroom
	// written), not per Append.
	spaceCheckEvery = 100 * time.Millisecond

	minSegmentBytes = segmentHeaderSize + recordHeaderSize + 16
	// A record's length is a uint32 and a record never spans segments.
	maxSegmentBytes = 1<<32 - 1
)

// Options configure a Queue. The zero value plus Dir is a usable config.
type Options struct {
	// Dir holds the segment files; created if missing. One Queue per Dir.
	Dir string
	// SegmentBytes is the target size of a segment file. Default
	// min(64 MiB, MaxBytes/4). A record must fit in one segment.
	SegmentBytes int64
	// MaxBytes caps the on-disk size of all segments. Default 1 GiB. Must be
	// at least 2*SegmentBytes so that dropping sealed segments can always
	// make room next to the active one.
	MaxBytes int64
	// Full is what Append does when the cap is reached.
	Full FullPolicy
	// GroupCommitDelay is how long an fsync leader waits for more appenders
	// to join before syncing, under concurrent load only: when the previous
	// fsync made more than one appender durable. A lone appender never
	// waits. 0 syncs as soon as the previous fsync ends, which already
	// batches everything that arrived during it.
	GroupCommitDelay time.Duration
	// MinFreeBytes is the free space Append leaves on the file system of
	// Dir: a batch that would leave less gets ErrLowDisk (nothing is
	// dropped, whatever Full says). 0 means min(DefaultMinFreeBytes, a
	// tenth of the file system); negative disables the check.
	MinFreeBytes int64
	// Start is the lowest position a new segment may start at. Set it to the
	// position committed downstream (the lake catalog), so that if the queue
	// directory is lost or replaced, new data never reuses positions the
	// catalog already counts as delivered.
	Start Position
	// Logger receives recovery, corruption and drop events. Default slog.Default().
	Logger *slog.Logger

	fs fileSystem // nil means the OS; tests inject faults here
}

func (o Options) withDefaults() (Options, error) {
	if o.Dir == "" {
		return o, errors.New("queue: Options.Dir is required")
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = min(DefaultSegmentBytes, o.MaxBytes/4)
	}
	if o.SegmentBytes < minSegmentBytes || o.SegmentBytes > maxSegmentBytes {
		return o, fmt.Errorf("queue: SegmentBytes %d out of range [%d, %d]", o.SegmentBytes, minSegmentBytes, int64(maxSegmentBytes))
	}
	if o.MaxBytes < 2*o.SegmentBytes {
		return o, fmt.Errorf("queue: MaxBytes %d must be at least 2*SegmentBytes (%d)", o.MaxBytes, 2*o.SegmentBytes)
	}
	if o.Full != Backpressure && o.Full != DropOldest {
		return o, fmt.Errorf("queue: unknown full policy %v", o.Full)
	}
	if o.GroupCommitDelay < 0 {
		return o, fmt.Errorf("queue: negative GroupCommitDelay %v", o.GroupCommitDelay)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.fs == nil {
		o.fs = osFS{}
	}
	return o, nil
}
