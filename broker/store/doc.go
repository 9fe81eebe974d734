// Package store joins the commitlog and its indexes into the broker's message
// store, as RocketMQ's DefaultMessageStore does.
//
// # Put path
//
// Submit is the one way in. It takes a slice of requests, each a message
// or a batch (consecutive records, one append, never across two
// segments), checks their limits, and holds putMu once for all of them,
// the one serialization point for writes: for each chunk of requests (as
// many as fit in 256 KiB, or one larger request alone) it assigns queue
// offsets from the per-queue counters, encodes the v1 records straight
// into the commitlog's buffer (commitlog.Log.Append) and advances the
// counters; a failed append gives its offsets back. Nothing slow happens
// under putMu. Each request is then answered through its Done: at once
// when it failed, needs no fsync (async flush mode) or asked not to wait
// (NoWait, RocketMQ's WAIT=false); otherwise the durable notifier
// (durableLoop) answers it once the fsync covering it completes, or with
// PutFlushDiskTimeout (stored all the same) after the sync flush timeout.
// No goroutine waits per put. Put and PutBatch are thin wrappers that wait
// for the answer, for the broker's own puts. PREPARED and ROLLBACK
// transactional messages get queue offset 0 and do not advance a counter
// (RocketMQ's rule). The pull path reads the counters (QueueNext) without
// putMu.
//
// # Dispatch
//
// One dispatcher goroutine tails the commitlog with a Scanner (only its
// durable part in sync mode, so a consumer never sees a message that is not
// on disk), reads the few fields it needs from each record (in the same
// pass as the scanner's check of the record: Scanner.Validating), writes a consume
// queue entry (NOT and COMMIT messages only) and key index entries, then
// calls the arrival listeners that long polling hangs on. It wakes on a kick
// from Put (async mode) or on the commitlog's durability signal (sync mode);
// it never sleep-polls. In async mode a put that leaves at most 4 KiB to
// dispatch, finding no dispatch running, runs the pass itself instead of
// kicking (dispatchInline): one goroutine hand-over less per message at a
// low rate. A slave does the same with what ApplyReplica wrote, up to
// 64 KiB, once it has reported it to its master (IndexReplica). dispMu
// makes one dispatcher at a time; the loop keeps the retries' back-off and
// the key index's catch-up.
//
// # Duplicate window
//
// With Options.Dedup.Window set, the store remembers, per topic, the
// UNIQ_KEY of every message a send stored in the last window (at most
// MaxKeys, oldest first; dedup.go): a PutRequest with Dedup whose key (or
// batch member's key) is there is answered PutOK with the first copy's
// ids and Duplicates, and not appended. The put path looks keys up and
// records them under putMu, before and after its appends (dedup_put.go),
// so concurrent sends of one key store one copy. After Open, a goroutine
// rebuilds the window by scanning the log from the first record of the
// last window (found through the consume queues), beside the serving
// store; until it is done a key the window lacks is looked up in the key
// index (storedDup), which Open caught up with the log. SetDedupFeed makes
// the dispatcher add every record it indexes, for a store whose log is
// written by replication.
// Internal puts (Put, PutBatch) are neither checked nor recorded. The
// window's tables live outside the Go heap (offheap.go) and Close frees
// them; while the window fills, a preparer goroutine makes its next chunk
// and table ahead of need, their pages faulted in (huge pages where the
// kernel has them), so that the put path does not fault them in under
// its lock.
//
// # Retention
//
// The store schedules retention; the commitlog only offers Retain and
// calls nothing above it. Every retention_interval the store's retention
// loop calls Log.Retain, which deletes the oldest segments that are
// expired (file_reserved_time) or, with on_disk_pressure "delete_oldest"
// and above disk_high_watermark, regardless of age, but never one holding
// records not yet dispatched. What a deletion under pressure took that
// consumer groups had not consumed (the broker counts it, the store has no
// consumer offsets) is logged at ERROR and counted (Losses). The loop then
// deletes the consume queue and key index files that only point below the
// log's new minimum and raises the queues' minimums (also after a pass
// that failed part way). Close stops the loop and waits for it before it
// closes the files.
//
// # Disk pressure
//
// The disk loop (disk.go) measures disk use every second: above
// disk_high_watermark it warns once per crossing; above disk_full_watermark
// it refuses puts (SERVICE_NOT_AVAILABLE, with a remark saying what to do)
// and deletes the reserve file (<dir>/disk.reserve, disk_reserve bytes), so
// that index, checkpoint and state writes, and a restart, find room; back
// under it, it re-creates the reserve and accepts puts again. Open deletes
// the reserve before recovery when the disk is above the full watermark and
// refuses puts before the first one.
//
// # Recovery (Open)
//
//  1. Take the directory lock.
//  2. Open the consume queues (torn and zeroed tails dropped) and the key index.
//  3. Open the commitlog, which recovers its own tail (see package commitlog).
//  4. Drop consume queue and key index entries that point past the log end.
//  5. Dispatch from each index's checkpoint (kept inside the index's own
//     directory, so deleting a directory rebuilds it from the log) to the
//     end of the log, before any Put is accepted: re-dispatching an entry
//     that exists is verified and skipped.
//  6. Build the queue offset table from the consume queues.
//  7. Start rebuilding the duplicate window (when on) from the log's last
//     window, beside serving (rebuildDedupLoop); the key index answers for
//     it meanwhile.
//
// Open logs one "store: opened" line with each stage's time (OpenStages).
//
// A checkpoint records a dispatch position only after the index files it
// covers were fsynced.
//
// # Fsyncs
//
// Without a test's opener (Options.OpenFile), the store opens its files
// itself (seam.go) and fsyncs them through internal/fsync, whose callers
// wait in the netpoller while a kernel AIO worker runs the fsync: the
// consume queues, the key index, the checkpoints, the state files, and the
// segments in async flush mode. In sync flush mode the segments keep the
// fdatasync system call, which reports sooner under load.
//
// # Files
//
//	<dir>/lock                          flock: one process per store
//	<dir>/disk.reserve                  room kept for when the disk fills
//	<dir>/commitlog/                    segments, checkpoint, abort
//	<dir>/consumequeue/<topic>/<queueId>/<files>, dispatch.checkpoint
//	<dir>/index/<files>, dispatch.checkpoint
package store
