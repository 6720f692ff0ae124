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
// first record. A segment is a 32-byte header followed by records
// (format version 2):
//
//	header: "SLQS" | version uint16 = 2 | 0 uint16 | base uint64 |
//	        first record ordinal uint64 | tag uint32 | CRC32C(header[0:28]) uint32
//	record: length uint32 | tag uint32 |
//	        CRC32C(position uint64 | length uint32 | payload) uint32 | payload
//
// All integers are little endian; CRCs use the Castagnoli polynomial. The
// tag is drawn at random (never 0) each time a segment file is started,
// and every record header of the segment repeats it.
//
// The active segment's blocks are written before its records land in them:
// appends then neither grow the file nor allocate blocks, and the group
// commit syncs with fdatasync, which writes the records and flushes the
// disk's cache without committing inode metadata (fsync also wrote the
// inode's times; on ext4 a file grown by appends, or preallocated with
// fallocate, whose extents stay unwritten until written, needs a journal
// commit per sync). A new segment starts in a released segment's file when
// one is kept (recycle: Release keeps up to two such files, Dir/<segment
// name>.free, instead of deleting them; they count against MaxBytes and
// are deleted first when the space is needed, and at Open): its header is
// rewritten and synced under the spare's name, then the file is renamed to
// the segment's name, so the file under a segment name always has its own
// header. Appends overwrite the earlier use's bytes, which are written
// once per use of the file, not twice. Otherwise the segment is a new
// file, zero-filled 4 MiB ahead of its records up to SegmentBytes
// (preallocate). Either way, what follows the active segment's records is
// zeros or an earlier use's bytes: the records end at the first record
// header without the segment's tag (zeros never are one, and an earlier
// use's records carry its tag), found without parsing those bytes.
// A segment is cut to its records when it is sealed, so a sealed
// segment's size is its records'. Stats.Bytes counts headers and records,
// not the space after them; Stats.SpareBytes the spares.
//
// Version 1 segments (builds before recycling: record headers of 8 bytes,
// length and CRC, no tag; zeros after the records) are read and recovered
// as those builds did; Open seals a version 1 last segment (cut to its
// records) and appends to a new version 2 segment. A segment of a later
// version is refused like a damaged header (skipped whole, counted, the
// error names the version); builds before version 2 treat a version 2
// segment so, hence a queue is drained before going back to one.
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
//     elsewhere (reused disk blocks, another segment, an earlier use of a
//     recycled file) never validates, and resynchronizing after corruption
//     cannot resurrect stale data. The tag in each record header makes
//     that cheap where stale data is all there is after the records (a
//     recycled file): resynchronization in a version 2 segment searches
//     the tag's bytes and checks only the headers it finds, so recovery of
//     a recycled last segment reads its earlier use's bytes once.
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
//     segment the records end at the first header without the segment's
//     tag with no valid record after it (version 1: where only zeros
//     follow; nothing is counted); an invalid record followed by a valid one
//     is corruption (skipped, counted in Stats.CorruptRecords/CorruptBytes,
//     logged with file and offset; a hole of zeros a torn write left is
//     skipped a word at a time); an invalid record with nothing valid after
//     it is a torn tail: the records with the segment's tag that do not
//     validate there are zeroed up to their last non-zero byte, which
//     Stats.TornBytes counts; the file keeps its size (a header without
//     the tag is never a record, torn or not). A last segment
//     with a torn header and no records is removed; any segment with a bad
//     header is skipped whole and counted. Readers resynchronize the same
//     way inside sealed segments: to the next valid record, else to the
//     segment's end.
//  8. Data is deleted only by Release (whole segments below the committed
//     position and below every cursor, invariant 10; up to two of their
//     files are kept for reuse, and a reader still inside one counts what
//     it skips as lost, not corrupt) and by DropOldest (whole oldest segments, counted in
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
//     once); a file with neither slot valid (not a torn write: damage)
//     resumes at the oldest stored record, never past anything stored; one
//     past the durable end (segments deleted, or Dir restored from an
//     older copy) resumes at the end, not at a position appends would take
//     a while to reach. A cursor's MaxBytes/MaxAge bound moves only that cursor past
//     whole sealed segments, counted in CursorStats.DroppedBytes and
//     logged; it never affects the lake, another cursor or appends.
//  11. One Queue per Dir at a time: Open takes an exclusive flock on
//     Dir/queue.lock (LockName) and fails with ErrLocked while another
//     process, or another open Queue of this one, holds it; Close releases
//     it after the last write. The kernel drops it when the process dies,
//     so a kill -9 leaves nothing to clean up.
//
// Not covered by the CRCs: a bit flip in a sealed segment's header is
// detected (header CRC) but the segment is then skipped whole; record
// ordinals (Stats.Records) are approximate after such damage.
package queue
