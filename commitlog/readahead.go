package commitlog

import (
	"sync"
	"sync/atomic"
	"time"
)

// Read-ahead for readers behind the end of the log (Options.ReadAhead).
//
// A consumer replaying a backlog the page cache no longer holds reads it
// forward in pulls of tens of KiB, from several queues whose records are
// interleaved in the log. The kernel's own read-ahead, sharing one file
// state among those readers, read about 400 KiB a request and each pull
// waited for its reads in turn: replaying 2,000,000 × 1 KiB ran at 0.6-0.7
// of the same replay warm. With the log read ahead of the pulls by another
// thread the replay ran at 0.9-1.0 of it (see docs/benchmarks.md).
//
// So ReadAt first reads with RWF_NOWAIT (from the page cache only, no
// extra system call when the bytes are there), and only a read that missed
// the cache starts a stream: a candidate, confirmed by a second read within
// a window of it (a lone read, as a query by key's, starts no read-ahead),
// then advised WILLNEED a window ahead of its furthest read, and again once
// its reads are half a window from the end of the advice, from that end:
// nothing is advised twice. The advice is given by a goroutine of its own,
// so that the pulls do not pay for queueing the reads. The warm tail of the
// log never misses and so is never advised; advice stops at the log's end.
type readAhead struct {
	window int64
	idle   int64 // raIdle; tests set it longer
	// active counts the streams in the table: while it is zero, a read
	// that did not miss takes no lock.
	active atomic.Int32
	kick   chan struct{} // cap 1: wake the adviser
	// advise gives the advice for [off, off+n) of a segment's file
	// (willNeed; tests record it).
	advise func(f File, off, n int64)

	mu      sync.Mutex
	streams [raStreams]raStream
	turn    int // the stream the adviser serves next
}

const (
	// raStreams bounds the streams followed at once: readers far apart in
	// the log (consumer groups replaying different backlogs, a slave
	// catching up).
	raStreams = 8
	// raIdle is how long a stream lives without a read.
	raIdle = int64(5 * time.Second)
	// raStep is how much the adviser advises at a time, for one stream
	// after another.
	raStep = 1 << 20
)

// raStream is one reader (or several reading close together, as a
// consumer's queues do) moving forward through the log. seen == 0 marks a
// free slot.
type raStream struct {
	pos   int64 // the end of its furthest read
	to    int64 // advice asked up to here; 0 for a candidate
	given int64 // advice given up to here (the adviser's progress)
	seen  int64 // when it last read (nanoseconds, any clock)
}

func newReadAhead(window int64) *readAhead {
	return &readAhead{window: window, idle: raIdle, kick: make(chan struct{}, 1), advise: willNeed}
}

// observe records a read of the log's [off, end), of which some bytes
// were not in the page cache if missed, the log ending at logEnd, at now
// (nanoseconds); it returns the range [from, to) it newly asks to advise,
// empty if none.
func (r *readAhead) observe(off, end int64, missed bool, logEnd, now int64) (from, to int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.window
	var s *raStream
	slot, oldest := -1, -1
	for i := range r.streams {
		st := &r.streams[i]
		if st.seen != 0 && now-st.seen > r.idle {
			r.drop(st)
		}
		if st.seen == 0 {
			if slot < 0 {
				slot = i
			}
			continue
		}
		if oldest < 0 || st.seen < r.streams[oldest].seen {
			oldest = i
		}
		if s == nil && off >= st.pos-w && off <= max(st.pos, st.to)+w {
			s = st
		}
	}
	if s == nil {
		if !missed {
			return 0, 0
		}
		if slot < 0 {
			slot = oldest
			r.drop(&r.streams[slot])
		}
		r.streams[slot] = raStream{pos: end, seen: now}
		r.active.Add(1)
		return 0, 0
	}
	s.seen = now
	s.pos = max(s.pos, end)
	switch {
	case s.to == 0:
		from = s.pos // confirmed: a window ahead of its furthest read
	case s.pos+w/2 > s.to:
		from = max(s.to, off) // NB: a reader that jumped past the advice skips the gap
	default:
		return 0, 0
	}
	to = min(s.pos+w, logEnd)
	if to <= from {
		if !missed && s.to != 0 && s.pos >= s.to {
			r.drop(s) // at the log's end, past all its advice
		}
		return 0, 0
	}
	if s.to == 0 || from > s.to {
		s.given = from // NB: what was not advised yet is behind the reader
	}
	s.to = to
	return from, to
}

// drop frees a stream's slot, and with it the advice it asked for that was
// not given yet (the reader is past it, or gone); r.mu is held.
func (r *readAhead) drop(s *raStream) {
	if s.seen != 0 {
		*s = raStream{}
		r.active.Add(-1)
	}
}

// next takes the adviser's next piece of work, [from, to), if any.
func (r *readAhead) next() (from, to int64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for range raStreams {
		s := &r.streams[r.turn]
		r.turn = (r.turn + 1) % raStreams
		if s.seen != 0 && s.given < s.to {
			from, to = s.given, min(s.to, s.given+raStep)
			s.given = to
			return from, to, true
		}
	}
	return 0, 0, false
}

// noteRead is called by ReadAt after a read of [off, off+n) that missed
// the page cache or not.
func (l *Log) noteRead(off Offset, n int, missed bool) {
	r := l.ra
	if r == nil || n <= 0 || (!missed && r.active.Load() == 0) {
		return
	}
	from, to := r.observe(int64(off), int64(off)+int64(n), missed, int64(l.Next()), time.Now().UnixNano())
	if to > from {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

// readAheadLoop is the adviser: it gives the advice the streams ask for.
func (l *Log) readAheadLoop() {
	defer l.wg.Done()
	r := l.ra
	for {
		select {
		case <-l.quit:
			return
		case <-r.kick:
		}
		for {
			from, to, ok := r.next()
			if !ok {
				break
			}
			l.adviseRange(Offset(from), Offset(to))
			select {
			case <-l.quit:
				return
			default:
			}
		}
	}
}

// adviseRange advises [from, to) of the log, segment by segment; the bytes
// of segments removed meanwhile are skipped.
func (l *Log) adviseRange(from, to Offset) {
	for from < to {
		end := min(to, l.segmentEnd(from))
		if seg := l.segmentFor(from); seg != nil {
			seg.mu.RLock()
			if !seg.closed {
				l.ra.advise(seg.f, int64(from-seg.base), int64(end-from))
			}
			seg.mu.RUnlock()
		}
		from = end
	}
}
