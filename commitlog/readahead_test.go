package commitlog

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadAhead_Observe: the window logic. A read that hits the cache
// starts nothing; a miss starts a candidate, which a second read within a
// window confirms; the advice then runs a window ahead of the furthest
// read and goes on from where the last advice ended once the reads are
// half a window from it, never over what was advised, never past the log's
// end; a stream at the end of the log, or idle, is dropped.
func TestReadAhead_Observe(t *testing.T) {
	const w, k = 8 << 20, 32 << 10
	const logEnd = 1 << 30
	r := newReadAhead(w)
	now := int64(1)
	none := func(from, to int64) { t.Helper(); assert.Equal(t, [2]int64{0, 0}, [2]int64{from, to}) }

	none(r.observe(0, k, false, logEnd, now))
	assert.Zero(t, r.active.Load(), "a read from the cache starts no stream")
	none(r.observe(0, k, true, logEnd, now))
	assert.EqualValues(t, 1, r.active.Load(), "a miss starts a candidate")
	from, to := r.observe(k, 2*k, false, logEnd, now)
	assert.Equal(t, [2]int64{2 * k, 2*k + w}, [2]int64{from, to}, "confirmed: a window ahead of the furthest read")

	// Reads within the first half of the advice, and a laggard behind
	// them (another queue of the same consumer), ask for nothing more.
	for off := int64(2 * k); off+k+w/2 <= 2*k+w; off += k {
		none(r.observe(off, off+k, false, logEnd, now))
	}
	none(r.observe(w/4, w/4+k, true, logEnd, now))
	// Past half a window: from where the advice ended, up to a window
	// ahead.
	off := int64(2*k+w/2) - k + 1
	from, to = r.observe(off, off+k, false, logEnd, now)
	assert.Equal(t, [2]int64{2*k + w, off + k + w}, [2]int64{from, to}, "the next advice starts where the last ended")
	none(r.observe(off+1, off+k+1, false, logEnd, now))

	// A lone miss far from it (a query) is a candidate of its own; a read
	// from the cache elsewhere is nothing.
	none(r.observe(500<<20, 500<<20+k, true, logEnd, now))
	assert.EqualValues(t, 2, r.active.Load())
	none(r.observe(700<<20, 700<<20+k, false, logEnd, now))
	assert.EqualValues(t, 2, r.active.Load())

	// The adviser takes what was asked in pieces, once each, in order.
	var got [][2]int64
	for {
		f, t, ok := r.next()
		if !ok {
			break
		}
		got = append(got, [2]int64{f, t})
	}
	require.NotEmpty(t, got)
	assert.Equal(t, int64(2*k), got[0][0])
	for i := 1; i < len(got); i++ {
		assert.Equal(t, got[i-1][1], got[i][0], "contiguous, no overlap")
		assert.LessOrEqual(t, got[i][1]-got[i][0], int64(raStep))
	}
	assert.Equal(t, off+k+w, got[len(got)-1][1])

	// At the log's end: the advice stops there, and the stream goes once
	// its reads pass all of it from the cache.
	end := int64(off + k + w + w/4)
	from, to = r.observe(off+w/2+2*k, off+w/2+3*k, false, end, now)
	assert.Equal(t, [2]int64{off + k + w, end}, [2]int64{from, to}, "clamped to the log's end")
	none(r.observe(end-k, end, false, end, now))
	assert.EqualValues(t, 1, r.active.Load(), "past its advice at the log's end: dropped")

	// An idle stream goes at the next observation.
	none(r.observe(900<<20, 900<<20+k, false, logEnd, now+raIdle+1))
	assert.Zero(t, r.active.Load())

	// The table is bounded.
	for i := range int64(3 * raStreams) {
		r.observe(i<<30, i<<30+k, true, 100<<30, now+raIdle+2+i)
	}
	assert.EqualValues(t, raStreams, r.active.Load())
}
