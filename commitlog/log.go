package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Offset is a global byte position in the log: a segment's base plus the
// position inside it.
type Offset int64

const (
	// RecordMagic is the MAGICCODE of a record: RocketMQ's v1 message.
	RecordMagic int32 = -626843481 // 0xDAA320A7
	// BlankMagic is the MAGICCODE of the filler that ends a segment.
	BlankMagic int32 = -875286124 // 0xCBD43194
	// envelopeSize is TOTALSIZE plus MAGICCODE, and the size of a blank
	// marker, which every segment keeps room for.
	envelopeSize = 8

	blankMagicBits  = 0xCBD43194
	recordMagicBits = 0xDAA320A7
)

// Options configure a Log. The zero value of each field selects its default.
type Options struct {
	// SegmentSize is the size of each segment file. Default 1 GiB.
	SegmentSize int64
	// MinRecord and MaxRecord bound TOTALSIZE. Defaults 8 and
	// min(SegmentSize-8, 64 MiB).
	MinRecord int32
	MaxRecord int32
	// MaxAppend bounds the bytes of one Append (a batch of records).
	// Default min(SegmentSize-8, 64 MiB); at least MaxRecord.
	MaxAppend int32
	// Validate checks a record beyond its envelope; recovery and scanners
	// call it. at is the record's offset; full asks for the costly checks
	// too (a body CRC): set in recovery and by a Thorough scanner, for
	// records another process wrote, and not for a live scanner's, which
	// this process wrote. nil checks the envelope only.
	Validate func(rec []byte, at Offset, full bool) error
	// SyncFlush selects group commit: the flusher fsyncs whenever a caller
	// waits in WaitDurable. Otherwise the flusher fsyncs every FlushInterval.
	SyncFlush bool
	// FlushInterval is the async fsync period. Default 500ms. In sync mode it
	// is the period of the safety flush that runs without waiters.
	FlushInterval time.Duration
	// GroupCommitWindow, in sync mode, lets the flusher wait this long after
	// being woken before it fsyncs, so that more appends share the fsync.
	// Default 0: fsync at once; appends that arrive during an fsync share
	// the next one.
	GroupCommitWindow time.Duration
	// CheckpointInterval is the minimum time between checkpoint saves.
	// Default 1s.
	CheckpointInterval time.Duration
	// NoPreallocate disables preallocating segment files.
	NoPreallocate bool
	// PrecreateNext creates the segment after the active one (preallocated
	// and synced) in the background, so that the append that rolls into it
	// does not wait for that. NB: on ext4, creating a 1 GiB segment while
	// the active one had dirty data took 4-570 ms; the put path stalled
	// for it once a segment. An unused one is removed at Close (and, after
	// a crash, by recovery, as any empty trailing segment).
	PrecreateNext bool
	// WarmAhead, when positive, keeps this many bytes past the end of the log
	// written with zeros and fsynced, a 1 MiB piece at a time, so that the
	// fsync after an append flushes data only and no file system metadata
	// (see warm.go). It pays in sync mode; it is ignored with NoPreallocate.
	// Where the file system cannot preallocate, the zeros allocate the
	// space ahead instead. At least 2 MiB when set. Default 0: off.
	WarmAhead int64
	// ReadAhead, when positive, is how far ahead of a reader whose reads
	// miss the page cache, moving forward through the log (a consumer
	// replaying a backlog), the log is read into the cache in the
	// background (see readahead.go). At least 1 MiB when set. Default 0:
	// off (the kernel's own read-ahead only).
	ReadAhead int64
	// DiskFullRetry is how long after an ENOSPC failure appends stay refused
	// before one is tried again. Default 1s.
	DiskFullRetry time.Duration
	// DiskFullHint is appended to the message of appends refused after an
	// ENOSPC: what the operator can do about it.
	DiskFullHint string
	// Retention decides what Retain deletes; see RetentionOptions.
	Retention RetentionOptions
	// OpenFile opens segment files. Default OSOpenFile.
	OpenFile OpenFileFunc
	// SyncFile fsyncs the log's other files: its checkpoint and its
	// directory. Default (*os.File).Sync.
	SyncFile func(*os.File) error
	// OnSync, if set, is called by the flusher after each successful fsync
	// round with its duration and the bytes it made durable (metrics).
	OnSync func(d time.Duration, bytes int64)
	// Cut, when set, cuts the log at CutAt after recovery (a record
	// boundary; everything from it goes): a replica dropping a tail its new
	// master does not have.
	Cut   bool
	CutAt Offset
	// Logger receives recovery and retention reports. Default slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.SegmentSize == 0 {
		o.SegmentSize = 1 << 30
	}
	if o.SegmentSize < 4096 || o.SegmentSize > 1<<40 {
		return o, fmt.Errorf("commitlog: segment size %d out of range [4096, 2^40]", o.SegmentSize)
	}
	if o.MinRecord == 0 {
		o.MinRecord = envelopeSize
	}
	if o.MaxRecord == 0 {
		o.MaxRecord = 64 << 20
		if int64(o.MaxRecord) > o.SegmentSize-envelopeSize {
			o.MaxRecord = int32(o.SegmentSize - envelopeSize)
		}
	}
	if o.MaxAppend == 0 {
		o.MaxAppend = 64 << 20
		if int64(o.MaxAppend) > o.SegmentSize-envelopeSize {
			o.MaxAppend = int32(o.SegmentSize - envelopeSize)
		}
		o.MaxAppend = max(o.MaxAppend, o.MaxRecord)
	}
	if o.MinRecord < envelopeSize || o.MaxRecord < o.MinRecord || o.MaxAppend < o.MaxRecord ||
		int64(o.MaxAppend) > o.SegmentSize-envelopeSize {
		return o, fmt.Errorf("commitlog: record bounds [%d, %d], append bound %d invalid for segment size %d",
			o.MinRecord, o.MaxRecord, o.MaxAppend, o.SegmentSize)
	}
	if o.WarmAhead < 0 {
		return o, fmt.Errorf("commitlog: negative warm-ahead %d", o.WarmAhead)
	}
	if o.ReadAhead < 0 {
		return o, fmt.Errorf("commitlog: negative read-ahead %d", o.ReadAhead)
	}
	if o.ReadAhead > 0 && o.ReadAhead < 1<<20 {
		o.ReadAhead = 1 << 20
	}
	if o.WarmAhead > 0 && o.WarmAhead < 2*warmPiece {
		o.WarmAhead = 2 * warmPiece
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = 500 * time.Millisecond
	}
	if o.CheckpointInterval <= 0 {
		o.CheckpointInterval = time.Second
	}
	if o.SyncFile == nil {
		o.SyncFile = (*os.File).Sync
	}
	if o.DiskFullRetry <= 0 {
		o.DiskFullRetry = time.Second
	}
	if o.OpenFile == nil {
		o.OpenFile = OSOpenFile
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Retention = o.Retention.withDefaults()
	return o, nil
}

// Log is an append-only log of records in segment files. See the package
// documentation for the format and the concurrency contract.
type Log struct {
	dir  string
	opts Options

	// Appender state: touched only by Append, which the caller serializes,
	// and by Open and Close.
	active *segment
	wpos   int64        // write position in active
	wbuf   []byte       // encode buffer handed to fill
	warm   *warmer      // nil unless Options.WarmAhead
	ra     *readAhead   // nil unless Options.ReadAhead
	raw    rawParser    // record boundaries of AppendRaw (replicas)
	pre    *precreation // the next segment under creation (Options.PrecreateNext)

	// tailMu pairs the end of the log with the start of its last record so
	// that the flusher can checkpoint both consistently; it also guards
	// cpNext and cpTail.
	tailMu    sync.Mutex
	tailStart Offset // start of the last record or blank; -1 if none

	next    atomic.Int64 // end of the written log (Offset)
	written atomic.Int64 // replicas: end of the raw bytes written, >= next (Offset)
	// nextArmed is set while someone waits on nextCh (NextChanged), which
	// publish then closes and replaces under nextMu.
	nextArmed atomic.Bool
	nextMu    sync.Mutex
	nextCh    chan struct{}
	durable   atomic.Int64 // everything below is fsynced (Offset)
	min       atomic.Int64 // first readable offset (Offset)

	segMu sync.RWMutex
	segs  []*segment // sorted by base, contiguous; guarded by segMu

	// errMu guards the sticky write error.
	errMu      sync.Mutex
	werr       error     // sticky; nil when appends are allowed
	werrAt     time.Time // when werr was set
	werrRetry  bool      // werr is ENOSPC: retry after DiskFullRetry
	hasErr     atomic.Bool
	refuseFull atomic.Pointer[DiskFullError] // set by RefuseAppends

	// durMu guards durCh, which is closed and replaced every time durable
	// advances or the flusher fails, waking WaitDurable callers.
	durMu sync.Mutex
	durCh chan struct{}

	// Flusher-owned (Close uses them after the flusher stopped).
	lastCheckpoint time.Time
	cpNext, cpTail Offset // last fsynced end and the record that ends there; guarded by tailMu (setEnd writes them too)

	kick      chan struct{} // cap 1: wake the flusher
	quit      chan struct{}
	closed    chan struct{} // closed when Close has finished
	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup

	recovery RecoveryInfo
}

// Open opens the log in dir, creating the directory if needed, and recovers
// its tail (see the package documentation). It starts the flusher (and the
// warmer with Options.WarmAhead); retention runs when the owner calls Retain.
func Open(dir string, opts Options) (*Log, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("commitlog: create dir: %w", err)
	}
	l := &Log{
		dir:       dir,
		opts:      opts,
		wbuf:      make([]byte, 0, 64<<10),
		tailStart: -1,
		durCh:     make(chan struct{}),
		nextCh:    make(chan struct{}),
		kick:      make(chan struct{}, 1),
		quit:      make(chan struct{}),
		closed:    make(chan struct{}),
	}
	if err := l.recover(); err != nil {
		l.closeSegments()
		return nil, err
	}
	if opts.Cut {
		if err := l.cutTail(opts.CutAt); err != nil {
			l.closeSegments()
			return nil, err
		}
	}
	if err := l.createAbort(); err != nil {
		l.closeSegments()
		return nil, err
	}
	if l.active != nil {
		l.precreate(l.active.base + Offset(opts.SegmentSize))
	}
	// NB: the recovered end is on disk: a crash before the flusher's first
	// checkpoint then recovers from here, not by a scan of the whole log.
	// After the next segment's precreation has begun: a restart on a full
	// disk deleted the empty one the last process had made, and the disk
	// must be as full again when the store first checks it.
	if err := l.saveCheckpoint(); err != nil {
		l.opts.Logger.Warn("commitlog: save checkpoint", "err", err) // NB: as the flusher's: the next one may do
	}
	l.lastCheckpoint = time.Now()
	l.wg.Add(1)
	go l.flushLoop()
	if opts.ReadAhead > 0 {
		l.ra = newReadAhead(opts.ReadAhead)
		l.wg.Add(1)
		go l.readAheadLoop()
	}
	if opts.WarmAhead > 0 && !opts.NoPreallocate {
		l.warm = newWarmer(l, opts.WarmAhead, l.Next())
		l.wg.Add(1)
		go l.warm.loop()
	}
	return l, nil
}

// Dir returns the directory of the log.
func (l *Log) Dir() string { return l.dir }

// SegmentSize returns the size of each segment file.
func (l *Log) SegmentSize() int64 { return l.opts.SegmentSize }

// Next returns the offset where the next record will start: the end of the
// written log. Every offset below it is readable.
func (l *Log) Next() Offset { return Offset(l.next.Load()) }

// Durable returns the offset below which the log is fsynced.
func (l *Log) Durable() Offset { return Offset(l.durable.Load()) }

// Min returns the first offset still held by the log.
func (l *Log) Min() Offset { return Offset(l.min.Load()) }

// Recovery reports what Open found.
func (l *Log) Recovery() RecoveryInfo { return l.recovery }

// Append writes size bytes of records and returns the offset of the first.
// It first decides where they go (rolling to a new segment behind a blank
// filler when they do not fit), then calls fill with that offset and a buffer
// of exactly size bytes to encode into. fill writes one record, or a batch of
// records back to back whose TOTALSIZEs add up to size; it must not block and
// must not retain dst. A batch never straddles two segments.
//
// When Append returns nil the record has reached the operating system; it is
// durable once Durable() passes its end (see WaitDurable).
//
// REQUIRES: Append is not called concurrently.
func (l *Log) Append(size int, fill func(at Offset, dst []byte) error) (Offset, error) {
	if err := l.writable(); err != nil {
		return 0, err
	}
	if size < int(l.opts.MinRecord) || size > int(l.opts.MaxAppend) {
		return 0, fmt.Errorf("%w: %d bytes, limits [%d, %d]", ErrRecordTooLarge, size, l.opts.MinRecord, l.opts.MaxAppend)
	}
	if l.written.Load() > l.next.Load() {
		l.dropPartial() // NB: a replica's unfinished record, before it serves appends
	}
	if l.active == nil || l.wpos+int64(size)+envelopeSize > l.opts.SegmentSize {
		if err := l.roll(); err != nil {
			return 0, err
		}
	}
	at := l.active.base + Offset(l.wpos)
	if cap(l.wbuf) < size {
		l.wbuf = make([]byte, 0, size)
	}
	buf := l.wbuf[:size]
	if err := fill(at, buf); err != nil {
		return 0, err
	}
	last, err := l.checkFill(buf)
	if err != nil {
		return 0, err
	}
	if l.warm != nil {
		l.warm.claim(at + Offset(size))
	}
	if _, err := l.active.f.WriteAt(buf, l.wpos); err != nil {
		l.failWrite(fmt.Errorf("write segment %s at %d: %w", l.active.name(), l.wpos, err), l.wpos, size)
		return 0, l.stickyErr()
	}
	l.wpos += int64(size)
	// NB: the tail is the batch's last record, so that a checkpoint taken
	// at this end names one record that ends there (verifyCheckpoint).
	l.publish(at+Offset(last), at+Offset(size))
	return at, nil
}

// checkFill verifies that buf is a run of records whose envelopes tile it,
// and returns where the last of them starts in buf.
func (l *Log) checkFill(buf []byte) (last int, err error) {
	for p := 0; p < len(buf); {
		if len(buf)-p < envelopeSize {
			return 0, fmt.Errorf("%w: %d stray bytes at %d", ErrBadFill, len(buf)-p, p)
		}
		n := int32(binary.BigEndian.Uint32(buf[p:]))
		if n < l.opts.MinRecord || n > l.opts.MaxRecord || int(n) > len(buf)-p ||
			int32(binary.BigEndian.Uint32(buf[p+4:])) != RecordMagic {
			return 0, fmt.Errorf("%w: record at %d of %d bytes has TOTALSIZE %d", ErrBadFill, p, len(buf), n)
		}
		last = p
		p += int(n)
	}
	return last, nil
}

// publish makes [.., end) visible to readers and records the last record.
func (l *Log) publish(start, end Offset) {
	l.tailMu.Lock()
	l.tailStart = start
	l.next.Store(int64(end))
	l.tailMu.Unlock()
	if l.nextArmed.Load() {
		l.nextMu.Lock()
		l.nextArmed.Store(false)
		close(l.nextCh)
		l.nextCh = make(chan struct{})
		l.nextMu.Unlock()
	}
}

// NextChanged returns a channel that is closed the next time Next()
// advances. A reader of the whole log (a replication sender) waits on it;
// appends pay for it only while someone waits.
func (l *Log) NextChanged() <-chan struct{} {
	l.nextMu.Lock()
	defer l.nextMu.Unlock()
	l.nextArmed.Store(true)
	return l.nextCh
}

// roll closes the active segment with a blank filler and starts the next one.
// The new segment is created (and preallocated) before the blank is written,
// so a failure leaves the log as it was.
func (l *Log) roll() error {
	var base Offset
	if l.active != nil {
		base = l.active.base + Offset(l.opts.SegmentSize)
	} else {
		base = l.Next()
	}
	seg, err := l.newSegment(base)
	if err != nil {
		l.failWrite(err, -1, 0)
		return l.stickyErr()
	}
	if old := l.active; old != nil {
		left := l.opts.SegmentSize - l.wpos
		var blank [envelopeSize]byte
		binary.BigEndian.PutUint32(blank[0:4], uint32(left))
		binary.BigEndian.PutUint32(blank[4:8], blankMagicBits)
		if l.warm != nil {
			l.warm.claim(old.base + Offset(l.opts.SegmentSize))
		}
		if _, err := old.f.WriteAt(blank[:], l.wpos); err != nil {
			seg.close()
			os.Remove(seg.path)
			l.failWrite(fmt.Errorf("write blank in segment %s: %w", old.name(), err), l.wpos, envelopeSize)
			return l.stickyErr()
		}
		// NB: a segment that could not be preallocated is extended (sparse)
		// so that every closed segment has its full size.
		if err := old.f.Truncate(l.opts.SegmentSize); err != nil {
			l.opts.Logger.Warn("commitlog: extend closed segment", "segment", old.name(), "err", err)
		}
		l.publish(old.base+Offset(l.wpos), base)
	}
	l.segMu.Lock()
	l.segs = append(l.segs, seg)
	l.segMu.Unlock()
	l.active, l.wpos = seg, 0
	l.precreate(base + Offset(l.opts.SegmentSize))
	return nil
}

// precreation is a segment being created in the background.
type precreation struct {
	base Offset
	done chan struct{} // closed when seg or err is set
	seg  *segment
	err  error
}

// precreate starts creating the segment at base in the background, with
// Options.PrecreateNext. REQUIRES: the appender (or Open).
func (l *Log) precreate(base Offset) {
	if !l.opts.PrecreateNext || l.pre != nil {
		return
	}
	p := &precreation{base: base, done: make(chan struct{})}
	l.pre = p
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer close(p.done)
		p.seg, p.err = l.createSegment(base)
	}()
}

// newSegment returns the new segment at base: the one created in the
// background when there is one (waiting for it if need be), or one
// created now. REQUIRES: the appender.
func (l *Log) newSegment(base Offset) (*segment, error) {
	if p := l.pre; p != nil {
		l.pre = nil
		<-p.done
		if p.err == nil && p.base == base {
			return p.seg, nil
		}
		l.dropPrecreated(p)
		// NB: a failed one (a full disk) is tried once more, now, so
		// that the append reports its own error.
	}
	return l.createSegment(base)
}

// dropPrecreated closes and removes a segment created in the background
// and not used.
func (l *Log) dropPrecreated(p *precreation) {
	if p.seg == nil {
		return
	}
	p.seg.close()
	if err := os.Remove(p.seg.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		l.opts.Logger.Warn("commitlog: remove unused segment", "segment", p.seg.name(), "err", err)
	}
}

// createSegment creates, preallocates and makes durable a new, empty segment.
func (l *Log) createSegment(base Offset) (*segment, error) {
	path := filepath.Join(l.dir, segmentName(base))
	f, err := l.opts.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create segment %s: %w", segmentName(base), err)
	}
	fail := func(err error) (*segment, error) {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	if !l.opts.NoPreallocate {
		if err := f.Preallocate(l.opts.SegmentSize); err != nil && !errors.Is(err, errors.ErrUnsupported) {
			return fail(fmt.Errorf("preallocate segment %s: %w", segmentName(base), err))
		}
	}
	if err := f.Sync(); err != nil {
		return fail(fmt.Errorf("sync new segment %s: %w", segmentName(base), err))
	}
	if err := l.syncDir(); err != nil {
		return fail(fmt.Errorf("sync dir for segment %s: %w", segmentName(base), err))
	}
	return newSegmentOf(base, path, f), nil
}

// writable returns the error that refuses appends, if any. A disk-full error
// older than DiskFullRetry is cleared so that this append tries again.
func (l *Log) writable() error {
	if full := l.refuseFull.Load(); full != nil {
		return full
	}
	if !l.hasErr.Load() {
		select {
		case <-l.quit:
			return ErrClosed
		default:
			return nil
		}
	}
	l.errMu.Lock()
	defer l.errMu.Unlock()
	if l.werr != nil && l.werrRetry && time.Since(l.werrAt) >= l.opts.DiskFullRetry {
		l.opts.Logger.Info("commitlog: retrying appends after disk full", "since", l.werrAt)
		l.werr, l.werrRetry = nil, false
		l.hasErr.Store(false)
		return nil
	}
	return l.werr
}

// AppendErr returns the error appends are refused with now (RefuseAppends,
// an ENOSPC whose retry delay runs, a write failure, Close), or nil.
func (l *Log) AppendErr() error {
	if full := l.refuseFull.Load(); full != nil {
		return full
	}
	select {
	case <-l.quit:
		return ErrClosed
	default:
	}
	l.errMu.Lock()
	defer l.errMu.Unlock()
	if l.werr != nil && l.werrRetry && time.Since(l.werrAt) >= l.opts.DiskFullRetry {
		return nil // the next append tries again
	}
	return l.werr
}

func (l *Log) stickyErr() error {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	if l.werr == nil {
		return ErrWriteFailed
	}
	return l.werr
}

// failWrite records a failed write. ENOSPC is retried later; anything else
// refuses appends until the log is reopened. When pos >= 0 the bytes
// [pos, pos+n) of the active segment may hold part of the failed record: they
// are zeroed (best effort) so that they cannot be mistaken for data.
func (l *Log) failWrite(err error, pos int64, n int) {
	if pos >= 0 && l.active != nil {
		zeros := make([]byte, n)
		if _, zerr := l.active.f.WriteAt(zeros, pos); zerr != nil && l.opts.NoPreallocate {
			_ = l.active.f.Truncate(pos)
		}
	}
	full := errors.Is(err, syscall.ENOSPC)
	used := -1.0
	if full {
		if u, uerr := l.opts.Retention.DiskUsage(l.dir); uerr == nil {
			used = u
		}
	}
	l.errMu.Lock()
	defer l.errMu.Unlock()
	if l.werr != nil && !l.werrRetry {
		return // a permanent error stays
	}
	if full {
		l.werr = &DiskFullError{Cause: err, Used: used, Hint: l.opts.DiskFullHint}
		l.werrRetry = true
	} else {
		l.werr = fmt.Errorf("%w: appends refused until the log is reopened: %w", ErrWriteFailed, err)
		l.werrRetry = false
	}
	l.werrAt = time.Now()
	l.hasErr.Store(true)
	l.opts.Logger.Error("commitlog: append failed", "err", err)
}

// ReadAt reads len(p) bytes of the log starting at off. Reads stop at the end
// of off's segment and at Next(); a short read returns io.EOF.
func (l *Log) ReadAt(p []byte, off Offset) (int, error) {
	next := l.Next()
	if off >= next || off < 0 {
		return 0, fmt.Errorf("%w: %d, next %d", ErrOffsetOutOfRange, off, next)
	}
	if off < l.Min() {
		return 0, fmt.Errorf("%w: %d, min %d", ErrOffsetRemoved, off, l.Min())
	}
	seg := l.segmentFor(off)
	if seg == nil {
		return 0, fmt.Errorf("%w: %d, min %d", ErrOffsetRemoved, off, l.Min())
	}
	pos := int64(off - seg.base)
	want := len(p)
	if lim := int64(next - off); int64(want) > lim {
		want = int(lim)
	}
	if lim := l.opts.SegmentSize - pos; int64(want) > lim {
		want = int(lim)
	}
	var n int
	var err error
	if l.ra != nil {
		var missed bool
		n, missed, err = seg.readAtCached(p[:want], pos)
		l.noteRead(off, n, missed)
	} else {
		n, err = seg.readAt(p[:want], pos)
	}
	if err == nil && n < len(p) {
		err = io.EOF
	}
	return n, err
}

// segmentFor returns the segment holding off, or nil.
func (l *Log) segmentFor(off Offset) *segment {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	if len(l.segs) == 0 {
		return nil
	}
	i := int64(off-l.segs[0].base) / l.opts.SegmentSize
	if off < l.segs[0].base || i >= int64(len(l.segs)) {
		return nil
	}
	return l.segs[i]
}

// segmentEnd returns the end offset of the segment that holds off.
func (l *Log) segmentEnd(off Offset) Offset {
	return off - off%Offset(l.opts.SegmentSize) + Offset(l.opts.SegmentSize)
}

// Close flushes and fsyncs the log, saves a checkpoint, removes the abort
// file and closes the segments. It is idempotent.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		close(l.quit)
		l.wg.Wait()
		if p := l.pre; p != nil {
			l.pre = nil
			l.dropPrecreated(p)
		}
		err := l.flush()
		// NB: a disk-full spell (ENOSPC) left nothing torn: the log closes
		// cleanly; a failed write or fsync does not.
		if err == nil && l.Failed() == nil {
			if err = l.saveCheckpoint(); err == nil {
				err = l.removeAbort()
			}
		}
		if cerr := l.closeSegments(); err == nil {
			err = cerr
		}
		l.closeErr = err
		close(l.closed)
	})
	return l.closeErr
}

func (l *Log) closeSegments() error {
	l.segMu.Lock()
	segs := l.segs
	l.segMu.Unlock()
	var first error
	for _, s := range segs {
		if err := s.close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
