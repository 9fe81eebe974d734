//go:build linux && (amd64 || arm64)

package commitlog

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// adviceLog records the read-ahead's advice (and gives it).
type adviceLog struct {
	mu  sync.Mutex
	got [][2]int64 // [off, off+n) of segment 0's file
}

func (a *adviceLog) advise(f File, off, n int64) {
	a.mu.Lock()
	a.got = append(a.got, [2]int64{off, off + n})
	a.mu.Unlock()
	willNeed(f, off, n)
}

func (a *adviceLog) ranges() [][2]int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.got)
}

// TestReadAhead_SequentialReader: a reader going through the log from the
// page cache is given no advice; once the log's pages are evicted, a
// reader going through it in 32 KiB reads is given advice ahead of it,
// from the end of its second read to the log's end, each byte once, and the
// advised pages come into the cache; the reads return the records.
func TestReadAhead_SequentialReader(t *testing.T) {
	const seg, window = 64 << 20, 4 << 20
	dir := diskDir(t)
	opts := testOptions(seg)
	opts.ReadAhead = window
	l := mustOpen(t, dir, opts)
	defer l.Close()
	rec := &adviceLog{}
	l.ra.advise = rec.advise     // NB: before any read: the adviser starts at a read's kick
	l.ra.idle = int64(time.Hour) // NB: the waits below must not end the stream
	var ws []want
	for int64(l.Next()) < 16<<20 {
		ws = append(ws, appendOne(t, l, 32<<10-100, uint64(len(ws))))
	}
	require.NoError(t, l.WaitDurable(t.Context(), l.Next()))
	end := int64(l.Next())

	buf := make([]byte, 32<<10)
	read := func(from, to int64) {
		for off := from; off < to; off += int64(len(buf)) {
			n, err := l.ReadAt(buf, Offset(off))
			if off+int64(len(buf)) <= end {
				require.NoError(t, err)
			}
			require.Positive(t, n)
		}
	}
	read(0, end)
	assert.Zero(t, l.ra.active.Load(), "reads from the cache start no stream")
	assert.Empty(t, rec.ranges(), "no advice for reads from the cache")

	path := segmentPath(dir, 0)
	require.Eventually(t, func() bool {
		evict(t, path)
		return resident(t, path, 0, end) == 0
	}, 10*time.Second, 10*time.Millisecond, "precondition: the log's pages are evicted")
	// Three reads: the first misses (a candidate), the second confirms it,
	// which asks for a window past its end; the pages past the third come
	// into the cache with no read of them.
	k := int64(len(buf))
	read(0, 3*k)
	require.Eventually(t, func() bool {
		got := rec.ranges()
		return len(got) > 0 && got[len(got)-1][1] == 2*k+window
	}, 10*time.Second, 5*time.Millisecond, "advice for a window past the second read: %v", rec.ranges())
	require.Eventually(t, func() bool {
		return resident(t, path, 3*k, 2*k+window-3*k) == int((2*k+window-3*k)/4096)
	}, 10*time.Second, 10*time.Millisecond, "the advised pages come into the cache")

	// The rest, a quarter window at a time, each time waiting for the
	// adviser: the advice stays half a window ahead of the reads, up to the
	// log's end. NB: a reader that outruns the adviser reads the pages
	// itself, and the advice it passed is dropped with its stream at the
	// log's end.
	for p := 3 * k; p < end; {
		q := min(end, p+window/4)
		read(p, q)
		p = q
		require.Eventually(t, func() bool {
			got := rec.ranges()
			return got[len(got)-1][1] >= min(end, p+window/2)
		}, 10*time.Second, 5*time.Millisecond, "the advice half a window past %d: %v", p, rec.ranges())
	}
	got := rec.ranges()
	assert.Equal(t, 2*k, got[0][0], "advised from the end of the second read")
	for i := 1; i < len(got); i++ {
		require.Equal(t, got[i-1][1], got[i][0], "each byte advised once, in order: %v", got)
	}
	requireRecords(t, l, ws)
}
