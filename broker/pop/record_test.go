package pop

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// memJournal keeps a table's records in memory, their positions from 0.
type memJournal struct{ recs [][]byte }

func (j *memJournal) Append(rec []byte) (int64, Wait) {
	j.recs = append(j.recs, slices.Clone(rec))
	return int64(len(j.recs)), func() error { return nil }
}

// state is a table's state in a form require.Equal compares (no nil/empty
// map differences).
func state(tb *Table) map[string]string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	out := map[string]string{}
	for k, q := range tb.queues {
		var f []string
		for off, e := range q.inflight {
			f = append(f, fmt.Sprintf("%d:%d/%d/%d/%q", off, e.visibleAt, e.attempt, e.nonce, e.group))
		}
		slices.Sort(f)
		var b []string
		for g, off := range q.busy {
			b = append(b, fmt.Sprintf("%q=%d", g, off))
		}
		slices.Sort(b)
		var w []string
		for g, offs := range q.waiting {
			w = append(w, fmt.Sprintf("%q=%v", g, offs))
		}
		slices.Sort(w)
		out[fmt.Sprintf("%s/%s/%d", k.group, k.topic, k.queue)] = fmt.Sprintf("next %d nw %d in %v busy %v wait %v", q.next, q.nWaiting, f, b, w)
	}
	return out
}

// replay applies j's records from position from to tb.
func replay(t *testing.T, tb *Table, j *memJournal, from int) {
	t.Helper()
	for i := from; i < len(j.recs); i++ {
		r, err := DecodeRecord(j.recs[i])
		require.NoError(t, err)
		tb.Apply(int64(i), &r)
	}
}

// randomOps drives tb (journaled) through pops (FIFO and not), acks,
// changes, resets and group deletions on a clock it steps.
func randomOps(t *testing.T, tb *Table, rng *rand.Rand, n int) {
	gs := []string{"", "a", "b", "c"}
	groupOf := func(off int64) (string, bool) { return gs[off%int64(len(gs))], true }
	now := time.Unix(1_800_000_000, 0)
	var handles []Handle
	for range n {
		now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
		grp := []string{"g1", "g2"}[rng.IntN(2)]
		q := int32(rng.IntN(2))
		switch op := rng.IntN(20); {
		case op < 6:
			for _, d := range tb.PopOrderly("b", grp, "T", q, 0, int64(20+rng.IntN(200)), 1+rng.IntN(8), 5*time.Second, now, groupOf) {
				handles = append(handles, d.Handle)
			}
		case op < 8:
			for _, d := range tb.Pop("b", grp, "T", q, 0, int64(20+rng.IntN(200)), 1+rng.IntN(8), 5*time.Second, now) {
				handles = append(handles, d.Handle)
			}
		case op < 15 && len(handles) > 0:
			i := rng.IntN(len(handles))
			_ = tb.Ack(grp, handles[i], now)
			handles = slices.Delete(handles, i, i+1)
		case op < 17 && len(handles) > 0:
			i := rng.IntN(len(handles))
			if nh, err := tb.Change(grp, handles[i], time.Duration(rng.IntN(8))*time.Second, now); err == nil {
				handles[i] = nh
			}
		case op == 17:
			tb.Reset(grp, "T", q, int64(rng.IntN(100)))
		case op == 18 && rng.IntN(10) == 0:
			tb.DeleteGroup(grp)
		}
	}
}

// TestRecord_ReplicaFollows: a table that applies a journaled table's
// records, in order, has its state after every change: in flight (offset,
// visible time, attempt, nonce, message group), acked, FIFO busy and
// waiting offsets, next offsets; applying a record again (a replay from
// an older position) changes nothing.
func TestRecord_ReplicaFollows(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 42))
		j := &memJournal{}
		master := New()
		master.SetJournal(j)
		replica := New()
		for round := range 10 {
			randomOps(t, master, rng, 40)
			replay(t, replica, j, int(replica.Pos()))
			require.Equal(t, state(master), state(replica), "seed %d round %d", seed, round)
			require.Equal(t, master.Pos(), replica.Pos())
			require.Equal(t, master.nonce, replica.nonce)
		}
		replay(t, replica, j, 0) // NB: all again: each skipped
		require.Equal(t, state(master), state(replica), "seed %d: replayed from 0", seed)
	}
}

// TestRecord_RestartReplays: a journaled table's saved state names the
// position it covers; reopened from an older save (a kill -9 after the
// last save) and replayed from there, it has every change made after the
// save: an ack after it stays acked.
func TestRecord_RestartReplays(t *testing.T) {
	path := t.TempDir() + "/pop"
	now := time.Unix(1_800_000_000, 0)
	j := &memJournal{}
	tb, err := Open(path, nil)
	require.NoError(t, err)
	tb.SetJournal(j)
	d := tb.Pop("b", "g", "T", 0, 0, 4, 10, time.Minute, now)
	require.Len(t, d, 4)
	require.NoError(t, tb.Persist())
	require.Equal(t, int64(1), tb.Pos())
	// After the save: an ack, a change, and a FIFO pop.
	require.NoError(t, tb.Ack("g", d[0].Handle, now))
	_, err = tb.Change("g", d[1].Handle, time.Hour, now)
	require.NoError(t, err)
	tb.PopOrderly("b", "f", "T", 1, 0, 3, 10, time.Minute, now, groupsOf("x", "x", "y"))
	want := state(tb)
	tb.p.dirty = false // NB: a kill -9: the last changes never saved
	require.NoError(t, tb.Close())

	again, err := Open(path, nil)
	require.NoError(t, err)
	defer again.Close()
	require.Equal(t, int64(1), again.Pos())
	require.NotEqual(t, want, state(again), "the save predates the ack")
	replay(t, again, j, int(again.Pos()))
	require.Equal(t, want, state(again))
	require.ErrorIs(t, again.Ack("g", d[0].Handle, now), ErrInvalidHandle, "acked before the crash")
	got := again.Pop("b", "g", "T", 0, 0, 4, 10, time.Minute, now.Add(2*time.Minute))
	require.Equal(t, map[int64]int32{2: 2, 3: 2}, offsets(got), "0 acked, 1 invisible for an hour")
}

func TestRecord_EncodeDecode(t *testing.T) {
	r := Record{Op: OpPop, Group: "g", Topic: "T", Queue: 3, Next: 9, Release: true, Nonce: 7,
		Set:  []recordEntry{{Offset: 5, VisibleAt: 1e12, Attempt: 2, Nonce: 7, Group: "x", Busy: true}},
		Wait: []waitingSnap{{Group: "x", Offsets: []int64{6, 8}}}}
	got, err := DecodeRecord(r.Encode())
	require.NoError(t, err)
	require.Equal(t, r, got)
	for name, bad := range map[string]Record{
		"version":  {Version: 2, Op: OpAck},
		"op":       {Op: 9},
		"queue":    {Op: OpAck, Queue: -1},
		"offset":   {Op: OpAck, Offset: -2},
		"set":      {Op: OpPop, Set: []recordEntry{{Offset: -1}}},
		"waiting":  {Op: OpPop, Wait: []waitingSnap{{Group: "x", Offsets: []int64{-1}}}},
		"too many": {Op: OpPop, Wait: []waitingSnap{{Group: "x", Offsets: make([]int64, maxRecordItems+1)}}},
	} {
		b, err := msgpackMarshal(bad, name != "version")
		require.NoError(t, err)
		_, err = DecodeRecord(b)
		require.ErrorIs(t, err, ErrRecord, name)
	}
	for _, b := range [][]byte{nil, {0xc1}, []byte("not msgpack"), {0x81, 0xa3, 'v', 'e', 'r'}} {
		_, err := DecodeRecord(b)
		require.ErrorIs(t, err, ErrRecord, "%x", b)
	}
}

// msgpackMarshal encodes r, keeping its version unless asked to set it.
func msgpackMarshal(r Record, setVersion bool) ([]byte, error) {
	if setVersion {
		return r.Encode(), nil
	}
	r.Version = 2
	return msgpack.Marshal(&r)
}

// FuzzDecodeRecord: any bytes decode to a record or ErrRecord, never a
// panic; a decoded record re-encodes to one that decodes the same and
// applies to a table without a panic.
func FuzzDecodeRecord(f *testing.F) {
	f.Add((&Record{Op: OpAck, Group: "g", Topic: "T", Offset: 3}).Encode())
	f.Add((&Record{Op: OpPop, Group: "g", Topic: "T", Next: 4, Set: []recordEntry{{Offset: 3, Group: "x", Busy: true}},
		Wait: []waitingSnap{{Group: "x", Offsets: []int64{4}}}}).Encode())
	f.Add((&Record{Op: OpDelete, Group: "g"}).Encode())
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			require.True(t, errors.Is(err, ErrRecord))
			return
		}
		again, err := DecodeRecord(r.Encode())
		require.NoError(t, err)
		require.Equal(t, r, again)
		tb := New()
		tb.Apply(0, &r)
		tb.Apply(1, &r)
		tb.Pop("b", r.Group, r.Topic, r.Queue, 0, r.Next+2, 4, time.Second, time.Unix(1_800_000_000, 0))
	})
}

// refusingJournal stores nothing (a log that refuses puts).
type refusingJournal struct{}

func (j refusingJournal) Append([]byte) (int64, Wait) {
	return 0, func() error { return errors.New("refused") }
}

// TestRecord_Diverged: a change whose record the journal did not store
// marks the table diverged (saved with it); Clear forgets the state and
// the mark, keeping the nonce (no old handle is current again).
func TestRecord_Diverged(t *testing.T) {
	path := t.TempDir() + "/pop"
	now := time.Unix(1_800_000_000, 0)
	j := &memJournal{}
	tb, err := Open(path, nil)
	require.NoError(t, err)
	tb.SetJournal(j)
	d := tb.Pop("b", "g", "T", 0, 0, 2, 10, time.Minute, now)
	require.False(t, tb.Diverged())
	tb.SetJournal(refusingJournal{})
	_, w, err := tb.AckDurable("g", d[0].Handle, now)
	require.NoError(t, err, "the ack holds here")
	require.Error(t, w(), "its record was not stored")
	require.True(t, tb.Diverged())
	require.Equal(t, int64(1), tb.Pos(), "no record past the pop's")
	require.NoError(t, tb.Close())

	tb, err = Open(path, nil)
	require.NoError(t, err)
	defer tb.Close()
	require.True(t, tb.Diverged(), "saved")
	tb.Clear()
	require.False(t, tb.Diverged())
	require.Equal(t, int64(0), tb.Pos())
	require.Empty(t, state(tb))
	replay(t, tb, j, 0)
	require.NoError(t, tb.Ack("g", d[1].Handle, now), "rebuilt from the log: the pop's offsets in flight")
	require.NoError(t, tb.Ack("g", d[0].Handle, now), "the ack the log never had is not in the rebuilt state")
}

// TestRecord_EncodeIsMarshal: what Encode writes decodes (msgpack's
// struct decoding) to the record, as msgpack.Marshal's bytes do, and is
// no longer (its integers compact), for random records.
func TestRecord_EncodeIsMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	n := func() int64 { return []int64{0, 1, -1, 127, 128, 1 << 20, 1 << 40, -1 << 40}[rng.IntN(8)] }
	for range 2000 {
		r := Record{Version: RecordVersion, Op: rng.IntN(7), Group: []string{"", "g"}[rng.IntN(2)], Topic: []string{"", "T"}[rng.IntN(2)],
			Queue: int32(n()), Next: n(), Release: rng.IntN(2) == 0, Offset: n(), Nonce: uint64(n()), VisibleAt: n()}
		for range rng.IntN(3) {
			r.Set = append(r.Set, recordEntry{Offset: n(), VisibleAt: n(), Attempt: int32(n()), Nonce: uint64(n()),
				Group: []string{"", "x"}[rng.IntN(2)], Busy: rng.IntN(2) == 0})
		}
		for range rng.IntN(3) {
			w := waitingSnap{Group: []string{"", "y"}[rng.IntN(2)]}
			for range rng.IntN(3) {
				w.Offsets = append(w.Offsets, n())
			}
			r.Wait = append(r.Wait, w)
		}
		want, err := msgpack.Marshal(&r)
		require.NoError(t, err)
		got := r.Encode()
		require.LessOrEqual(t, len(got), len(want))
		var back, wantBack Record
		require.NoError(t, msgpack.Unmarshal(got, &back))
		require.NoError(t, msgpack.Unmarshal(want, &wantBack))
		require.Equal(t, wantBack, back, "%+v", r)
	}
}
