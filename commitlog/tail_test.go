package commitlog

import (
	"bytes"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTail_ReadersFollowingAppends: readers that follow the end of the log
// while it grows past the tail's blocks many times over (and across
// segments, and with an append larger than a block) get the bytes that
// were appended, from ReadAt and from a scanner; most of them come from
// the tail, and older ones from the file.
func TestTail_ReadersFollowingAppends(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testOptions(3<<20))
	defer l.Close()
	var mu sync.Mutex
	var ws []want
	stop := make(chan struct{})
	var fromTail, checked atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() { // ReadAt of the newest record, and of an older one
		r := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			if len(ws) == 0 {
				mu.Unlock()
				continue
			}
			w := ws[len(ws)-1]
			old := ws[r.IntN(len(ws))]
			mu.Unlock()
			for _, w := range []want{w, old} {
				p := make([]byte, w.size)
				if n := l.tail.read(p, w.at, w.size); n == w.size {
					fromTail.Add(1)
					if !bytes.Equal(p, w.bytes()) {
						t.Errorf("tail: record at %d differs", w.at)
						return
					}
				}
				clear(p)
				n, err := l.ReadAt(p, w.at)
				if err != nil || n != w.size || !bytes.Equal(p, w.bytes()) {
					t.Errorf("ReadAt %d: %d bytes, %v, equal %v", w.at, n, err, bytes.Equal(p, w.bytes()))
					return
				}
				checked.Add(1)
			}
		}
	})
	wg.Go(func() { // a scanner following the end
		s := l.NewScanner(0, false)
		n := 0
		for {
			for s.Scan() {
				at, rec := s.Record()
				mu.Lock()
				w := ws[n]
				mu.Unlock()
				if w.at != at || !bytes.Equal(rec, w.bytes()) {
					t.Errorf("scanned record %d at %d differs from the one appended at %d", n, at, w.at)
					return
				}
				n++
			}
			if s.Err() != nil {
				t.Errorf("scan: %v", s.Err())
				return
			}
			select {
			case <-stop:
				if s.Pos() == l.Next() {
					return
				}
			default:
			}
		}
	})
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 6000 {
		size := testHeader + r.IntN(4000)
		if i == 3000 {
			size = tailBlockSize + 4096 // larger than a block: from the file
		}
		mu.Lock()
		// NB: under mu, so that readers never see a record before its want.
		at, err := l.Append(size, fillTest(uint64(i)))
		require.NoError(t, err)
		ws = append(ws, want{at: at, size: size, seed: uint64(i)})
		mu.Unlock()
	}
	close(stop)
	wg.Wait()
	require.Greater(t, l.Next(), Offset(3*tailBlocks*tailBlockSize), "the tail was reused several times")
	require.Positive(t, fromTail.Load(), "some reads came from the tail")
	t.Logf("%d reads checked, %d served by the tail", checked.Load(), fromTail.Load())
}

// TestTail_Reset: a replica's raw appends empty the tail, so that it never
// answers for bytes it did not see written.
func TestTail_Reset(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testOptions(1<<20))
	defer l.Close()
	w := appendOne(t, l, 500, 7)
	p := make([]byte, w.size)
	require.Equal(t, w.size, l.tail.read(p, w.at, w.size))
	require.Equal(t, w.bytes(), p)
	l.tail.reset()
	require.Zero(t, l.tail.read(p, w.at, 1))
	n, err := l.ReadAt(p, w.at) // from the file
	require.NoError(t, err)
	require.Equal(t, w.size, n)
	require.Equal(t, w.bytes(), p)
}
