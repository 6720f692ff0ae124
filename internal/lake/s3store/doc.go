// Package s3store is a lake.Store over an S3 bucket (AWS S3 or any
// S3-compatible server), built on aws-sdk-go-v2.
//
// An object path p of the lake (<table>/tenant=<t>/dt=…/hour=…/<id>.parquet)
// is stored under the key <prefix>/<p>, so a bucket prefix holds exactly
// the layout a local lake root holds.
//
// # Invariants
//
//  1. Nothing is visible under a key until Commit: a small object is sent by
//     one PutObject at Commit; a larger one is a multipart upload (parts of
//     Config.PartSize) that only CompleteMultipartUpload makes visible. Abort,
//     and a failed Commit, abort the multipart upload.
//  2. A committed object is never overwritten: PutObject and
//     CompleteMultipartUpload carry If-None-Match: *, and an existing object
//     fails Commit with ErrExists. A server that answers the condition with
//     501 Not Implemented gets a HeadObject check before an unconditional
//     write instead (not atomic, logged once); lake file ids are random, so
//     the check guards against bugs, not against races.
//  3. Readers see immutable objects: ranged reads carry If-Match with the
//     ETag seen at Open, so a replaced object fails the read instead of
//     mixing two versions.
//  4. Rename (lake.Renamer, the lake's swap moves) is a server-side
//     CopyObject then a DeleteObject: both keys exist in between. A reader
//     whose object of the Hive tree is deleted under it (moved to the
//     trash by a swap) continues at the trash key (catalog.TrashPath).
//
// A Commit whose answer is lost may still have completed; the caller then
// sees an error while the object exists. The pipeline's start-up sweep
// removes such files, as it does on a local lake after a crash.
//
// Incomplete multipart uploads of a crashed process stay in the bucket
// until a lifecycle rule (AbortIncompleteMultipartUpload) removes them.
//
// # Concurrency
//
// Store and the readers it opens are safe for concurrent use. An
// ObjectWriter belongs to one goroutine; it uploads up to
// Config.UploadConcurrency parts in the background while it is written.
package s3store
