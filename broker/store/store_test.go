package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/stretchr/testify/require"
)

func TestStore_PutGet(t *testing.T) {
	for _, flush := range []string{"async", "sync"} {
		t.Run("flush="+flush, func(t *testing.T) {
			c := testConf(t.TempDir())
			c.Flush = flush
			s := mustOpen(t, c, testOpts())
			for i := range 10 {
				r := mustPut(t, s, msg("orders", int32(i%2), fmt.Sprintf("m-%d", i)))
				require.Equal(t, int64(i/2), r.QueueOffset)
			}
			waitDispatched(t, s)
			res := get(t, s, "orders", 0, 0, 32)
			require.Equal(t, GetFound, res.Status)
			require.Equal(t, []string{"m-0", "m-2", "m-4", "m-6", "m-8"}, bodies(t, res.Body))
			require.Equal(t, int64(5), res.NextOffset)
			require.Equal(t, int64(0), res.MinOffset)
			require.Equal(t, int64(5), res.MaxOffset)
			for i, r := range records(t, res.Body) {
				require.Equal(t, int64(i), r.QueueOffset)
				require.Equal(t, "orders", string(r.Topic))
				require.NotZero(t, r.StoreTimestamp)
				require.NoError(t, message.Validate(res.Body[:r.TotalSize], r.PhysicalOffset, true))
				res.Body = res.Body[r.TotalSize:]
			}
			res = get(t, s, "orders", 1, 2, 2)
			require.Equal(t, []string{"m-5", "m-7"}, bodies(t, res.Body))
			require.Equal(t, int64(4), res.NextOffset)
			require.NoError(t, s.Close())

			s = mustOpen(t, c, testOpts())
			defer s.Close()
			res = get(t, s, "orders", 1, 0, 32)
			require.Equal(t, []string{"m-1", "m-3", "m-5", "m-7", "m-9"}, bodies(t, res.Body))
			r := mustPut(t, s, msg("orders", 1, "m-10"))
			require.Equal(t, int64(5), r.QueueOffset, "queue offsets continue after reopen")
		})
	}
}

func TestStore_GetStatuses(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), testOpts())
	defer s.Close()
	for i := range 3 {
		mustPut(t, s, msg("t", 0, fmt.Sprint(i), message.PropTags, "TagA"))
	}
	waitDispatched(t, s)
	for _, tc := range []struct {
		name   string
		topic  string
		qid    int32
		off    int64
		status GetStatus
		next   int64
	}{
		{"found", "t", 0, 1, GetFound, 3},
		{"no new message", "t", 0, 3, GetOffsetOverflowOne, 3},
		{"overflow badly", "t", 0, 9, GetOffsetOverflowBadly, 3},
		{"too small", "t", 0, -1, GetOffsetTooSmall, 0},
		{"no queue", "t", 5, 0, GetNoMatchedLogicQueue, 0},
		{"no topic", "nope", 0, 4, GetNoMatchedLogicQueue, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := get(t, s, tc.topic, tc.qid, tc.off, 32)
			require.Equal(t, tc.status, res.Status)
			require.Equal(t, tc.next, res.NextOffset)
		})
	}
}

func TestStore_TagFilter(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), testOpts())
	defer s.Close()
	for i, tag := range []string{"TagA", "TagB", "TagC", "TagA", ""} {
		mustPut(t, s, msg("t", 0, fmt.Sprint(i), message.PropTags, tag))
	}
	waitDispatched(t, s)
	res, err := s.Get(context.Background(), GetRequest{Topic: "t", Offset: 0, MaxMsgs: 32,
		TagCodes: message.NewTagCodeSet([]int64{message.TagsHashCode("TagA"), message.TagsHashCode("TagC")})})
	require.NoError(t, err)
	require.Equal(t, []string{"0", "2", "3"}, bodies(t, res.Body))
	require.Equal(t, int64(5), res.NextOffset)
	res, err = s.Get(context.Background(), GetRequest{Topic: "t", Offset: 0, MaxMsgs: 32,
		TagCodes: message.NewTagCodeSet([]int64{message.TagsHashCode("TagZ")})})
	require.NoError(t, err)
	require.Equal(t, GetNoMatchedMessage, res.Status)
	require.Equal(t, int64(5), res.NextOffset, "scanned entries are skipped")
}

// TestStore_PropertyFilter: a Filter sees each message's properties, the
// messages it refuses are cut out of the body, and the scan goes on until
// the result is full (as the tag filter's scan does).
func TestStore_PropertyFilter(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), testOpts())
	defer s.Close()
	for i := range 20 {
		mustPut(t, s, msg("t", 0, fmt.Sprint(i), "n", fmt.Sprint(i), message.PropTags, []string{"A", "B"}[i%4/2]))
	}
	waitDispatched(t, s)
	var asked []string
	even := func(props []byte) bool {
		v, _ := message.PropertyValueBytes(props, "n")
		asked = append(asked, string(v))
		return v[len(v)-1]%2 == 0
	}
	res, err := s.Get(context.Background(), GetRequest{Topic: "t", Offset: 0, MaxMsgs: 4, Filter: even})
	require.NoError(t, err)
	require.Equal(t, GetFound, res.Status)
	require.Equal(t, []string{"0", "2", "4", "6"}, bodies(t, res.Body))
	require.Equal(t, 4, res.Count)
	require.Equal(t, int64(7), res.NextOffset, "the scan stops after the 4th match")
	require.Equal(t, []string{"0", "1", "2", "3", "4", "5", "6"}, asked)

	// With a tag filter, only the messages it takes are read and filtered.
	asked = nil
	res, err = s.Get(context.Background(), GetRequest{Topic: "t", Offset: 0, MaxMsgs: 32, Filter: even,
		TagCodes: message.NewTagCodeSet([]int64{message.TagsHashCode("A")})})
	require.NoError(t, err)
	require.Equal(t, []string{"0", "4", "8", "12", "16"}, bodies(t, res.Body))
	require.Equal(t, []string{"0", "1", "4", "5", "8", "9", "12", "13", "16", "17"}, asked)
	require.Equal(t, int64(20), res.NextOffset)

	res, err = s.Get(context.Background(), GetRequest{Topic: "t", Offset: 3, MaxMsgs: 32,
		Filter: func([]byte) bool { return false }})
	require.NoError(t, err)
	require.Equal(t, GetNoMatchedMessage, res.Status)
	require.Empty(t, res.Body)
	require.Equal(t, int64(20), res.NextOffset, "scanned entries are skipped")
}

func TestStore_GetLimits(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), testOpts())
	defer s.Close()
	big := string(make([]byte, 100<<10))
	for range 5 {
		mustPut(t, s, msg("t", 0, big))
	}
	waitDispatched(t, s)
	res, err := s.Get(context.Background(), GetRequest{Topic: "t", MaxMsgs: 32, MaxBytes: 250 << 10})
	require.NoError(t, err)
	require.Equal(t, 2, res.Count, "the byte cap stops the batch")
	require.Equal(t, int64(2), res.NextOffset)
	res, err = s.Get(context.Background(), GetRequest{Topic: "t", MaxMsgs: 32, MaxBytes: 10})
	require.NoError(t, err)
	require.Equal(t, 1, res.Count, "the first message is always taken")
	res, err = s.Get(context.Background(), GetRequest{Topic: "t", MaxMsgs: 0})
	require.NoError(t, err)
	require.Equal(t, 1, res.Count, "maxMsgNums 0 returns one message")
}

func TestStore_Batch(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), testOpts())
	defer s.Close()
	mustPut(t, s, msg("t", 0, "single"))
	b := &Batch{Template: *msg("t", 0, ""), Items: []message.BatchItem{
		{Body: []byte("b0")}, {Body: []byte("b1"), Properties: "TAGS\x01TB"}, {Body: []byte("b2")},
	}}
	r := s.PutBatch(context.Background(), b)
	require.Equal(t, PutOK, r.Status, r.Remark)
	require.Equal(t, int64(1), r.QueueOffset)
	require.Len(t, r.Positions, 3)
	waitDispatched(t, s)
	res := get(t, s, "t", 0, 0, 32)
	require.Equal(t, []string{"single", "b0", "b1", "b2"}, bodies(t, res.Body))
	for i, rec := range records(t, res.Body)[1:] {
		require.Equal(t, r.Positions[i], rec.PhysicalOffset)
		require.Equal(t, int64(1+i), rec.QueueOffset)
	}
	r = s.PutBatch(context.Background(), &Batch{Template: *msg("t", 0, "")})
	require.Equal(t, PutMessageIllegal, r.Status)
}

func TestStore_Illegal(t *testing.T) {
	c := testConf(t.TempDir())
	c.MaxMessageSize = 1024
	s := mustOpen(t, c, testOpts())
	defer s.Close()
	r := s.Put(context.Background(), msg("t", 0, string(make([]byte, 1025))))
	require.Equal(t, PutMessageIllegal, r.Status)
	require.Contains(t, r.Remark, "1024")
	r = s.Put(context.Background(), msg(string(make([]byte, 128)), 0, "x"))
	require.Equal(t, PutMessageIllegal, r.Status)
}

func TestStore_Transactions(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), testOpts())
	defer s.Close()
	mustPut(t, s, msg("t", 0, "a"))
	half := msg("t", 0, "half")
	half.SysFlag = message.TxPrepared
	r := mustPut(t, s, half)
	require.Equal(t, int64(0), r.QueueOffset, "PREPARED takes queue offset 0")
	commit := msg("t", 0, "commit")
	commit.SysFlag = message.TxCommit
	r = mustPut(t, s, commit)
	require.Equal(t, int64(1), r.QueueOffset, "PREPARED did not advance the queue")
	waitDispatched(t, s)
	require.Equal(t, []string{"a", "commit"}, bodies(t, get(t, s, "t", 0, 0, 32).Body))
}

func TestStore_LookupByTimeAndKey(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), testOpts())
	defer s.Close()
	var stamps []int64
	for i := range 6 {
		r := mustPut(t, s, msg("t", 0, fmt.Sprint(i), message.PropKeys, fmt.Sprintf("order-%d shared", i), message.PropUniqKey, fmt.Sprintf("U%d", i)))
		stamps = append(stamps, r.StoreTimestamp)
		time.Sleep(3 * time.Millisecond)
	}
	waitDispatched(t, s)
	off, err := s.OffsetByTime("t", 0, stamps[3])
	require.NoError(t, err)
	require.Equal(t, int64(3), off)
	off, err = s.OffsetByTime("t", 0, stamps[5]+1000)
	require.NoError(t, err)
	require.Equal(t, int64(6), off, "after every message: max offset")
	off, err = s.OffsetByTime("t", 0, 0)
	require.NoError(t, err)
	require.Equal(t, int64(0), off)
	ts, err := s.EarliestStoreTime("t", 0)
	require.NoError(t, err)
	require.Equal(t, stamps[0], ts)

	recs, err := s.QueryByKey("t", "order-4", 0, time.Now().UnixMilli()+1000, 10)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, []string{"4"}, bodies(t, recs[0]))
	recs, err = s.QueryByKey("t", "U2", 0, time.Now().UnixMilli()+1000, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"2"}, bodies(t, recs[0]))
	recs, err = s.QueryByKey("t", "shared", 0, time.Now().UnixMilli()+1000, 4)
	require.NoError(t, err)
	require.Len(t, recs, 4, "capped by max")
	recs, err = s.QueryByKey("other", "order-4", 0, time.Now().UnixMilli()+1000, 10)
	require.NoError(t, err)
	require.Empty(t, recs, "keys are per topic")
	rec, err := s.ReadMessage(records(t, get(t, s, "t", 0, 2, 1).Body)[0].PhysicalOffset)
	require.NoError(t, err)
	require.Equal(t, []string{"2"}, bodies(t, rec))
	_, err = s.ReadMessage(3)
	require.Error(t, err)
}

func TestStore_ArrivalListener(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), testOpts())
	defer s.Close()
	var got atomic.Int64
	s.Subscribe(func(topic string, qid int32, next, _ int64, _ []byte) {
		if topic == "t" && qid == 2 {
			got.Store(next)
		}
	})
	mustPut(t, s, msg("t", 2, "a"))
	mustPut(t, s, msg("t", 2, "b"))
	require.Eventually(t, func() bool { return got.Load() == 2 }, 5*time.Second, time.Millisecond)
}

// TestStore_PutDispatchesInline: in async flush mode a small put with no
// dispatch running dispatches its own record before it returns: its queue's
// next offset and the arrival listener have moved, with no wait for the
// loop. A larger put, and any in sync flush mode (once durable), are the
// loop's.
func TestStore_PutDispatchesInline(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), testOpts())
	defer s.Close()
	var notified atomic.Int64
	s.Subscribe(func(topic string, _ int32, next, _ int64, _ []byte) {
		if topic == "t" {
			notified.Store(next)
		}
	})
	// NB: once the loop has made its first pass, only a kick wakes it,
	// and a put that dispatches itself kicks nothing.
	require.Eventually(t, func() bool {
		if !s.dispMu.TryLock() {
			return false
		}
		defer s.dispMu.Unlock()
		return s.dispSc != nil
	}, 10*time.Second, time.Millisecond, "the loop's first pass")
	for i := range int64(50) {
		mustPut(t, s, msg("t", 1, "a"))
		require.Equal(t, i+1, s.MaxOffset("t", 1), "put %d", i)
		require.Equal(t, i+1, notified.Load(), "put %d", i)
	}
	require.Equal(t, int64(50), s.inlineDispatches.Load())
	// A larger put leaves its dispatch to the loop.
	mustPut(t, s, msg("t", 1, strings.Repeat("b", inlineDispatchMax)))
	waitDispatched(t, s)
	require.Equal(t, int64(51), s.MaxOffset("t", 1))
	require.Equal(t, int64(50), s.inlineDispatches.Load())

	c := testConf(t.TempDir())
	c.Flush = conf.FlushSync
	ss := mustOpen(t, c, testOpts())
	defer ss.Close()
	for range 5 {
		mustPut(t, ss, msg("t", 1, "a"))
	}
	waitDispatched(t, ss)
	require.Equal(t, int64(5), ss.MaxOffset("t", 1))
	require.Zero(t, ss.inlineDispatches.Load())
}

func TestStore_Locked(t *testing.T) {
	c := testConf(t.TempDir())
	s := mustOpen(t, c, testOpts())
	defer s.Close()
	_, err := Open(c, testOpts())
	require.ErrorIs(t, err, ErrLocked)
}

// TestStore_RedispatchIsNoop: with the checkpoints gone, Open re-dispatches
// the whole log over the existing consume queues and nothing changes.
func TestStore_RedispatchIsNoop(t *testing.T) {
	c := testConf(t.TempDir())
	s := mustOpen(t, c, testOpts())
	for i := range 200 {
		mustPut(t, s, msg(fmt.Sprint("t", i%5), int32(i%3), fmt.Sprint(i)))
	}
	require.NoError(t, s.Close())
	require.NoError(t, os.Remove(filepath.Join(c.Dir, "consumequeue", checkpointName)))
	s = mustOpen(t, c, testOpts())
	defer s.Close()
	total := 0
	s.Topics(func(topic string, qid int32, min, max int64) bool {
		require.Equal(t, int64(0), min)
		total += int(max)
		return true
	})
	require.Equal(t, 200, total)
}

// TestStore_Rebuild deletes the consume queues and the key index: Open
// rebuilds both from the commitlog.
func TestStore_Rebuild(t *testing.T) {
	c := testConf(t.TempDir())
	s := mustOpen(t, c, testOpts())
	for i := range 300 {
		mustPut(t, s, msg("t", int32(i%4), fmt.Sprint(i), message.PropKeys, fmt.Sprint("k", i)))
	}
	waitDispatched(t, s)
	want := bodies(t, get(t, s, "t", 3, 0, 100).Body)
	require.Len(t, want, 75)
	require.NoError(t, s.Close())
	require.NoError(t, os.RemoveAll(filepath.Join(c.Dir, "consumequeue")))
	require.NoError(t, os.RemoveAll(filepath.Join(c.Dir, "index")))
	s = mustOpen(t, c, testOpts())
	defer s.Close()
	require.Equal(t, want, bodies(t, get(t, s, "t", 3, 0, 100).Body))
	recs, err := s.QueryByKey("t", "k123", 0, time.Now().UnixMilli()+1000, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"123"}, bodies(t, recs[0]))
	r := mustPut(t, s, msg("t", 3, "next"))
	require.Equal(t, int64(75), r.QueueOffset)
}

func TestStore_TenThousandQueues(t *testing.T) {
	c := testConf(t.TempDir())
	c.SegmentSize = 8 << 20
	s := mustOpen(t, c, testOpts())
	const queues = 10000
	for i := range 2 * queues {
		mustPut(t, s, msg(fmt.Sprint("topic-", i%queues/100), int32(i%100), fmt.Sprint(i)))
	}
	require.NoError(t, s.Close())
	s = mustOpen(t, c, testOpts())
	defer s.Close()
	n := 0
	s.Topics(func(topic string, qid int32, min, max int64) bool {
		require.Equal(t, int64(2), max, "%s/%d", topic, qid)
		n++
		return true
	})
	require.Equal(t, queues, n)
	res := get(t, s, "topic-42", 17, 0, 10)
	require.Equal(t, []string{"4217", "14217"}, bodies(t, res.Body))
}

// TestStore_SubmitBatch: a batch waits for the put lock, is stored once
// it is free, and is answered through Done.
func TestStore_SubmitBatch(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), testOpts())
	defer s.Close()
	answers := make(chan PutResult, 1)
	done := func(r PutResult) { answers <- r }
	s.putMu.Lock()
	go s.Submit([]PutRequest{{Batch: &Batch{Template: *msg("t", 0, ""), Items: []message.BatchItem{{Body: []byte("b0")}, {Body: []byte("b1")}}}, Done: AnswerFunc(done)}})
	select {
	case r := <-answers:
		t.Fatalf("stored while the put lock was held: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
	s.putMu.Unlock()
	r := <-answers
	require.Equal(t, PutOK, r.Status, r.Remark)
	require.Equal(t, int64(0), r.QueueOffset)
	waitDispatched(t, s)
	require.Equal(t, []string{"b0", "b1"}, bodies(t, get(t, s, "t", 0, 0, 32).Body))
}

// TestStore_GetRuns: Get reads runs of adjacent records with one read;
// whatever the interleaving of queues, batches, page sizes and segment
// ends, every queue reads back exactly what was put, in order.
func TestStore_GetRuns(t *testing.T) {
	c := testConf(t.TempDir())
	c.SegmentSize = 64 << 10
	s := mustOpen(t, c, testOpts())
	defer s.Close()
	rng := rand.New(rand.NewPCG(7, 9))
	want := map[int32][]string{}
	for i := range 3000 {
		q := int32(rng.IntN(3))
		body := fmt.Sprintf("%d-%s", i, strings.Repeat("x", rng.IntN(300)))
		if rng.IntN(4) == 0 {
			var items []message.BatchItem
			for k := range 1 + rng.IntN(8) {
				b := fmt.Sprintf("%s-b%d", body, k)
				items = append(items, message.BatchItem{Body: []byte(b)})
				want[q] = append(want[q], b)
			}
			r := s.PutBatch(context.Background(), &Batch{Template: *msg("t", q, ""), Items: items})
			require.Equal(t, PutOK, r.Status, r.Remark)
			continue
		}
		mustPut(t, s, msg("t", q, body))
		want[q] = append(want[q], body)
	}
	waitDispatched(t, s)
	for q, bodiesWant := range want {
		var got []string
		for off := int64(0); ; {
			res, err := s.Get(context.Background(), GetRequest{Topic: "t", QueueID: q, Offset: off, MaxMsgs: 1 + rng.IntN(64)})
			require.NoError(t, err)
			if res.Status != GetFound {
				require.Equal(t, GetOffsetOverflowOne, res.Status)
				break
			}
			got = append(got, bodies(t, res.Body)...)
			off = res.NextOffset
		}
		require.Equal(t, bodiesWant, got, "queue %d", q)
	}
}

// TestStore_SubmitMany: a burst to several queues goes in few appends, in
// order, with each queue's offsets contiguous and continuing Put's; an
// illegal message is refused alone; chunks split at the size bound.
func TestStore_SubmitMany(t *testing.T) {
	c := testConf(t.TempDir())
	c.SegmentSize = 256 << 10 // chunks of 64 KiB
	s := mustOpen(t, c, testOpts())
	defer s.Close()
	mustPut(t, s, msg("a", 0, "before"))
	var msgs []*message.Message
	want := map[string][]string{}
	for i := range 300 {
		topic, q := fmt.Sprint("t", i%2), int32(i%3)
		if i == 7 {
			topic, q = "a", 0
		}
		body := fmt.Sprintf("%d-%s", i, strings.Repeat("y", i%700))
		msgs = append(msgs, msg(topic, q, body))
		key := fmt.Sprintf("%s/%d", topic, q)
		want[key] = append(want[key], body)
	}
	msgs[100].Body = make([]byte, 8<<20) // too large
	want["t0/1"] = slices.DeleteFunc(want["t0/1"], func(b string) bool { return strings.HasPrefix(b, "100-") })
	reqs := make([]PutRequest, len(msgs))
	for i, m := range msgs {
		reqs[i] = PutRequest{Msg: m}
	}
	res := submit(s, reqs...)
	require.Len(t, res, len(msgs))
	next := map[string]int64{"a/0": 1}
	for i, r := range res {
		if i == 100 {
			require.Equal(t, PutMessageIllegal, r.Status)
			continue
		}
		require.Equal(t, PutOK, r.Status, "%d: %s", i, r.Remark)
		key := fmt.Sprintf("%s/%d", msgs[i].Topic, msgs[i].QueueID)
		require.Equal(t, next[key], r.QueueOffset, "message %d", i)
		next[key]++
		if i > 0 && i != 101 && res[i-1].Status == PutOK {
			require.Greater(t, r.Pos, res[i-1].Pos, "in order")
		}
	}
	waitDispatched(t, s)
	for key, bodiesWant := range want {
		var topic string
		var q int32
		_, err := fmt.Sscanf(strings.Replace(key, "/", " ", 1), "%s %d", &topic, &q)
		require.NoError(t, err)
		var got []string
		for off := int64(0); ; {
			r, err := s.Get(context.Background(), GetRequest{Topic: topic, QueueID: q, Offset: off, MaxMsgs: 64})
			require.NoError(t, err)
			if r.Status != GetFound {
				break
			}
			got = append(got, bodies(t, r.Body)...)
			off = r.NextOffset
		}
		if topic == "a" {
			got = got[1:] // "before"
		}
		require.Equal(t, bodiesWant, got, key)
	}
	r := mustPut(t, s, msg("t0", 0, "after"))
	require.Equal(t, next["t0/0"], r.QueueOffset, "Put continues after Submit")
}

// TestDispatch_ParsesOnce: the loop's scanner reads each record's
// DispatchInfo while it checks the record, and the dispatcher takes it
// from there (no second parse), singles and batches, async and sync; the
// queues and keys are as ever.
func TestDispatch_ParsesOnce(t *testing.T) {
	for _, flush := range []string{conf.FlushAsync, conf.FlushSync} {
		t.Run(flush, func(t *testing.T) {
			c := testConf(t.TempDir())
			c.Flush = flush
			c.SegmentSize = 64 << 10 // NB: blanks at segment ends
			s := mustOpen(t, c, testOpts())
			defer s.Close()
			pad := strings.Repeat("p", 400)
			for i := range 300 {
				mustPut(t, s, msg("t", int32(i%2), fmt.Sprint(i), message.PropKeys, fmt.Sprint("k", i), "PAD", pad))
			}
			r := s.PutBatch(context.Background(), &Batch{Template: *msg("t", 0, ""), Items: []message.BatchItem{
				{Body: []byte("b0")}, {Body: []byte("b1"), Properties: "KEYS\x01kb1"}}})
			require.Equal(t, PutOK, r.Status, r.Remark)
			waitDispatched(t, s)
			require.Greater(t, int64(s.log.Next()), 2*c.SegmentSize, "past two segment ends")
			s.dispMu.Lock()
			reparsed := s.reparsed
			s.dispMu.Unlock()
			require.Zero(t, reparsed, "records parsed again after their check")
			require.Equal(t, oddBodies(300), bodies(t, get(t, s, "t", 1, 0, 200).Body))
			require.Equal(t, []string{"298", "b0", "b1"}, bodies(t, get(t, s, "t", 0, 149, 3).Body))
			for _, k := range []string{"k0", "k151", "k299", "kb1"} {
				recs, err := s.QueryByKey("t", k, 0, time.Now().UnixMilli()+1000, 2)
				require.NoError(t, err)
				require.Len(t, recs, 1, k)
			}
		})
	}
}

func oddBodies(n int) []string {
	var out []string
	for i := 1; i < n; i += 2 {
		out = append(out, fmt.Sprint(i))
	}
	return out
}
