// Package keyindex maps message keys to commitlog positions: RocketMQ's
// IndexFile (spec §7.4), used by QUERY_MESSAGE and mqadmin key queries.
// The dispatcher puts each record's UNIQ_KEY and KEYS tokens (as
// Key(topic, key)); Query walks a hash chain and returns candidate
// positions, which the caller confirms by reading the records, because
// different keys can share a hash.
//
// # Files
//
//	<root>/index/00000000000000000000   %020d sequence number, one file after another
//
// A file holds at most EntriesPerFile-1 entries; the Put that fills it seals
// it and the next Put starts a new one. With the defaults (500,000 slots,
// 2,000,000 entries) a file is at most 42,000,040 bytes, written as it
// fills (the slot region stays a hole until the file is sealed).
//
//	+--------------------+----------------------+--------------------------------+
//	| header (40 bytes)  | slots: int32 × slots | entries: 20 bytes × count      |
//	+--------------------+----------------------+--------------------------------+
//	header:  beginTimestamp int64 | endTimestamp int64 | beginPhyOffset int64 |
//	         endPhyOffset int64 | hashSlotCount int32 | indexCount int32 (starts at 1)
//	slot:    number of the newest entry whose hash falls in the slot, 0 = empty
//	entry k (k >= 1, at 40 + slots*4 + k*20):
//	         keyHash int32 | phyOffset int64 | timeDiff int32 (seconds since
//	         beginTimestamp, clamped to [0, MaxInt32]) | prevIndex int32 (0 = end)
//
// All integers are big-endian. keyHash is abs(Java String.hashCode(key))
// with MinInt32 mapped to 0; the slot is keyHash % hashSlotCount.
//
// # Memory
//
// The active file keeps its slot table in memory (4 bytes × SlotsPerFile:
// 2 MB by default, reused across files) and a 5 KiB write buffer. Sealed
// files cost a few words of metadata each; Query opens them on demand and
// reads one slot and one entry per chain step with ReadAt.
//
// # Durability and recovery
//
// The header of a new file, which holds the begin timestamp every timeDiff
// is relative to, is written and fsynced (with the directory) before its
// first entry. Entries are buffered and written when the buffer fills, on
// Sync and on Close. Sealing writes the slot table and the final header and
// fsyncs the file before the next file is created, so every file but the
// newest is complete and trusted on Open (only its indexCount is clamped to
// the file's length).
//
// The newest file's counters and slot table are never trusted: Open scans
// its entries in order and keeps them while they are consistent (position
// not below the previous one, non-negative hash and timeDiff, not all zero,
// and prevIndex equal to the slot head rebuilt so far, which rejects stale
// or torn bytes with high probability), rebuilds the slot table in memory
// and truncates the file after the last good entry. (Damage that forges a
// larger position passes the scan; TruncateAfterPos, which the store calls
// with the recovered commitlog end, removes it.) A crash therefore
// leaves a usable index that may lack the tail that was not yet durable.
// MaxPos() then tells the highest position still indexed; the store
// re-dispatches from its checkpoint (at or before that), and Put ignores
// records below MaxPos(), so re-dispatch is idempotent. The record at
// exactly MaxPos() may have some keys indexed twice; Query drops repeated
// positions. TruncateAfterPos removes entries past the recovered commitlog
// end, so Query never returns positions that no longer exist and MaxPos()
// does not block their re-indexing.
//
// A failed write (ENOSPC, EIO, short write) fails the call that met it and
// moves nothing, so the caller retries: entries stay buffered until a flush
// succeeds, a seal that failed is retried by the next Put, a new file that
// could not be started is removed. A record whose Put failed may have some
// keys indexed twice after the retry (Query drops repeated positions).
// fsync errors are sticky: later Puts and Syncs return the first.
// Every file, and every directory fsync, goes through Options.OpenFile (the
// File seam shared with the commitlog and the consume queues), so tests
// inject write and fsync faults and simulate power loss.
//
// # Concurrency
//
// One goroutine calls Put (the dispatcher). Query may be called from any
// goroutine concurrently: it walks the active file under the index mutex
// and sealed files without it. Sync, DeleteBelowPos and Close may be called
// from any goroutine. TruncateAfterPos is meant for recovery, before
// dispatch and queries start. MaxPos is an atomic load. The package starts
// no goroutines.
package keyindex
