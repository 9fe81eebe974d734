// Package consumequeue stores RocketMQ consume queues: per (topic, queueId),
// a dense array of fixed-size entries indexed by queue offset, each pointing
// at one record in the commitlog (spec §7.3). The dispatcher appends
// entries; pull requests read them; recovery repairs the tail; retention
// deletes whole files from the head.
//
// # Files
//
//	<root>/consumequeue/<topic>/<queueId>/00000000000000000000
//	                                      00000000000006000000   %020d of the file's first byte
//	                                      ...                    in the queue's logical space
//
// Queue offset n lives at logical byte n*20, in the file whose name is the
// largest multiple of EntriesPerFile*20 not above it, counted from the first
// file. Each file holds at most EntriesPerFile entries (default 300,000 =
// 6,000,000 bytes); files grow as entries are written (no preallocation).
// Every file but the last is full.
//
// A queue that is created at a non-zero offset (a queue rebuilt from a
// commitlog whose head was deleted; see Queue.Put) starts with a file named
// after that offset, so the first file may be "unaligned"; RocketMQ instead
// fills the space before it with blank entries. A leading run of such blank
// entries (pos 0, size 0x7FFFFFFF, tags 0) is accepted on open and skipped.
//
// # Entry (20 bytes, big-endian)
//
//	 0               8        12              20
//	+---------------+--------+---------------+
//	| pos int64     | size   | tagsCode int64|
//	|               | int32  |               |
//	+---------------+--------+---------------+
//
// pos is the record's commitlog offset, size its length, tagsCode the Java
// String.hashCode of its TAGS (or the delivery time for the delay topic).
// Positions grow along a queue (INVARIANT, enforced by Put): entry i+1 has
// pos >= pos+size of entry i.
//
// # Recovery (OpenStore)
//
// Per queue, the trailing three files are scanned (RocketMQ starts at the
// third-last file). The queue ends at the first missing or short non-last
// file, at a partial trailing entry (file length not a multiple of 20), or
// at the first invalid entry: pos < 0, size <= 0, pos below the previous
// entry's end, which includes all-zero (preallocated or torn) entries.
// Everything after that point is cut: the file holding it is truncated and
// fsynced, later files are removed. The first file always stays, even
// empty, so that a queue that starts at offset N keeps counting from N.
// Names that do not fit the configured EntriesPerFile are ErrCorrupt rather
// than guessed at. After OpenStore the caller runs TruncateAfterPos with the
// recovered commitlog end and DeleteBelowPos with the commitlog min (which
// also re-raises Min within the first file; Min is not persisted).
//
// # Writes, buffering and durability
//
// Put appends the encoded entry to a per-queue buffer of WriteBufferEntries
// entries (default 32 = 640 bytes, allocated on the first Put) and writes
// the buffer with one pwrite when it fills, at a file boundary, and in
// Sync. A buffer that fills doubles, up to WriteBufferMax entries (default
// 256 = 5 KiB), so a busy queue writes once per 256 Puts and a quiet one
// holds 640 bytes; Sync drops the buffer of a queue it closes for
// idleness. With all of 10,000 queues busy the buffers take 50 MiB.
// Readers copy buffered entries under a small mutex, so an entry is
// visible to Read as soon as Put returns. Measured on this project's 2-core
// VM (ext4, BenchmarkQueuePut, 3 runs): 0.94-0.96 µs per Put writing
// through (WriteBufferEntries=1), 82-99 ns with a fixed 32-entry buffer,
// 63-70 ns with the default growing one, all 0 allocs.
//
// Put never fsyncs. Sync writes the buffers and fsyncs every file changed
// since the previous Sync (with up to 16 fsyncs in flight) and the
// directories of new files. Entries that were only buffered are lost by a
// process crash, and unsynced ones by an OS crash; both are rebuilt by
// re-dispatching from the commitlog, which is why the store must checkpoint
// its dispatch position only after Sync returns, and must restart dispatch
// from that checkpoint rather than from MaxPos (a queue that lost buffered
// entries may sit below another queue's MaxPos).
//
// A failed write (ENOSPC, EIO, short write) fails the Put or Sync that met
// it and leaves the queue as it was, so the caller retries (the dispatcher
// retries the same record). fsync errors are sticky per queue: the page
// cache can no longer be trusted, and every later Put and Sync of that
// queue returns the first error.
//
// Every file, and every directory fsync, goes through Options.OpenFile (the
// File seam, shared with the commitlog and the key index), so tests inject
// write and fsync faults and simulate power loss.
//
// # File descriptors
//
// OpenStore reads and closes files; nothing stays open. The writer keeps the
// active file of a queue open from its first Put; readers cache one
// read-only handle per file they read that has no writer handle (sealed, or
// active but idle). Sync closes the writer handle of a queue that had no Put
// for two Syncs and every read handle not used since the previous Sync, so
// open descriptors track the queues written and the files read in the last
// Sync interval or two, not the number of queues. With every one of 10,000
// queues busy that is 10,000 descriptors (plus read handles of lagging
// consumers); the limit here is `ulimit -n` = 20,000, which the broker must
// raise for more queues than that.
//
// # Concurrency
//
// One goroutine per queue calls Put (the dispatcher); any number call Read,
// Entry, Next, Min, LastPos and SearchByTime concurrently. Next, Min and
// LastPos are atomic loads. Reads never block on the disk writes of Put
// (only on the copy into the buffer) and Put never waits for a reader's
// disk read, except when it rolls to a new file. Sync, TruncateAfterPos,
// DeleteBelowPos and Close may be called from any goroutine; they serialize
// among themselves, and fsync runs without blocking Put. TruncateAfterPos is
// meant for recovery, before dispatch starts. Lock order inside a Queue:
// wmu → mu → bmu; Store.syncMu comes before all of them.
package consumequeue
