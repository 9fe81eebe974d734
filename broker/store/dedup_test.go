package store

import (
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/stretchr/testify/require"
)

// dedupClock is the window's clock in tests: real time plus a shift.
type dedupClock struct{ shift atomic.Int64 }

func (c *dedupClock) now() time.Time          { return time.Now().Add(time.Duration(c.shift.Load())) }
func (c *dedupClock) advance(d time.Duration) { c.shift.Add(int64(d)) }

func dedupOpts(window time.Duration, maxKeys int, clock *dedupClock) Options {
	o := testOpts()
	o.Dedup = DedupOptions{Window: window, MaxKeys: maxKeys}
	if clock != nil {
		o.Now = clock.now
	}
	return o
}

// send stores m as a producer's send (Dedup) and waits for the answer.
func send(t testing.TB, s *Store, m *message.Message) PutResult {
	t.Helper()
	r := s.putWait(t.Context(), PutRequest{Msg: m, Dedup: true})
	require.Equal(t, PutOK, r.Status, r.Remark)
	return r
}

func sendBatch(t testing.TB, s *Store, topic string, qid int32, keys ...string) PutResult {
	t.Helper()
	b := &Batch{Template: message.Message{Topic: topic, QueueID: qid, BornHost: bornHost}}
	for _, k := range keys {
		b.Items = append(b.Items, message.BatchItem{Body: []byte("b-" + k),
			Properties: string(message.AppendProperties(nil, map[string]string{message.PropUniqKey: k}))})
	}
	r := s.putWait(t.Context(), PutRequest{Batch: b, Dedup: true})
	require.Equal(t, PutOK, r.Status, r.Remark)
	return r
}

func keyed(topic string, qid int32, body, key string) *message.Message {
	return msg(topic, qid, body, message.PropUniqKey, key)
}

// queueBodies returns every message body of a queue, waiting for the
// dispatcher first.
func queueBodies(t testing.TB, s *Store, topic string, qid int32) []string {
	t.Helper()
	waitDispatched(t, s)
	return bodies(t, get(t, s, topic, qid, 0, 1000).Body)
}

func TestDedup_ResendAnsweredWithFirstIDs(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), dedupOpts(time.Minute, 0, nil))
	defer s.Close()
	first := send(t, s, keyed("t", 1, "a", "K1"))
	require.Zero(t, first.Duplicates)
	again := send(t, s, keyed("t", 2, "a-retry", "K1")) // NB: a retry may pick another queue
	require.Equal(t, 1, again.Duplicates)
	require.Equal(t, first.Pos, again.Pos)
	require.Equal(t, first.QueueOffset, again.QueueOffset)
	require.Equal(t, int32(1), again.QueueID, "the queue of the stored copy")
	// Another topic, another key, no key: stored.
	require.Zero(t, send(t, s, keyed("u", 1, "u", "K1")).Duplicates)
	require.Zero(t, send(t, s, keyed("t", 1, "b", "K2")).Duplicates)
	require.Zero(t, send(t, s, msg("t", 1, "c")).Duplicates)
	require.Zero(t, send(t, s, msg("t", 1, "c")).Duplicates)
	require.Equal(t, []string{"a", "b", "c", "c"}, queueBodies(t, s, "t", 1))
	require.Empty(t, queueBodies(t, s, "t", 2))
	st := s.DedupStatus()
	require.True(t, st.Enabled)
	require.Equal(t, int64(1), st.Hits)
	require.Equal(t, int64(3), st.Misses)
	require.Equal(t, int64(3), st.Keys)
	require.NotZero(t, st.Oldest)
}

// TestDedup_ConcurrentSendsOfOneKey: sends of one key racing from many
// goroutines (and several in one Submit) store one copy, and every answer
// names it.
func TestDedup_ConcurrentSendsOfOneKey(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), dedupOpts(time.Minute, 0, nil))
	defer s.Close()
	const senders, keys = 8, 50
	var mu sync.Mutex
	pos := map[string]map[int64]int{}
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			for k := range keys {
				key := "K" + string(rune('A'+k%26)) + string(rune('a'+k/26))
				reqs := make([]PutRequest, 2)
				res := make([]PutResult, 2)
				for i := range reqs {
					reqs[i] = PutRequest{Msg: keyed("t", int32(g%2), key, key), Dedup: true,
						Done: AnswerFunc(func(r PutResult) { res[i] = r })}
				}
				s.Submit(reqs) // NB: async flush: answered during Submit
				mu.Lock()
				for _, r := range res {
					require.Equal(t, PutOK, r.Status)
					if pos[key] == nil {
						pos[key] = map[int64]int{}
					}
					pos[key][r.Pos]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	stored := append(queueBodies(t, s, "t", 0), queueBodies(t, s, "t", 1)...)
	require.Len(t, stored, keys, "one copy per key")
	for key, byPos := range pos {
		require.Len(t, byPos, 1, "every answer of %s names one record", key)
	}
	st := s.DedupStatus()
	require.Equal(t, int64(keys), st.Misses)
	require.Equal(t, int64(senders*2*keys-keys), st.Hits)
}

func TestDedup_Batch(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), dedupOpts(time.Minute, 0, nil))
	defer s.Close()
	first := sendBatch(t, s, "t", 0, "B1", "B2", "B3")
	require.Zero(t, first.Duplicates)
	// All members repeated: nothing stored, the first ids.
	again := sendBatch(t, s, "t", 0, "B1", "B2", "B3")
	require.Equal(t, 3, again.Duplicates)
	require.Equal(t, first.Positions, again.Positions)
	require.Equal(t, first.QueueOffset, again.QueueOffset)
	// Some repeated, one new, one repeated within the batch.
	mixed := sendBatch(t, s, "t", 0, "B2", "B4", "B4", "B1")
	require.Equal(t, 3, mixed.Duplicates)
	require.Len(t, mixed.Positions, 4)
	require.Equal(t, first.Positions[1], mixed.Positions[0])
	require.Equal(t, mixed.Positions[1], mixed.Positions[2])
	require.Equal(t, first.Positions[0], mixed.Positions[3])
	require.Equal(t, first.QueueOffset+1, mixed.QueueOffset, "B2's queue offset")
	// A single send repeating a batch member, and a batch member repeating
	// a single send.
	one := send(t, s, keyed("t", 0, "x", "B4"))
	require.Equal(t, 1, one.Duplicates)
	require.Equal(t, mixed.Positions[1], one.Pos)
	single := send(t, s, keyed("t", 0, "s", "S1"))
	b := sendBatch(t, s, "t", 0, "S1", "B5")
	require.Equal(t, 1, b.Duplicates)
	require.Equal(t, single.Pos, b.Positions[0])
	require.Equal(t, []string{"b-B1", "b-B2", "b-B3", "b-B4", "s", "b-B5"}, queueBodies(t, s, "t", 0))
}

// TestDedup_NotForInternalPuts: the broker's own puts (Put, PutBatch: delay
// moves, commits, send-backs) are never deduplicated, and sends to retry
// and dead-letter topics neither; they do not hide a later send either.
func TestDedup_NotForInternalPuts(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), dedupOpts(time.Minute, 0, nil))
	defer s.Close()
	send(t, s, keyed("t", 0, "sent", "K"))
	mustPut(t, s, keyed("t", 0, "moved", "K"))
	mustPut(t, s, keyed("t", 0, "moved again", "K"))
	for _, topic := range []string{"%RETRY%g", "%DLQ%g"} {
		require.Zero(t, send(t, s, keyed(topic, 0, "retry 1", "K")).Duplicates)
		require.Zero(t, send(t, s, keyed(topic, 0, "retry 2", "K")).Duplicates)
		require.Equal(t, []string{"retry 1", "retry 2"}, queueBodies(t, s, topic, 0))
	}
	require.Zero(t, send(t, s, keyed("t", 0, "internal first", "K2")).Duplicates)
	require.Equal(t, []string{"sent", "moved", "moved again", "internal first"}, queueBodies(t, s, "t", 0))
	// A commit (a transactional record) does not feed the window.
	c := keyed("t", 0, "commit", "K3")
	c.SysFlag = message.TxCommit
	mustPut(t, s, c)
	waitDispatched(t, s)
	require.Zero(t, send(t, s, keyed("t", 0, "after commit", "K3")).Duplicates)
}

func TestDedup_OlderThanWindowStoredAgain(t *testing.T) {
	clock := &dedupClock{}
	s := mustOpen(t, testConf(t.TempDir()), dedupOpts(time.Minute, 0, clock))
	defer s.Close()
	send(t, s, keyed("t", 0, "a", "K"))
	clock.advance(59 * time.Second)
	require.Equal(t, 1, send(t, s, keyed("t", 0, "a", "K")).Duplicates)
	clock.advance(2 * time.Second)
	require.Zero(t, send(t, s, keyed("t", 0, "a2", "K")).Duplicates, "older than the window")
	require.Equal(t, 1, send(t, s, keyed("t", 0, "a3", "K")).Duplicates, "the new copy is remembered")
	require.Equal(t, []string{"a", "a2"}, queueBodies(t, s, "t", 0))
	require.Equal(t, int64(1), s.DedupStatus().Keys)
}

// TestDedup_BoundEvictsOldestFirst: past max keys the oldest key leaves
// first, and the cut is counted.
func TestDedup_BoundEvictsOldestFirst(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), dedupOpts(time.Minute, 3, nil))
	defer s.Close()
	for _, k := range []string{"K1", "K2", "K3", "K4"} {
		send(t, s, keyed("t", 0, k, k))
	}
	st := s.DedupStatus()
	require.Equal(t, int64(3), st.Keys)
	require.Equal(t, int64(1), st.Cut)
	for _, k := range []string{"K2", "K3", "K4"} {
		require.Equal(t, 1, send(t, s, keyed("t", 0, k, k)).Duplicates, k)
	}
	require.Zero(t, send(t, s, keyed("t", 0, "K1", "K1")).Duplicates, "K1 was evicted")
	require.Equal(t, int64(2), s.DedupStatus().Cut, "K1 again pushed K2 out")
}

// TestDedup_RestartRebuildsWindow: a reopened store recognises the keys
// stored in the last window before it closed (or crashed), and only those:
// once the window is rebuilt (beside the serving store), and before, from
// the key index.
func TestDedup_RestartRebuildsWindow(t *testing.T) {
	for _, tc := range []struct{ crash, held bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		crash := tc.crash
		name := map[bool]string{false: "close", true: "crash"}[crash] + map[bool]string{false: " rebuilt", true: " rebuilding"}[tc.held]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			clock := &dedupClock{}
			s := mustOpen(t, testConf(dir), dedupOpts(time.Minute, 0, clock))
			old := send(t, s, keyed("t", 0, "old", "OLD"))
			clock.advance(30 * time.Second)
			var recent []PutResult
			for i, k := range []string{"R1", "R2"} {
				recent = append(recent, send(t, s, keyed("t", int32(i), k, k)))
			}
			b := sendBatch(t, s, "t", 1, "B1", "B2")
			clock.advance(31 * time.Second) // NB: OLD is now 61 s old
			if crash {
				// NB: a copy of the open store: no clean close, the
				// checkpoints where the last save left them.
				waitDispatched(t, s)
				crashed := t.TempDir()
				require.NoError(t, os.CopyFS(crashed, os.DirFS(dir)))
				require.NoError(t, s.Close())
				dir = crashed
			} else {
				require.NoError(t, s.Close())
			}

			o := dedupOpts(time.Minute, 0, clock)
			if tc.held {
				o.Dedup.rebuildHeld = make(chan struct{}) // NB: never closed: Close ends the wait
			}
			s = mustOpen(t, testConf(dir), o)
			defer s.Close()
			if tc.held {
				require.True(t, s.dedupRebuilding.Load())
				require.Zero(t, s.DedupStatus().Keys, "nothing rebuilt yet")
			} else {
				require.Eventually(t, func() bool { return !s.dedupRebuilding.Load() }, 10*time.Second, time.Millisecond)
				require.Equal(t, int64(4), s.DedupStatus().Keys)
			}
			for i, k := range []string{"R1", "R2"} {
				r := send(t, s, keyed("t", 0, k+"-retry", k))
				require.Equal(t, 1, r.Duplicates, k)
				require.Equal(t, recent[i].Pos, r.Pos)
				require.Equal(t, int32(i), r.QueueID)
			}
			rb := sendBatch(t, s, "t", 1, "B1", "B2")
			require.Equal(t, b.Positions, rb.Positions)
			r := send(t, s, keyed("t", 0, "old-retry", "OLD"))
			require.Zero(t, r.Duplicates, "older than the window")
			require.NotEqual(t, old.Pos, r.Pos)
			require.Equal(t, []string{"old", "R1", "old-retry"}, queueBodies(t, s, "t", 0))
		})
	}
}

// TestDedup_FailedPutForgetsKey: a send the log refused leaves no key
// behind; its retry is stored.
func TestDedup_FailedPutForgetsKey(t *testing.T) {
	d := &diskFault{under: "commitlog"}
	o := dedupOpts(time.Minute, 0, nil)
	o.OpenFile = d.open
	s := mustOpen(t, testConf(t.TempDir()), o)
	defer s.Close()
	send(t, s, keyed("t", 0, "before", "K0"))
	d.failNext.Store(1)
	r := s.putWait(t.Context(), PutRequest{Msg: keyed("t", 0, "failed", "K1"), Dedup: true})
	require.Equal(t, PutServiceNotAvailable, r.Status)
	require.Eventually(t, func() bool {
		r = s.putWait(t.Context(), PutRequest{Msg: keyed("t", 0, "retried", "K1"), Dedup: true})
		return r.Status == PutOK
	}, 5*time.Second, 10*time.Millisecond)
	require.Zero(t, r.Duplicates)
	require.Equal(t, []string{"before", "retried"}, queueBodies(t, s, "t", 0))
}

// TestDedup_Off: with no window every send is stored.
func TestDedup_Off(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), dedupOpts(0, 0, nil))
	defer s.Close()
	send(t, s, keyed("t", 0, "a", "K"))
	require.Zero(t, send(t, s, keyed("t", 0, "a", "K")).Duplicates)
	require.Equal(t, []string{"a", "a"}, queueBodies(t, s, "t", 0))
	require.False(t, s.DedupStatus().Enabled)
}

func TestDedupKey_BytesEqualsString(t *testing.T) {
	require.Equal(t, dedupKeyOf("topic", "key"), dedupKeyOfBytes([]byte("topic"), []byte("key")))
	require.NotEqual(t, dedupKeyOf("topic", "key"), dedupKeyOf("topi", "ckey"))
	require.Equal(t, dedupKeyOf("t", ""), dedupKeyOfBytes([]byte("t"), nil))
	require.NotEqual(t, dedupKeyOf("t", ""), dedupKeyOf("t", "\x00"))
}

// TestDedupKey_Group: keys that differ in their last byte only (a
// producer's consecutive sends) are distinct keys with distinct tags, and
// the 16 hex digits put a group on 16 adjacent home slots, in either case.
func TestDedupKey_Group(t *testing.T) {
	const prefix = "7F00000104D20000000005265C00000"
	seen := map[dedupKey]bool{}
	tags := map[uint64]bool{}
	for c := range 256 {
		k := dedupKeyOf("orders", prefix+string([]byte{byte(c)}))
		require.False(t, seen[k], "last byte %#x", c)
		seen[k] = true
		if c < 128 {
			require.False(t, tags[slotTag(k)], "last byte %#x", c)
			tags[slotTag(k)] = true
		}
	}
	for _, digits := range []string{"0123456789ABCDEF", "0123456789abcdef"} {
		base := slotTag(dedupKeyOf("orders", prefix+"0")) & (1<<24 - 1) &^ 0xF
		for i, c := range digits {
			require.Equal(t, base+uint64(i), slotTag(dedupKeyOf("orders", prefix+string(c)))&(1<<24-1), "digit %c", c)
		}
	}
	// NB: another group, another topic: another region of homes.
	require.NotEqual(t, slotTag(dedupKeyOf("orders", prefix+"0"))&(1<<24-1), slotTag(dedupKeyOf("orders", prefix[:30]+"10"))&(1<<24-1))
	require.NotEqual(t, slotTag(dedupKeyOf("orders", prefix+"0"))&(1<<24-1), slotTag(dedupKeyOf("payments", prefix+"0"))&(1<<24-1))
}

// TestDedup_DispatcherFeed: with the dispatcher's feed on (a slave, whose
// log is not written by its put path), every indexed record a send would
// have stored enters the window, so a resend after the slave becomes
// master is recognised; retry topics and commits do not enter it.
func TestDedup_DispatcherFeed(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), dedupOpts(time.Minute, 0, nil))
	defer s.Close()
	s.SetDedupFeed(true)
	replicated := mustPut(t, s, keyed("t", 3, "replicated", "R"))
	mustPut(t, s, keyed("%RETRY%g", 0, "retry", "Q"))
	c := keyed("t", 0, "commit", "C")
	c.SysFlag = message.TxCommit
	mustPut(t, s, c)
	waitDispatched(t, s)
	r := send(t, s, keyed("t", 0, "resent", "R"))
	require.Equal(t, 1, r.Duplicates)
	require.Equal(t, replicated.Pos, r.Pos)
	require.Equal(t, int32(3), r.QueueID)
	require.Zero(t, send(t, s, keyed("%RETRY%g", 0, "retry", "Q")).Duplicates)
	require.Zero(t, send(t, s, keyed("t", 0, "after commit", "C")).Duplicates)
}

// TestDedupWindow_TableInvariants drives the window's table with random
// inserts, failed puts, expiry and the bound, and checks, after each step
// of a small window and every few hundred steps of one that grows its
// table (moving it incrementally) and turns its queue's chunks over, that
// every live entry is found pointing at its own sequence, that dead ones
// are not, and that the slots count the live entries.
func TestDedupWindow_TableInvariants(t *testing.T) {
	for _, c := range []struct{ max, keys, steps, every int }{
		{300, 500, 1500, 1},
		{20_000, 40_000, 50_000, 997},
	} {
		t.Run(fmt.Sprint("max=", c.max), func(t *testing.T) {
			now := int64(1_000_000)
			w := newDedupWindow(DedupOptions{Window: time.Second, MaxKeys: c.max}, func() time.Time { return time.UnixMilli(now) })
			defer w.close()
			r := rand.New(rand.NewPCG(1, 2))
			var pending []struct {
				k   dedupKey
				seq uint64
			}
			grew := 0
			for step := range c.steps {
				k := dedupKeyOf("t", fmt.Sprint(r.IntN(c.keys)))
				w.mu.Lock()
				size := len(w.slots)
				switch op := r.IntN(10); {
				case op < 6:
					if _, ok := w.lookupLocked(k, now); !ok {
						w.insertLocked(dedupEntry{key: k, pos: int64(step), ts: now}, now)
					}
				case op < 8:
					if _, ok := w.lookupLocked(k, now); !ok {
						seq := w.insertLocked(dedupEntry{key: k, pos: pendingPos, ts: now}, now)
						pending = append(pending, struct {
							k   dedupKey
							seq uint64
						}{k, seq})
					}
				case op < 9 && len(pending) > 0:
					p := pending[len(pending)-1]
					pending = pending[:len(pending)-1]
					if r.IntN(2) == 0 {
						w.removeLocked(p.k, p.seq)
					} else {
						w.fillLocked(p.seq, int64(step), 0, now, 1, 0)
					}
				default:
					now += int64(r.IntN(300 * 300 / c.max))
				}
				if len(w.slots) != size {
					grew++
				}
				if step%c.every == 0 || step == c.steps-1 {
					checkDedupTable(t, w, step)
				}
				require.LessOrEqual(t, w.n, c.max)
				w.mu.Unlock()
			}
			_, i := w.find(dedupKeyOf("t", "never"))
			require.Equal(t, -1, i)
			if c.max > 2*dedupChunk {
				require.Greater(t, grew, 2, "the table grew, incrementally")
				require.Greater(t, w.base, uint64(2*dedupChunk), "the queue turned its chunks over")
			}
		})
	}
}

// TestDedupWindow_Prepared: while the window fills, the put path takes the
// chunks and tables the preparer made ahead (the very slices it mapped),
// the table stays consistent, nothing is prepared once the window is full,
// and close frees what was prepared.
func TestDedupWindow_Prepared(t *testing.T) {
	const max = 40_000
	now := int64(1_000_000)
	w := newDedupWindow(DedupOptions{Window: time.Hour, MaxKeys: max, prepareMin: 1},
		func() time.Time { return time.UnixMilli(now) })
	// idle waits for the preparer to hand over what it made.
	idle := func() {
		deadline := time.Now().Add(10 * time.Second)
		for {
			w.mu.Lock()
			busy := w.preparing
			w.mu.Unlock()
			if !busy {
				return
			}
			require.True(t, time.Now().Before(deadline), "the preparer ends")
			time.Sleep(50 * time.Microsecond)
		}
	}
	chunks, tables := 0, 0
	for i := range 3 * max / 2 {
		idle()
		w.mu.Lock()
		rc, rt := w.readyChunk, w.readyTable
		w.insertLocked(dedupEntry{key: dedupKeyOf("t", fmt.Sprint(i)), pos: int64(i), ts: now}, now)
		if rc != nil && w.readyChunk == nil {
			require.Same(t, &rc[0], &w.chunks[len(w.chunks)-1][0], "insert %d took the prepared chunk", i)
			chunks++
		}
		if rt != nil && w.readyTable == nil {
			require.Same(t, &rt[0], &w.slots[0], "insert %d grew into the prepared table", i)
			tables++
		}
		if i%997 == 0 {
			checkDedupTable(t, w, i)
		}
		w.mu.Unlock()
	}
	// NB: 10 chunks of 4,096 hold max; the first is mapped on the spot, and
	// tables of 4,096 to 131,072 slots (slotsFor(max)) follow the first.
	require.GreaterOrEqual(t, chunks, 8, "chunks taken ready")
	require.Equal(t, 6, tables, "tables taken ready")
	idle()
	w.mu.Lock()
	checkDedupTable(t, w, -1)
	require.Equal(t, max, w.live)
	require.Nil(t, w.readyChunk, "nothing prepared once full")
	require.Nil(t, w.readyTable, "nothing prepared once full")
	w.mu.Unlock()
	w.close()

	// Close waits for a preparer under way, which frees what it made.
	w = newDedupWindow(DedupOptions{Window: time.Hour, MaxKeys: max, prepareMin: 1},
		func() time.Time { return time.UnixMilli(now) })
	w.mu.Lock()
	for i := range 1500 {
		w.insertLocked(dedupEntry{key: dedupKeyOf("t", fmt.Sprint(i)), pos: int64(i), ts: now}, now)
	}
	require.True(t, w.preparing, "a second chunk is asked for")
	w.mu.Unlock()
	w.close()
	w.mu.Lock()
	require.False(t, w.preparing, "close waited for the preparer")
	require.Nil(t, w.readyChunk, "the preparer freed what it made")
	require.Nil(t, w.readyTable)
	w.mu.Unlock()

	// A table the preparer made for a size the window grew past while it
	// ran (here: the lock held from the ask to the growth) is freed, not
	// kept ready: the next growths take prepared tables of their size.
	w = newDedupWindow(DedupOptions{Window: time.Hour, MaxKeys: max, prepareMin: 1},
		func() time.Time { return time.UnixMilli(now) })
	i := 0
	insert := func() {
		w.insertLocked(dedupEntry{key: dedupKeyOf("t", fmt.Sprint(i)), pos: int64(i), ts: now}, now)
		i++
	}
	w.mu.Lock()
	for w.live < w.prepareAt-1 {
		insert()
	}
	w.mu.Unlock()
	idle() // NB: a chunk's preparer under way would ask for the table only once done
	w.mu.Lock()
	insert()
	asking := w.preparing && w.live >= w.prepareAt
	asked := 2 * len(w.slots)
	for len(w.slots) < asked {
		insert()
	}
	onSpot := w.readyTable == nil
	w.mu.Unlock()
	require.True(t, asking, "the next table is asked for")
	require.True(t, onSpot, "the table grew on the spot")
	idle()
	w.mu.Lock()
	ready, want := len(w.readyTable), 2*len(w.slots)
	w.mu.Unlock()
	require.Contains(t, []int{0, want}, ready, "only a table of the next size is kept ready")
	grown, took := 0, 0
	for {
		idle()
		w.mu.Lock()
		rt, s := w.readyTable, len(w.slots)
		if s >= 4*asked {
			checkDedupTable(t, w, -1)
			w.mu.Unlock()
			break
		}
		insert()
		if len(w.slots) > s {
			grown++
			if rt != nil && &rt[0] == &w.slots[0] {
				took++
			}
		}
		w.mu.Unlock()
	}
	require.Equal(t, 2, grown)
	require.Equal(t, 2, took, "the growths after took prepared tables")
	w.close() // NB: not deferred: a check failing under w.mu would leave it held
}

// checkDedupTable checks the window's table against its queue.
// REQUIRES: w.mu held.
func checkDedupTable(t *testing.T, w *dedupWindow, step int) {
	live, used := 0, 0
	for i := range w.n {
		seq := w.head + uint64(i)
		if e := w.entry(seq); e.key != (dedupKey{}) {
			live++
			tab, si := w.find(e.key)
			require.GreaterOrEqual(t, si, 0, "step %d: a live entry is found", step)
			require.Equal(t, uint64(uint32(seq)), tab[si]&0xFFFFFFFF, "step %d", step)
		}
	}
	for _, tab := range [][]uint64{w.slots, w.old} {
		for _, sl := range tab {
			if sl > dedupTomb {
				used++
			}
		}
	}
	require.Equal(t, w.live, live, "step %d", step)
	require.Equal(t, live, used, "step %d", step)
}

// TestDedup_RepeatsWithinOneSubmit: a burst (one Submit) in which a message
// and a batch repeat members of a batch before them, itself a partial
// duplicate: each is answered with the first batch's ids, whatever order
// the answers are completed in.
func TestDedup_RepeatsWithinOneSubmit(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), dedupOpts(time.Minute, 0, nil))
	defer s.Close()
	batch := func(keys ...string) *Batch {
		b := &Batch{Template: message.Message{Topic: "t", QueueID: 0, BornHost: bornHost}}
		for _, k := range keys {
			b.Items = append(b.Items, message.BatchItem{Body: []byte("b-" + k),
				Properties: string(message.AppendProperties(nil, map[string]string{message.PropUniqKey: k}))})
		}
		return b
	}
	x0 := send(t, s, keyed("t", 0, "x0", "X0"))
	res := make([]PutResult, 3)
	reqs := []PutRequest{
		{Batch: batch("X0", "X1", "X2"), Dedup: true, Done: AnswerFunc(func(r PutResult) { res[0] = r })},
		{Msg: keyed("t", 0, "m-X2", "X2"), Dedup: true, Done: AnswerFunc(func(r PutResult) { res[1] = r })},
		{Batch: batch("X2", "X3"), Dedup: true, Done: AnswerFunc(func(r PutResult) { res[2] = r })},
	}
	s.Submit(reqs)
	for _, r := range res {
		require.Equal(t, PutOK, r.Status, r.Remark)
	}
	require.Equal(t, 1, res[0].Duplicates)
	require.Len(t, res[0].Positions, 3)
	require.Equal(t, x0.Pos, res[0].Positions[0])
	require.Equal(t, 1, res[1].Duplicates)
	require.Equal(t, res[0].Positions[2], res[1].Pos, "X2's position")
	require.Equal(t, x0.QueueOffset+2, res[1].QueueOffset, "X2's queue offset")
	require.Equal(t, 1, res[2].Duplicates)
	require.Equal(t, res[0].Positions[2], res[2].Positions[0])
	require.Equal(t, x0.QueueOffset+2, res[2].QueueOffset, "X2's queue offset")
	require.Equal(t, []string{"x0", "b-X1", "b-X2", "b-X3"}, queueBodies(t, s, "t", 0))
}

// TestDedup_SyncFlush: in sync flush mode a duplicate is answered like its
// original, once the original is on disk (the answer waits for the end of
// the stored record): resends in one burst and after.
func TestDedup_SyncFlush(t *testing.T) {
	c := testConf(t.TempDir())
	c.Flush = conf.FlushSync
	s := mustOpen(t, c, dedupOpts(time.Minute, 0, nil))
	defer s.Close()
	res := make([]PutResult, 3)
	durableAt := make([]int64, 3) // the durable end when each was answered
	done := make(chan int, 3)
	var reqs []PutRequest
	for i := range res {
		reqs = append(reqs, PutRequest{Msg: keyed("t", 0, "m", "K"), Dedup: true,
			Done: AnswerFunc(func(r PutResult) { res[i], durableAt[i] = r, int64(s.Log().Durable()); done <- i })})
	}
	s.Submit(reqs)
	for range res {
		<-done
	}
	for i, r := range res {
		require.Equal(t, PutOK, r.Status, r.Remark)
		require.Equal(t, min(i, 1), r.Duplicates)
		require.Equal(t, res[0].Pos, r.Pos)
		require.LessOrEqual(t, res[0].Pos+int64(res[0].Size), durableAt[i], "answered once the stored copy is on disk")
	}
	again := send(t, s, keyed("t", 0, "m", "K"))
	require.Equal(t, 1, again.Duplicates)
	require.Equal(t, []string{"m"}, queueBodies(t, s, "t", 0))
}

// TestDedupWindow_Closed: a closed window has freed its tables (off the
// heap) and every use of it is skipped, not a read of freed memory; closing
// twice is harmless. The tables' types hold no pointers, which the
// collector would not see there.
func TestDedupWindow_Closed(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[dedupEntry](), reflect.TypeFor[uint64]()} {
		require.True(t, pointerFree(typ), "%v holds pointers", typ)
	}
	now := time.UnixMilli(1_700_000_000_000)
	w := newDedupWindow(DedupOptions{Window: time.Hour, MaxKeys: 100_000}, func() time.Time { return now })
	for i := range 50_000 { // NB: more than a chunk, and the table grows
		w.add(dedupEntry{key: dedupKeyOf("t", fmt.Sprint(i)), pos: int64(i), ts: now.UnixMilli()})
	}
	s := &Store{dedup: w}
	require.Equal(t, int64(50_000), s.DedupStatus().Keys)
	w.close()
	w.close()
	st := s.DedupStatus()
	require.True(t, st.Enabled)
	require.Zero(t, st.Keys)
	w.add(dedupEntry{key: dedupKeyOf("t", "x"), pos: 1, ts: now.UnixMilli()})
	reqs := []PutRequest{{Msg: &message.Message{Topic: "t"}}}
	sizes := []sized{{n: 100, dd: dedupState{kind: ddKey, key: dedupKeyOf("t", "0")}}}
	require.False(t, s.dedupCheck(reqs, sizes), "a closed window meets nothing")
	s.dedupRecord(reqs, make([]PutResult, 1), sizes)
	require.Zero(t, s.DedupStatus().Keys)
}

// pointerFree reports whether values of t hold no pointers.
func pointerFree(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return true
	case reflect.Array:
		return pointerFree(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !pointerFree(t.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}
