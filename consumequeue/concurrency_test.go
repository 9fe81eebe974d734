package consumequeue

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestQueue_ConcurrentReaders runs one writer, readers, a syncer and
// retention at once (meant for -race): every entry a reader gets must be
// the one put at that offset, and never beyond Next().
func TestQueue_ConcurrentReaders(t *testing.T) {
	const n = 6000
	s := openTest(t, t.TempDir(), 16, 8)
	q := mustQueue(t, s, "T", 0)
	var done atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	report := func(err error) {
		select {
		case errc <- err:
		default:
		}
	}

	for r := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			buf := make([]Entry, 0, 1+r*11)
			for !done.Load() {
				next := q.Next()
				from := next - rng.Int64N(100) - 1
				if r == 0 {
					from = rng.Int64N(next + 1) // anywhere, including below Min
				}
				got, err := q.Read(max(from, 0), buf)
				if errors.Is(err, ErrOffsetBelowMin) {
					continue
				}
				if err != nil {
					report(err)
					return
				}
				for i, e := range got {
					if want := testEntry(max(from, 0) + int64(i)); e != want {
						report(fmt.Errorf("offset %d: got %+v want %+v", max(from, 0)+int64(i), e, want))
						return
					}
				}
				if len(got) > 0 && max(from, 0)+int64(len(got)) > q.Next() {
					report(fmt.Errorf("read beyond Next"))
					return
				}
			}
		})
	}
	wg.Go(func() {
		for !done.Load() {
			if err := s.Sync(); err != nil {
				report(err)
				return
			}
		}
	})
	wg.Go(func() {
		for !done.Load() {
			next := q.Next()
			if next < 500 {
				continue
			}
			if _, err := s.DeleteBelowPos(testEntry(next - 400).End()); err != nil {
				report(err)
				return
			}
		}
	})

	for i := range int64(n) {
		if err := q.Put(i, testEntry(i)); err != nil {
			report(err)
			break
		}
		if i%97 == 0 { // re-dispatch now and then
			if err := q.Put(i/2, testEntry(i/2)); err != nil {
				report(err)
				break
			}
		}
	}
	done.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		require.NoError(t, err)
	}
	require.Equal(t, int64(n), q.Next())
	requireEntries(t, q, q.Min(), n)
}

// TestStore_ManyQueues puts a few entries into each of 10,000 queues, then
// checks every queue after a reopen. Each written queue keeps one file
// descriptor until Sync finds it idle twice.
func TestStore_ManyQueues(t *testing.T) {
	const topics, perTopic = 100, 100
	if testing.Short() {
		t.Skip("10,000 queues")
	}
	dir := t.TempDir()
	s := openTest(t, dir, 4, 4)
	for i := range topics * perTopic {
		q := mustQueue(t, s, fmt.Sprintf("T%d", i/perTopic), int32(i%perTopic))
		putRange(t, q, 0, int64(1+i%6))
	}
	require.NoError(t, s.Sync())
	require.NoError(t, s.Sync())
	require.NoError(t, s.Sync()) // idle: every active file is closed now
	q := s.Lookup("T0", 5)
	require.Nil(t, q.segs[len(q.segs)-1].w)
	require.NoError(t, s.Close())

	s2 := openTest(t, dir, 4, 4)
	count := 0
	s2.Queues(func(topic string, id int32, q *Queue) bool {
		var ti int
		_, err := fmt.Sscanf(topic, "T%d", &ti)
		require.NoError(t, err)
		i := ti*perTopic + int(id)
		require.Equal(t, int64(1+i%6), q.Next(), "%s/%d", topic, id)
		count++
		return true
	})
	require.Equal(t, topics*perTopic, count)
	requireEntries(t, s2.Lookup("T42", 17), 0, int64(1+(42*perTopic+17)%6))
}
