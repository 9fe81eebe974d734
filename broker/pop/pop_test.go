package pop

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/statefile"
)

func TestHandle_RoundTrip(t *testing.T) {
	h := Handle{Broker: "broker-a", Topic: "T", Queue: 3, Offset: 1 << 40, Nonce: 99, VisibleAt: 1_800_000_000_000}
	got, err := DecodeHandle(h.Encode())
	require.NoError(t, err)
	require.Equal(t, h, got)
	for _, bad := range []string{"", "1", "2abc", "1!!!", h.Encode()[:len(h.Encode())-2], h.Encode() + "AA"} {
		_, err := DecodeHandle(bad)
		require.ErrorIs(t, err, ErrInvalidHandle, "%q", bad)
	}
}

func FuzzDecodeHandle(f *testing.F) {
	f.Add(Handle{Broker: "b", Topic: "T", Queue: 1, Offset: 5, Nonce: 7, VisibleAt: 9}.Encode())
	f.Add("1AAAA")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := DecodeHandle(s)
		if err != nil {
			require.True(t, errors.Is(err, ErrInvalidHandle))
			return
		}
		again, err := DecodeHandle(h.Encode())
		require.NoError(t, err)
		require.Equal(t, h, again)
	})
}

// TestTable_PopAckRedeliver: new offsets are delivered once; one not acked
// in time is delivered again with attempt 2 and its old handle is invalid;
// an acked one is not delivered again; a change returns a new handle and
// keeps the old one valid when it fails; the committed offset is the
// lowest not acked.
func TestTable_PopAckRedeliver(t *testing.T) {
	tb := New()
	now := time.Unix(1_800_000_000, 0)
	d := tb.Pop("b", "g", "T", 0, 0, 3, 10, 10*time.Second, now)
	require.Len(t, d, 3)
	for i, x := range d {
		require.Equal(t, int64(i), x.Offset)
		require.Equal(t, int32(1), x.Attempt)
	}
	require.Empty(t, tb.Pop("b", "g", "T", 0, 0, 3, 10, 10*time.Second, now), "all in flight")
	require.NoError(t, tb.Ack("g", d[1].Handle, now))
	require.ErrorIs(t, tb.Ack("g", d[1].Handle, now), ErrInvalidHandle, "acked twice")
	off, ok := tb.Committed("g", "T", 0)
	require.True(t, ok)
	require.Equal(t, int64(0), off)

	nh, err := tb.Change("g", d[2].Handle, time.Minute, now)
	require.NoError(t, err)
	require.NotEqual(t, d[2].Handle, nh)
	require.ErrorIs(t, tb.Ack("g", d[2].Handle, now), ErrInvalidHandle, "the old handle after a change")

	later := now.Add(11 * time.Second)
	again := tb.Pop("b", "g", "T", 0, 0, 3, 10, 10*time.Second, later)
	require.Len(t, again, 1, "offset 0 only: 1 is acked, 2 invisible for a minute")
	require.Equal(t, int64(0), again[0].Offset)
	require.Equal(t, int32(2), again[0].Attempt)
	require.ErrorIs(t, tb.Ack("g", d[0].Handle, later), ErrInvalidHandle, "delivered again: the first handle is stale")
	require.NoError(t, tb.Ack("g", again[0].Handle, later))
	require.NoError(t, tb.Ack("g", nh, later))
	off, _ = tb.Committed("g", "T", 0)
	require.Equal(t, int64(3), off)

	// Another group is independent.
	require.Len(t, tb.Pop("b", "g2", "T", 0, 0, 3, 10, 10*time.Second, now), 3)
	// An expired handle: invalid, and a failed change keeps it as it was.
	e := tb.Pop("b", "g3", "T", 0, 0, 1, 10, 10*time.Second, now)
	h, err := tb.Change("g3", e[0].Handle, time.Minute, now.Add(time.Hour))
	require.ErrorIs(t, err, ErrInvalidHandle)
	require.Equal(t, e[0].Handle, h)
}

// TestOpen_SurvivesRestart: a reopened table keeps what was in flight
// (its handles valid), what was acked (not delivered again) and where new
// offsets start.
func TestOpen_SurvivesRestart(t *testing.T) {
	path := t.TempDir() + "/pop"
	now := time.Unix(1_800_000_000, 0)
	tb, err := Open(path, nil)
	require.NoError(t, err)
	d := tb.Pop("b", "g", "T", 0, 0, 3, 10, time.Minute, now)
	require.Len(t, d, 3)
	require.NoError(t, tb.Ack("g", d[0].Handle, now))
	require.NoError(t, tb.Close())
	require.NoError(t, tb.Close(), "idempotent")

	tb, err = Open(path, nil)
	require.NoError(t, err)
	defer tb.Close()
	require.NoError(t, tb.Ack("g", d[1].Handle, now), "a handle from before the restart")
	require.ErrorIs(t, tb.Ack("g", d[0].Handle, now), ErrInvalidHandle, "acked before the restart")
	later := now.Add(2 * time.Minute)
	again := tb.Pop("b", "g", "T", 0, 0, 4, 10, time.Minute, later)
	require.Len(t, again, 2, "offset 2 again and the new offset 3")
	got := map[int64]int32{}
	for _, x := range again {
		got[x.Offset] = x.Attempt
	}
	require.Equal(t, map[int64]int32{2: 2, 3: 1}, got)
}

func TestTable_InflightBound(t *testing.T) {
	tb := New()
	now := time.Unix(1_800_000_000, 0)
	got := 0
	for range 3 {
		got += len(tb.Pop("b", "g", "T", 0, 0, 1<<20, MaxInflight, time.Minute, now))
	}
	require.Equal(t, MaxInflight, got, "no new offsets past the bound")
}

// groupsOf is a queue's message groups by offset, as PopOrderly asks.
func groupsOf(gs ...string) func(int64) (string, bool) {
	return func(off int64) (string, bool) {
		if off < 0 || off >= int64(len(gs)) {
			return "", false
		}
		return gs[off], true
	}
}

func offsets(ds []Delivery) map[int64]int32 {
	m := map[int64]int32{}
	for _, d := range ds {
		m[d.Offset] = d.Attempt
	}
	return m
}

// TestTable_FIFOPerMessageGroup: in an orderly pop a message group's next
// offset waits until the one before it is acked, also across a
// redelivery after the invisible time; other groups of the queue, and
// messages with no group, are not held back; the committed offset stays
// at the lowest offset not acked, waiting ones included.
func TestTable_FIFOPerMessageGroup(t *testing.T) {
	tb := New()
	now := time.Unix(1_800_000_000, 0)
	gs := groupsOf("A", "B", "A", "", "B", "A", "")
	pop := func(at time.Time) map[int64]int32 {
		return offsets(tb.PopOrderly("b", "g", "T", 0, 0, 7, 10, 10*time.Second, at, gs))
	}
	first := tb.PopOrderly("b", "g", "T", 0, 0, 7, 10, 10*time.Second, now, gs)
	require.Equal(t, map[int64]int32{0: 1, 1: 1, 3: 1, 6: 1}, offsets(first), "the head of A and B, and those with no group")
	require.Empty(t, pop(now), "2, 4 and 5 wait behind 0 and 1")

	byOff := map[int64]Handle{}
	for _, d := range first {
		byOff[d.Offset] = d.Handle
	}
	released, err := tb.AckNext("g", byOff[1], now)
	require.NoError(t, err)
	require.True(t, released, "B's next can go")
	released, err = tb.AckNext("g", byOff[3], now)
	require.NoError(t, err)
	require.False(t, released, "no group: nothing waits for it")
	got := tb.PopOrderly("b", "g", "T", 0, 0, 7, 10, 10*time.Second, now, gs)
	require.Equal(t, map[int64]int32{4: 1}, offsets(got), "B flows while A's head is not acked")
	off, _ := tb.Committed("g", "T", 0)
	require.Equal(t, int64(0), off)

	// A's head is not acked in time: it comes again, 2 still waits.
	later := now.Add(11 * time.Second)
	again := tb.PopOrderly("b", "g", "T", 0, 0, 7, 10, 10*time.Second, later, gs)
	require.Equal(t, map[int64]int32{0: 2, 4: 2, 6: 2}, offsets(again), "redelivered in place; 2 and 5 still wait")
	for _, d := range again {
		byOff[d.Offset] = d.Handle
	}
	require.NoError(t, tb.Ack("g", byOff[0], later))
	next := tb.PopOrderly("b", "g", "T", 0, 0, 7, 10, 10*time.Second, later, gs)
	require.Len(t, next, 1)
	require.Equal(t, int64(2), next[0].Offset, "A's next, once its head is acked")
	require.Equal(t, int32(1), next[0].Attempt)
	require.Empty(t, pop(later), "5 waits behind 2")
	off, _ = tb.Committed("g", "T", 0)
	require.Equal(t, int64(2), off)
	require.NoError(t, tb.Ack("g", next[0].Handle, later))
	last := tb.PopOrderly("b", "g", "T", 0, 0, 7, 10, 10*time.Second, later, gs)
	require.Equal(t, map[int64]int32{5: 1}, offsets(last))
}

// TestTable_FIFOUnknownGroupStops: an offset whose group the caller cannot
// tell yet is not taken (nor any after it).
func TestTable_FIFOUnknownGroupStops(t *testing.T) {
	tb := New()
	now := time.Unix(1_800_000_000, 0)
	d := tb.PopOrderly("b", "g", "T", 0, 0, 10, 10, time.Minute, now, groupsOf("A", "B"))
	require.Equal(t, map[int64]int32{0: 1, 1: 1}, offsets(d))
	next := func(group string, start int64) int64 {
		n, room := tb.Next(group, "T", 0, start)
		require.True(t, room)
		return n
	}
	require.Equal(t, int64(2), next("g", 0))
	require.Equal(t, int64(5), next("g", 5), "a start past it")
	require.Equal(t, int64(3), next("other", 3), "a group new to the queue")
}

// TestTable_FIFOBound: offsets waiting count against MaxInflight, so a
// message group whose head is never acked holds the queue's new offsets
// back once the bound is reached (not the state's size); an ack lets the
// next through.
func TestTable_FIFOBound(t *testing.T) {
	tb := New()
	now := time.Unix(1_800_000_000, 0)
	allA := func(off int64) (string, bool) {
		if off >= MaxInflight+10 {
			return "B", true
		}
		return "A", true
	}
	d := tb.PopOrderly("b", "g", "T", 0, 0, 1<<20, 1, time.Minute, now, allA)
	require.Len(t, d, 1)
	require.Empty(t, tb.PopOrderly("b", "g", "T", 0, 0, 1<<20, 1, time.Minute, now, allA))
	next, room := tb.Next("g", "T", 0, 0)
	require.Equal(t, int64(MaxInflight), next, "the bound, not the end, stopped the walk")
	require.False(t, room)
	require.NoError(t, tb.Ack("g", d[0].Handle, now))
	d = tb.PopOrderly("b", "g", "T", 0, 0, 1<<20, 1, time.Minute, now, allA)
	require.Equal(t, map[int64]int32{1: 1}, offsets(d))
}

// TestTable_FIFONoLongerOrderly: a plain pop (the group is no longer
// orderly) delivers the offsets that were waiting.
func TestTable_FIFONoLongerOrderly(t *testing.T) {
	tb := New()
	now := time.Unix(1_800_000_000, 0)
	require.Len(t, tb.PopOrderly("b", "g", "T", 0, 0, 3, 10, time.Minute, now, groupsOf("A", "A", "A")), 1)
	d := tb.Pop("b", "g", "T", 0, 0, 3, 10, time.Minute, now)
	require.Equal(t, map[int64]int32{1: 1, 2: 1}, offsets(d))
}

// TestOpen_FIFOSurvivesRestart: the waiting offsets and each in-flight
// offset's message group are saved: after a restart the group still
// waits for its head, and its ack releases the next.
func TestOpen_FIFOSurvivesRestart(t *testing.T) {
	path := t.TempDir() + "/pop"
	now := time.Unix(1_800_000_000, 0)
	gs := groupsOf("A", "A", "B", "A")
	tb, err := Open(path, nil)
	require.NoError(t, err)
	d := tb.PopOrderly("b", "g", "T", 0, 0, 4, 10, time.Minute, now, gs)
	require.Equal(t, map[int64]int32{0: 1, 2: 1}, offsets(d))
	require.NoError(t, tb.Close())

	tb, err = Open(path, nil)
	require.NoError(t, err)
	defer tb.Close()
	require.Empty(t, tb.PopOrderly("b", "g", "T", 0, 0, 4, 10, time.Minute, now, gs), "1 and 3 still wait")
	off, _ := tb.Committed("g", "T", 0)
	require.Equal(t, int64(0), off)
	require.NoError(t, tb.Ack("g", d[0].Handle, now))
	require.Equal(t, map[int64]int32{1: 1}, offsets(tb.PopOrderly("b", "g", "T", 0, 0, 4, 10, time.Minute, now, gs)))
}

// TestOpen_LoadsVersion1: a state file saved before FIFO (version 1) loads.
func TestOpen_LoadsVersion1(t *testing.T) {
	path := t.TempDir() + "/pop"
	type inflightV1 struct {
		Offset    int64  `msgpack:"o"`
		VisibleAt int64  `msgpack:"v"`
		Attempt   int32  `msgpack:"a"`
		Nonce     uint64 `msgpack:"n"`
	}
	type queueV1 struct {
		Group    string       `msgpack:"g"`
		Topic    string       `msgpack:"t"`
		Queue    int32        `msgpack:"q"`
		Next     int64        `msgpack:"x"`
		Inflight []inflightV1 `msgpack:"f"`
	}
	type snapV1 struct {
		Version int       `msgpack:"ver"`
		Nonce   uint64    `msgpack:"nonce"`
		Queues  []queueV1 `msgpack:"queues"`
	}
	now := time.Unix(1_800_000_000, 0)
	vis := now.Add(time.Minute).UnixMilli()
	require.NoError(t, statefile.Save(path, snapV1{Version: 1, Nonce: 7, Queues: []queueV1{{Group: "g", Topic: "T", Queue: 0,
		Next: 5, Inflight: []inflightV1{{Offset: 3, VisibleAt: vis, Attempt: 1, Nonce: 7}}}}}))
	tb, err := Open(path, nil)
	require.NoError(t, err)
	defer tb.Close()
	require.NoError(t, tb.Ack("g", Handle{Broker: "b", Topic: "T", Queue: 0, Offset: 3, Nonce: 7, VisibleAt: vis}, now))
	off, _ := tb.Committed("g", "T", 0)
	require.Equal(t, int64(5), off)
	d := tb.PopOrderly("b", "g", "T", 0, 0, 6, 10, time.Minute, now, groupsOf("", "", "", "", "", "A"))
	require.Len(t, d, 1)
	require.Greater(t, d[0].Handle.Nonce, uint64(7), "nonces go on from the saved one")
}

// TestTable_FIFORandomized drives orderly pops, acks, expiries and
// restarts at random (a fixed seed) and checks: a message group's offset
// is delivered only once every lower offset of the group is acked; no
// offset is acked twice; and once the consumer acks everything, every
// offset has been acked (none skipped, none stuck waiting) and the
// committed offset is the end.
func TestTable_FIFORandomized(t *testing.T) {
	const n = 400
	rng := rand.New(rand.NewPCG(41, 6828))
	groups := make([]string, n)
	for i := range groups {
		groups[i] = []string{"A", "B", "C", "D", ""}[rng.IntN(5)]
	}
	path := t.TempDir() + "/pop"
	tb, err := Open(path, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, tb.Close()) }()
	now := time.Unix(1_800_000_000, 0)
	written := int64(0) // offsets stored so far; groupOf knows these
	groupOf := func(off int64) (string, bool) {
		if off >= written {
			return "", false
		}
		return groups[off], true
	}
	acked := map[int64]bool{}
	held := map[int64]Handle{} // delivered, current handle
	deliver := func(ds []Delivery) {
		for _, d := range ds {
			require.False(t, acked[d.Offset], "offset %d delivered after its ack", d.Offset)
			if g := groups[d.Offset]; g != "" {
				for o := range d.Offset {
					if groups[o] == g {
						require.True(t, acked[o], "offset %d of group %s delivered before %d was acked", d.Offset, g, o)
					}
				}
			}
			held[d.Offset] = d.Handle
		}
	}
	ack := func(off int64) {
		require.NoError(t, tb.Ack("g", held[off], now), "offset %d", off)
		require.False(t, acked[off])
		acked[off] = true
		delete(held, off)
	}
	for step := 0; step < 3000; step++ {
		switch r := rng.IntN(100); {
		case r < 10:
			written = min(n, written+int64(rng.IntN(20)))
		case r < 50:
			deliver(tb.PopOrderly("b", "g", "T", 0, 0, written, 1+rng.IntN(6), 10*time.Second, now, groupOf))
		case r < 80:
			for off := range held {
				if rng.IntN(2) == 0 {
					ack(off)
				}
				break
			}
		case r < 95:
			now = now.Add(time.Duration(rng.IntN(6)) * time.Second)
			for off, h := range held {
				if h.VisibleAt <= now.UnixMilli() {
					delete(held, off) // NB: expired: its handle is stale, it comes again
				}
			}
		default:
			require.NoError(t, tb.Close())
			tb, err = Open(path, nil)
			require.NoError(t, err)
		}
	}
	written = n
	for range 10 * n {
		if len(acked) == n {
			break
		}
		for off := range held {
			ack(off)
		}
		now = now.Add(11 * time.Second)
		clear(held)
		deliver(tb.PopOrderly("b", "g", "T", 0, 0, written, 32, 10*time.Second, now, groupOf))
	}
	require.Len(t, acked, n, "every offset acked: none skipped or stuck")
	off, _ := tb.Committed("g", "T", 0)
	require.Equal(t, int64(n), off)
}
