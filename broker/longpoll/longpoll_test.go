package longpoll

import (
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

type result struct {
	name    string
	expired bool
}

func park(h *Hold, out chan<- result, name, topic string, qid int32, off int64, d time.Duration, current func() int64) {
	h.Park(&Request{Topic: topic, QueueID: qid, Offset: off, Deadline: time.Now().Add(d),
		Wake: func(expired bool) { out <- result{name, expired} }}, current)
}

func TestHold_WakeOnArrival(t *testing.T) {
	h := New()
	defer h.Close()
	out := make(chan result, 10)
	park(h, out, "a", "t", 0, 5, time.Minute, nil)
	park(h, out, "b", "t", 0, 7, time.Minute, nil)
	park(h, out, "c", "t", 1, 5, time.Minute, nil)
	require.Equal(t, int64(3), h.Parked())
	h.Notify("t", 0, 6, 0, nil) // wakes a (offset 5 < 6), not b
	require.Equal(t, result{"a", false}, <-out)
	h.Notify("t", 0, 6, 0, nil)
	h.Notify("x", 0, 100, 0, nil)
	select {
	case r := <-out:
		t.Fatalf("unexpected wake %v", r)
	case <-time.After(50 * time.Millisecond):
	}
	h.Notify("t", 0, 8, 0, nil)
	require.Equal(t, result{"b", false}, <-out)
	require.Equal(t, int64(1), h.Parked())
}

func TestHold_Expiry(t *testing.T) {
	h := New()
	defer h.Close()
	out := make(chan result, 10)
	// NB: far apart, so that a delayed expiry loop cannot find both due at once.
	park(h, out, "late", "t", 0, 0, time.Second, nil)
	park(h, out, "soon", "t", 0, 0, 20*time.Millisecond, nil)
	require.Equal(t, result{"soon", true}, <-out, "the earliest deadline goes first")
	require.Equal(t, result{"late", true}, <-out)
	h.Notify("t", 0, 10, 0, nil)
	select {
	case r := <-out:
		t.Fatalf("woken twice: %v", r)
	case <-time.After(20 * time.Millisecond):
	}
}

func TestHold_ParkSeesArrivalInBetween(t *testing.T) {
	h := New()
	defer h.Close()
	out := make(chan result, 1)
	park(h, out, "a", "t", 0, 3, time.Minute, func() int64 { return 4 })
	require.Equal(t, result{"a", false}, <-out)
}

func TestHold_CloseAnswersEveryone(t *testing.T) {
	h := New()
	out := make(chan result, 10)
	for i := range 5 {
		park(h, out, string(rune('a'+i)), "t", int32(i), 0, time.Hour, nil)
	}
	h.Close()
	for range 5 {
		require.True(t, (<-out).expired)
	}
	park(h, out, "after", "t", 0, 0, time.Hour, nil)
	require.Equal(t, result{"after", true}, <-out)
	h.Close()
}

func TestHold_Concurrent(t *testing.T) {
	h := New()
	defer h.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	woken := 0
	for i := range 200 {
		wg.Add(1)
		h.Park(&Request{Topic: "t", QueueID: int32(i % 4), Offset: 0, Deadline: time.Now().Add(time.Duration(i%3) * time.Millisecond),
			Wake: func(bool) { mu.Lock(); woken++; mu.Unlock(); wg.Done() }}, nil)
		if i%7 == 0 {
			go h.Notify("t", int32(i%4), 1, 0, nil)
		}
	}
	for q := range int32(4) {
		h.Notify("t", q, 1, 0, nil)
	}
	wg.Wait()
	require.Equal(t, 200, woken, "each request is woken exactly once")
}

// TestHold_WakeOnlyForMatch: a request with a Match stays parked through
// arrivals it refuses and wakes for the first it takes.
func TestHold_WakeOnlyForMatch(t *testing.T) {
	h := New()
	defer h.Close()
	out := make(chan result, 2)
	var seen []string
	h.Park(&Request{Topic: "t", QueueID: 0, Offset: 5, Deadline: time.Now().Add(time.Hour),
		Match: func(code int64, props []byte) bool {
			seen = append(seen, string(props)) // NB: called under the hold's lock, from Notify's goroutine
			return code == 7
		},
		Wake: func(expired bool) { out <- result{"a", expired} }}, nil)
	h.Notify("t", 0, 6, 1, []byte("no"))
	h.Notify("t", 0, 7, 2, []byte("no either"))
	require.Equal(t, int64(1), h.Parked(), "arrivals that do not match leave the pull parked")
	h.Notify("t", 0, 8, 7, []byte("yes"))
	require.Equal(t, result{"a", false}, <-out)
	require.Equal(t, []string{"no", "no either", "yes"}, seen)
	require.Zero(t, h.Parked())

	// An arrival between the pull's read and its park is unknown: it wakes
	// the request whatever its Match.
	h.Park(&Request{Topic: "t", QueueID: 0, Offset: 8, Deadline: time.Now().Add(time.Hour),
		Match: func(int64, []byte) bool { return false },
		Wake:  func(expired bool) { out <- result{"b", expired} }}, func() int64 { return 9 })
	require.Equal(t, result{"b", false}, <-out)
}
