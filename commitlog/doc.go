// Package commitlog is Sluice's single append-only log: every message of a
// broker, whatever its topic and queue, is appended here, one record after
// another, into fixed-size segment files. Sequential appends to one log are
// why throughput stays flat however many queues there are.
//
// # Segments
//
// The log is a run of segment files in one directory, each SegmentSize bytes
// and named by the global offset (Offset) of its first byte, as %020d:
//
//	00000000000000000000  00000000001073741824  00000000002147483648 ...
//
// A segment is preallocated at creation (fallocate) when the file system
// supports it, so its unwritten tail reads as zeros. With Options.WarmAhead a
// warmer goroutine also writes those zeros, and fsyncs them, a little ahead
// of the appends, so that the fsyncs of sync mode flush data only (warm.go),
// and asks the kernel to read back the warm pages just ahead of the appends
// if it evicted them (an append into part of an evicted page would read it
// itself, on the put path).
// Measured on ext4 (BenchmarkSegmentWrite, thread CPU per byte of a 64 MiB
// segment written with an fdatasync every 4 MiB, 10 alternated rounds):
// preallocated costs 0.90 (1 KiB records) to 0.97 (128 B) of a sparse,
// growing file, and warming costs 1.13 (1 KiB) to 1.79 (128 B) of it (the
// zeros are a second write), so async mode preallocates and does not warm.
// With Options.PrecreateNext (the broker's store sets it) the segment after
// the active one is created, preallocated and synced in the background, so
// that the append that rolls into it does not wait for that; an unused one
// is removed at Close, or by recovery as an empty trailing segment.
// With Options.ReadAhead a reader going forward through bytes the page cache
// no longer holds (a consumer replaying a backlog) gets the log read into the
// cache a window ahead of it by a goroutine of the log (readahead.go), so that
// its reads do not each wait for the disk and fill the cache themselves.
// Offsets are global byte positions: the byte at Offset o lives in segment
// o - o%SegmentSize.
//
// # Record envelope
//
// The log frames opaque records and knows only their envelope, the first
// eight bytes of RocketMQ's stored message layout:
//
//	+-----------------+-----------------+----------------------------+
//	| TOTALSIZE int32 | MAGICCODE int32 | payload (TOTALSIZE-8 bytes) |
//	+-----------------+-----------------+----------------------------+
//
// big-endian, TOTALSIZE counting the whole record. MAGICCODE is RecordMagic
// (0xDAA320A7, RocketMQ's v1 message) or BlankMagic (0xCBD43194). Deeper
// checks (field lengths, physical offset, body CRC) are injected through
// Options.Validate; internal/message provides them for Sluice's records. A
// Scanner can be given its own (Validating), to check and read a record in
// one pass.
//
// A record is placed in the current segment only if TOTALSIZE+8 is at most the
// bytes left in it, so there is always room for a blank filler: when a record
// does not fit, the log writes [bytesLeft int32][BlankMagic int32] at the write
// position, the rest of the segment stays zero, and the record goes to the
// next segment. A batch is one record run passed to one Append, so it never
// straddles two segments.
//
// # Durability
//
// Append writes the record to the operating system before it returns (a
// killed process loses nothing Append returned), but does not fsync. A flusher
// goroutine fsyncs: in async mode every FlushInterval; in sync mode whenever a
// caller waits in WaitDurable, so concurrent appenders share one fsync (group
// commit). Durable() is the offset below which everything is on disk.
//
// After each fsync the flusher may save a checkpoint (at most every
// CheckpointInterval): the durable offset and the position of the record that
// ends there (the last record of the last Append, which may write several).
// Open saves one of the recovered end too. An abort file exists while the log
// is open and is removed by a clean Close.
//
// Segments are fsynced through their File (Options.OpenFile), the
// checkpoint and the directory through Options.SyncFile: the owner may make
// both wait some other way than a blocking system call (broker/store uses
// internal/fsync's AIO) while this package stays on the standard library.
//
// # Recovery
//
// Open scans only what the checkpoint does not cover: from the checkpointed
// offset (after checking that the record ending there is intact, or, for a
// checkpoint of an earlier version that names the first record of a batch,
// every record from there to the offset) to the end of the last segment, or
// every segment when there is no usable checkpoint (RecoveryInfo's
// CheckpointProblem says why). Each
// record must pass, in order: TOTALSIZE 0 means the end of written data; the
// magic is RecordMagic or BlankMagic; a blank's TOTALSIZE equals the bytes left
// in its segment; a record's TOTALSIZE is at least MinRecord, at most
// MaxRecord and leaves 8 bytes in the segment; then Options.Validate. The first
// failure in the last segment marks the end of the log: the segment is cut and
// zero-filled from there. A failure in an older segment is corruption: it is
// reported (RecoveryInfo.Corrupt, with segment and position) and the rest of
// that segment is skipped, never silently truncated.
//
// # Errors and disk full
//
// A failed write or fsync makes the log refuse appends with a sticky error. A
// failed fsync is permanent until the process reopens the log (the page cache
// can no longer be trusted). Running out of space (ENOSPC) refuses appends
// with a DiskFullError (ErrDiskFull); the append that failed was not
// acknowledged, and appends are tried again DiskFullRetry later, so they resume
// by themselves once space is available. The owner can also refuse appends
// for lack of space before the file system does (RefuseAppends, say above a
// watermark). Retention deletes early under disk pressure only when asked to
// (RetentionOptions.HighWatermark).
//
// # Concurrency
//
// Append must not be called concurrently: the caller serializes it (the store's
// put lock). ReadAt, NewScanner, Next, Durable, Min and WaitDurable are safe
// from any goroutine. A Scanner is used by one goroutine.
package commitlog
