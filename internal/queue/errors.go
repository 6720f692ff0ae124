package queue

import (
	"errors"
	"fmt"
)

var (
	// ErrFull is returned by Append under the Backpressure policy when the
	// batch does not fit under Options.MaxBytes. It is retryable: the caller
	// answers HTTP 429 / gRPC RESOURCE_EXHAUSTED and the client retries later.
	ErrFull = errors.New("queue: full")

	// ErrLocked is returned by Open when another process (or another open
	// Queue of this one) holds the directory's lock (LockName): two
	// writers on one queue would overwrite each other's records and
	// delete each other's segments. Permanent while the other one runs.
	ErrLocked = errors.New("queue: directory in use")

	// ErrClosed is returned by every call on a closed Queue and by Reader.Next
	// once its Queue is closed. Permanent.
	ErrClosed = errors.New("queue: closed")

	// ErrCorrupt marks on-disk bytes that fail validation (bad header, CRC
	// mismatch, impossible length). The queue counts, logs and skips such
	// data instead of returning it; the error shows up wrapped in logs.
	ErrCorrupt = errors.New("queue: corrupt data")

	// ErrLowDisk is returned by Append when the batch would leave less than
	// Options.MinFreeBytes free on the queue's file system. It wraps
	// ErrFull (errors.Is(err, ErrFull) holds): the caller answers with
	// backpressure, and the headroom lets the lake writer turn queued data
	// into files and release segments, so ingestion recovers by itself.
	ErrLowDisk = fmt.Errorf("%w: free disk space below the headroom", ErrFull)

	// ErrTooLarge is returned by Append for a record or batch that could
	// never fit (record larger than a segment, batch larger than half of
	// MaxBytes). Permanent for that input.
	ErrTooLarge = errors.New("queue: record or batch too large")

	// ErrEmptyRecord is returned by Append for an empty record: a record is
	// never empty, so that eight zero bytes (what a preallocated segment
	// holds past its data, and what a hole in a torn write reads as) are
	// never taken for one (format.go, recordHeaderZero). Permanent.
	ErrEmptyRecord = errors.New("queue: empty record")

	// ErrFailed wraps the cause after a write or fsync error whose outcome on
	// disk is unknown. The queue refuses further appends (readers keep
	// working) until it is closed and reopened, which re-runs recovery.
	ErrFailed = errors.New("queue: failed")
)
