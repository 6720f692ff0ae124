package catalog

import "errors"

// Sentinel errors; every returned error wraps one of these or a driver error.
var (
	// ErrNotDatabase means the catalog file exists but is not an SQLite database.
	ErrNotDatabase = errors.New("catalog: file is not an SQLite database")
	// ErrSchemaTooNew means the catalog was migrated by a newer sluice.
	ErrSchemaTooNew = errors.New("catalog: schema version is newer than this binary supports")
	// ErrUnsupportedDSN means the DSN names a backend this build cannot open.
	ErrUnsupportedDSN = errors.New("catalog: unsupported DSN")
	// ErrInvalidSegment means a Segment failed validation before touching the database.
	ErrInvalidSegment = errors.New("catalog: invalid segment")
	// ErrDuplicatePath means a segment with the same path is already catalogued.
	ErrDuplicatePath = errors.New("catalog: duplicate segment path")
	// ErrStale means Replace was asked to remove a segment that is gone or already replaced.
	ErrStale = errors.New("catalog: segment gone or already replaced")
	// ErrQueueRegress means a queue position commit did not move forward;
	// the batch it covers is already in the lake.
	ErrQueueRegress = errors.New("catalog: queue position not after the committed one")
	// ErrLeaseNotHeld means ReleaseLease found no lease held by that owner
	// (it expired and may have been taken by another owner).
	ErrLeaseNotHeld = errors.New("catalog: lease not held")
	// ErrLeaseLost means a lease kept by HoldLease was taken by another
	// owner or could not be renewed before it expired.
	ErrLeaseLost = errors.New("catalog: lease lost")
	// ErrNoIntent means ReplaceIntents found no intent of its owner for a
	// segment to add: the holder of a later lease claimed it (and deletes
	// its file), so the run that wrote the file must not commit it.
	ErrNoIntent = errors.New("catalog: no intent of this owner for the file")
)
