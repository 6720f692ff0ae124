// Package queue owns sluice's durable write-ahead queue: the on-disk log
// between receivers and the lake writer (and other sinks). A receiver
// acknowledges its client only after Append returns, which is after the
// data is fsynced; a consumer reads from a Position, delivers downstream,
// commits the position it covers there (the lake catalog), and calls
// Release so whole segments below it are deleted. After a crash the
// consumer replays from its committed position.
//
// The design follows VictoriaMetrics' lib/persistentqueue (a directory of
// segment files named by offset) with group commit, per-record CRCs and
// recovery that never refuses to start on damaged bytes.
//
// # Concurrency
//
// Queue methods are safe for concurrent use. Appends are serialized on one
// mutex while they encode their records into a shared buffer; the fsync
// runs outside the mutex. The first appender that needs durability becomes
// the fsync leader: it writes every appender's buffered records with one
// write(2) at the end of the active segment and syncs everything written
// so far; appenders that arrive meanwhile buffer their records, wait, and
// are usually covered by the next leader's single write and fsync (group
// commit: one write and one fsync per group, not a write per Append). A
// failed write is cut off again and fails every Append whose records it
// held. An appender writes the buffer itself only when it reaches 1 MiB or
// the segment is full. GroupCommitDelay makes a leader wait before
// writing and syncing to gather more.
//
// A Reader belongs to one goroutine. Any number of Readers may run next to
// appenders; each has its own file handle and read-ahead buffer, takes the
// queue mutex only when it changes segment or has caught up, and waits on
// a channel that is closed when the durable end advances. Payloads returned
// by Next alias the reader's buffer and are valid until the next call.
//
// # On-disk format
//
// Dir holds segment files named "%020d.seg" after the Position of their
// first record. A segment is a 32-byte header followed by records:
//
//	header: "SLQS" | version uint16 = 1 | 0 uint16 | base uint64 |
//	        first record ordinal uint64 | 0 uint32 | CRC32C(header[0:28]) uint32
//	record: length uint32 | CRC32C(position uint64 | length uint32 | payload) uint32 | payload
//
// All integers are little endian; CRCs use the Castagnoli polynomial.
// The active segment is zero-filled 4 MiB ahead of its records, up to
// SegmentBytes (preallocate): appends write into blocks the file system
// has already allocated and written, the file's size does not change, and
// the group commit syncs with fdatasync, which then writes the records and
// flushes the disk's cache without committing inode metadata (fsync also
// wrote the inode's times; on ext4 a file grown by appends, or preallocated
// with fallocate, whose extents stay unwritten until written, needs a
// journal commit per sync). The active segment's records are followed by
// zeros; a record is never empty, so its 8-byte header is never all zero,
// and zeros are never taken for a record. A segment is cut to its records
// when it is sealed, so a sealed segment's size is its records' (as before
// preallocation; a segment an older build wrote without it reads the
// same). Stats.Bytes counts headers and records, not the zeros.
//
// Positions count record bytes only (headers take none): the record at
// file offset off of a segment with base b has Position b+off-32, and the
// position after it is that plus 8+length. Positions therefore compare
// with < across segments, and Release/replay work on plain numbers.
//
// # Invariants
//
//  1. Positions only grow. A new segment starts at the end of the previous
//     one, or higher: never below a base that ever existed in Dir (even one
//     recovery removed) nor below Options.Start.
//  2. A record lies entirely in one segment; records are contiguous within
//     a segment, and the records of one Append are contiguous.
//  3. A record's CRC covers its position, so a record copied or left over
//     elsewhere (reused disk blocks, another segment) never validates, and
//     resynchronizing after corruption cannot resurrect stale data.
//  4. Append returns nil only after the bytes of its records, the header of
//     every segment holding them, and the directory entries of those
//     segments are fsynced (fdatasync for the active segment: its size
//     and blocks are on disk from its first sync on, and fdatasync also
//     writes a size or block change). After a failed fsync (or a failed undo of a
//     failed write) nothing more is acknowledged until the queue is
//     reopened (ErrFailed), because the kernel may have dropped the dirty
//     pages. At most one fsync runs at a time: Linux reports a writeback
//     error to one fsync only, so a concurrent one could succeed over
//     lost pages.
//  5. A segment is fsynced before its successor is created, so only the
//     last segment can have a torn tail. Recovery therefore scans only the
//     last segment and reads only the headers of the others: recovery time
//     is bounded by SegmentBytes, not by the size of the queue.
//  6. Readers never see past the durable end. Recovery fsyncs what it keeps
//     before any reader runs, so a position a reader delivered downstream
//     is never taken back by a later power loss and reused.
//  7. Recovery never fails because of segment contents. In the last
//     segment the records end where only zeros follow (the preallocated
//     space; nothing is counted); an invalid record followed by a valid one
//     is corruption (skipped, counted in Stats.CorruptRecords/CorruptBytes,
//     logged with file and offset; a hole of zeros a torn write left is
//     skipped a word at a time); an invalid record with nothing valid after
//     it is a torn tail (zeroed up to its last non-zero byte, which
//     Stats.TornBytes counts; the file keeps its size). A last segment
//     with a torn header and no records is removed; any segment with a bad
//     header is skipped whole and counted. Readers resynchronize the same
//     way inside sealed segments: to the next valid record, else to the
//     segment's end.
//  8. Data is deleted only by Release (whole segments below the committed
//     position and below every cursor, invariant 10) and by DropOldest (whole oldest segments, counted in
//     Stats.DroppedRecords/DroppedBytes and logged). A reader positioned in
//     deleted data skips to the oldest stored position and reports the
//     skipped bytes in Reader.Lost. Under Backpressure, Append returns
//     ErrFull and deletes nothing.
//  9. Append never leaves less than Options.MinFreeBytes free on the file
//     system of Dir (as far as statfs, asked at most every 100 ms or per
//     quarter of the headroom written, and the queue's own writes since
//     tell): it returns ErrLowDisk, which is an ErrFull, under either
//     policy. The headroom is what the lake writer needs to turn queued
//     data into files and let Release free segments, so that a disk that
//     filled up recovers without an operator.
//  10. Cursors (cursor.go, one per exporter) are named read positions
//     committed in Dir/cursors/<name>. A segment is deleted only when the
//     position given to Release AND every cursor's committed position (or
//     its bound floor) have passed its end; cursors found on disk hold
//     segments from Open on, before their exporter attaches. A cursor's
//     Commit returns after its file is fsynced; the file has two CRC'd
//     slots written alternately, so a torn write falls back to the
//     previous commit: a restart resumes at the last commit that returned
//     or later, never mid-record (delivery through a cursor is at least
//     once). A cursor's MaxBytes/MaxAge bound moves only that cursor past
//     whole sealed segments, counted in CursorStats.DroppedBytes and
//     logged; it never affects the lake, another cursor or appends.
//
// Not covered by the CRCs: a bit flip in a sealed segment's header is
// detected (header CRC) but the segment is then skipped whole; record
// ordinals (Stats.Records) are approximate after such damage.
package queue
