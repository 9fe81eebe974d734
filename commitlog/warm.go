package commitlog

import (
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
)

// warmPiece is the unit the warmer writes and fsyncs: small enough that an
// fsync of the log that waits behind its writeback waits little.
const warmPiece = 1 << 20

// warmer keeps the bytes just past the end of the log written with zeros and
// fsynced (Options.WarmAhead).
//
// A preallocated segment is made of unwritten extents: the file system only
// records that they read as zeros. The first write into such a block
// converts its extent, a metadata change, so the fdatasync that follows an
// append into fresh blocks also commits the file system's journal. On this
// project's ext4 test machine an fdatasync of 48 KiB appended into fallocated
// space took 0.48 ms, and 0.22 ms into space already written and fsynced.
// RocketMQ's warmMapedFileEnable writes a whole file at creation; the warmer
// instead stays a little ahead of the appends, in its own goroutine.
//
// The warmer and the appender never write the same bytes at once. Before a
// write the appender publishes where it ends (intent) and then reads busy;
// the warmer publishes where its write starts (busy) and then reads intent.
// With sequentially consistent atomics at least one of them sees the other:
// the appender then waits for the warmer's piece (it takes mu), and the
// warmer gives its piece up and starts past the appender.
type warmer struct {
	l     *Log
	ahead int64

	intent atomic.Int64 // end of the appender's current or last write
	busy   atomic.Int64 // start of the warmer's write in progress, or MaxInt64
	wakeAt atomic.Int64 // an appender write ending past this wakes the warmer
	mu     sync.Mutex   // held by the warmer while it writes
	kick   chan struct{}

	// Warmer goroutine only.
	upTo  Offset   // bytes below upTo are warm (or were written by the appender)
	seg   *segment // segment f is open on
	f     File     // the warmer's own descriptor of seg
	ioErr bool     // the warmer failed on seg: leave seg alone
}

func newWarmer(l *Log, ahead int64, end Offset) *warmer {
	w := &warmer{l: l, ahead: ahead, kick: make(chan struct{}, 1), upTo: end}
	w.intent.Store(int64(end))
	w.busy.Store(math.MaxInt64)
	w.kick <- struct{}{}
	return w
}

// claim is called by the appender before it writes bytes below end.
func (w *warmer) claim(end Offset) {
	w.intent.Store(int64(end))
	if int64(end) > w.busy.Load() {
		w.mu.Lock() // NB: the warmer sees intent and yields after this piece
		w.mu.Unlock()
	}
	if int64(end) > w.wakeAt.Load() {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

func (w *warmer) loop() {
	defer w.l.wg.Done()
	defer w.closeFile()
	for {
		select {
		case <-w.l.quit:
			return
		case <-w.kick:
		}
		advised, warm := w.readAhead(), w.upTo
		for w.warmPiece() {
			select {
			case <-w.l.quit:
				return
			default:
			}
		}
		// NB: warmPiece set the next wake from the log end it saw, which
		// appends may have moved past the one advised from, and may have
		// warmed pages past the advice's end: advised again from at least
		// that end, the advice reaches wakeAt + 1 MiB, where the next wake
		// advises again.
		if Offset(w.intent.Load()) != advised || w.upTo != warm {
			w.readAhead()
		}
	}
}

// warmPiece warms the next piece of the last segment, if the log's end is
// within ahead bytes of it, and reports whether there may be more to do.
func (w *warmer) warmPiece() bool {
	l := w.l
	l.segMu.RLock()
	var seg *segment
	if n := len(l.segs); n > 0 {
		seg = l.segs[n-1]
	}
	l.segMu.RUnlock()
	if seg == nil {
		return false
	}
	segEnd := seg.base + Offset(l.opts.SegmentSize)
	if seg != w.seg {
		w.closeFile()
		w.seg = seg
	}
	intent := Offset(w.intent.Load())
	lo := max(w.upTo, intent, seg.base)
	lo = (lo + 4095) &^ 4095 // the appender wrote the block holding intent
	target := min(segEnd, (intent+Offset(w.ahead))&^4095)
	if w.ioErr {
		w.wakeAt.Store(int64(segEnd)) // the first append into the next segment
		return false
	}
	if lo >= segEnd {
		// NB: warm to its end, but woken each piece still, for readAhead.
		w.wakeAt.Store(int64(min(intent+warmPiece, segEnd)))
		return false
	}
	if target-lo < warmPiece && target < segEnd {
		w.wakeAt.Store(int64(lo) + warmPiece - w.ahead)
		return false
	}
	hi := min(lo+warmPiece, target)
	if w.f == nil {
		f, err := l.opts.OpenFile(seg.path, os.O_RDWR, 0)
		if err != nil {
			w.giveUp(fmt.Errorf("open: %w", err))
			return false
		}
		w.f = f
	}

	w.mu.Lock()
	w.busy.Store(int64(lo))
	if Offset(w.intent.Load()) > lo {
		// The appender is writing past lo: start again after it.
		w.busy.Store(math.MaxInt64)
		w.mu.Unlock()
		return true
	}
	_, err := w.f.WriteAt(zeroPiece[:hi-lo], int64(lo-seg.base))
	w.busy.Store(math.MaxInt64)
	w.mu.Unlock()
	if err == nil {
		// NB: the warmer fsyncs through its own descriptor, so a writeback
		// error it sees is still reported to the flusher's next fsync.
		err = w.f.Sync()
	}
	if err != nil {
		w.giveUp(fmt.Errorf("write zeros at %d: %w", lo-seg.base, err))
		return false
	}
	w.upTo = hi
	w.wakeAt.Store(int64(hi) + warmPiece - w.ahead)
	return true
}

var zeroPiece = make([]byte, warmPiece)

// readAheadSize is how far past the log's end the warmer asks the kernel to
// keep warm pages in the page cache (readAhead).
const readAheadSize = 2 * warmPiece

// readAhead asks the kernel to read back the warm pages just past the log's
// end that it may have evicted (they are clean once fsynced, the first the
// kernel takes back under memory pressure). An append into part of such a
// page makes the kernel read the page first, synchronously, while the
// appender holds the put lock: 16 MiB of warm space evicted at once (a
// page cache drop before each benchmark run) cost 16 MB of 4 KiB reads on
// the put path and a third of the durable row's throughput. The advice is
// a few system calls per piece the log grows (willNeed), and no I/O while
// the pages are cached.
//
// It returns the log end it advised from.
func (w *warmer) readAhead() Offset {
	intent := Offset(w.intent.Load())
	if w.f == nil || w.ioErr {
		return intent
	}
	lo, hi := intent&^4095, min(w.upTo, intent+readAheadSize)
	if lo < w.seg.base {
		return intent // NB: w.seg is already the next segment; the appends are not there yet
	}
	if lo < hi {
		willNeed(w.f, int64(lo-w.seg.base), int64(hi-lo))
	}
	return intent
}

// giveUp stops warming the current segment. Warming only ever writes zeros
// past the log's end, so its own failures cost no data. A writeback error
// the kernel meets on the warmer's zero pages is also reported to the
// flusher's next fsync (Linux reports it to every open descriptor of the
// file), which then refuses appends until the log is reopened: a stop, not
// a loss.
func (w *warmer) giveUp(err error) {
	w.ioErr = true
	w.l.opts.Logger.Warn("commitlog: warm segment ahead of the appends", "segment", w.seg.name(), "err", err)
}

func (w *warmer) closeFile() {
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
	w.ioErr = false
}
