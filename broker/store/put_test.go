package store

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/stretchr/testify/require"
)

// submit stores reqs with one Submit and returns their results once all
// are answered.
func submit(s *Store, reqs ...PutRequest) []PutResult {
	res := make([]PutResult, len(reqs))
	done := make(chan struct{}, len(reqs))
	for i := range reqs {
		reqs[i].Done = AnswerFunc(func(r PutResult) { res[i] = r; done <- struct{}{} })
	}
	s.Submit(reqs)
	for range reqs {
		<-done
	}
	return res
}

// TestStore_SubmitMixed: messages and batches of one Submit are stored in
// order, each queue's offsets contiguous across them, and a refused
// request (illegal, empty batch, transactional batch) takes no offset.
func TestStore_SubmitMixed(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), testOpts())
	defer s.Close()
	batch := func(bodies ...string) *Batch {
		b := &Batch{Template: *msg("t", 0, "")}
		for _, body := range bodies {
			b.Items = append(b.Items, message.BatchItem{Body: []byte(body)})
		}
		return b
	}
	tx := batch("tx")
	tx.Template.SysFlag = message.TxPrepared
	res := submit(s,
		PutRequest{Msg: msg("t", 0, "m0")},
		PutRequest{Batch: batch("b1", "b2")},
		PutRequest{Batch: batch()},
		PutRequest{Batch: tx},
		PutRequest{},
		PutRequest{Msg: msg("t", 0, "m3")},
	)
	require.Equal(t, PutOK, res[0].Status)
	require.Equal(t, PutOK, res[1].Status)
	require.Len(t, res[1].Positions, 2)
	require.Equal(t, res[1].Pos, res[1].Positions[0])
	for i := 2; i <= 4; i++ {
		require.Equal(t, PutMessageIllegal, res[i].Status, "request %d", i)
		require.NotEmpty(t, res[i].Remark)
	}
	require.Equal(t, PutOK, res[5].Status)
	require.Equal(t, []int64{0, 1, 3}, []int64{res[0].QueueOffset, res[1].QueueOffset, res[5].QueueOffset})
	waitDispatched(t, s)
	require.Equal(t, []string{"m0", "b1", "b2", "m3"}, bodies(t, get(t, s, "t", 0, 0, 32).Body))
}

// TestStore_SubmitWithReusesScratch: submits in one PutScratch, of
// different sizes, with batches and a repeated key, answer as Submit does,
// and leave the scratch zeroed.
func TestStore_SubmitWithReusesScratch(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), dedupOpts(time.Minute, 1000, nil))
	defer s.Close()
	var sc PutScratch
	submitWith := func(reqs ...PutRequest) []PutResult {
		res := make([]PutResult, len(reqs))
		for i := range reqs {
			reqs[i].Done = AnswerFunc(func(r PutResult) { res[i] = r })
		}
		s.SubmitWith(reqs, &sc)
		for i := range sc.res[:cap(sc.res)] {
			require.Zero(t, sc.res[i], "result %d left in the scratch", i)
			require.Zero(t, sc.sizes[i], "size %d left in the scratch", i)
		}
		return res
	}
	batch := &Batch{Template: *msg("t", 0, ""), Items: []message.BatchItem{{Body: []byte("b1")}, {Body: []byte("b2")}}}
	res := submitWith(PutRequest{Msg: msg("t", 0, "m0")}, PutRequest{Batch: batch}, PutRequest{Msg: keyed("t", 0, "k", "K1"), Dedup: true})
	require.Equal(t, []int64{0, 1, 3}, []int64{res[0].QueueOffset, res[1].QueueOffset, res[2].QueueOffset})
	require.Len(t, res[1].Positions, 2)
	res = submitWith(PutRequest{Msg: keyed("t", 0, "k", "K1"), Dedup: true})
	require.Equal(t, PutOK, res[0].Status)
	require.Equal(t, 1, res[0].Duplicates, "the key of the first submit")
	require.Equal(t, int64(3), res[0].QueueOffset)
	reqs := make([]PutRequest, 5)
	for i := range reqs {
		reqs[i] = PutRequest{Msg: msg("t", 0, fmt.Sprintf("n%d", i))}
	}
	res = submitWith(reqs...)
	for i, r := range res {
		require.Equal(t, PutOK, r.Status)
		require.Equal(t, int64(4+i), r.QueueOffset)
		require.Zero(t, r.Duplicates)
	}
	res = submitWith(PutRequest{Msg: &message.Message{}})
	require.Equal(t, PutMessageIllegal, res[0].Status)
	waitDispatched(t, s)
	require.Equal(t, []string{"m0", "b1", "b2", "k", "n0", "n1", "n2", "n3", "n4"}, bodies(t, get(t, s, "t", 0, 0, 32).Body))
}

// TestStore_SubmitFailedAppendKeepsOffsets: an append that fails gives
// back the queue offsets it took, so the next put continues without a
// gap.
func TestStore_SubmitFailedAppendKeepsOffsets(t *testing.T) {
	var fail atomic.Bool
	o := testOpts()
	o.OpenFile = func(path string, flag int, perm os.FileMode) (commitlog.File, error) {
		f, err := commitlog.OSOpenFile(path, flag, perm)
		return failingFile{f, &fail}, err
	}
	c := testConf(t.TempDir())
	s := mustOpen(t, c, o)
	defer s.Close()
	mustPut(t, s, msg("t", 0, "m0"))
	fail.Store(true)
	res := submit(s, PutRequest{Msg: msg("t", 0, "lost")}, PutRequest{Batch: &Batch{Template: *msg("t", 0, ""),
		Items: []message.BatchItem{{Body: []byte("lost too")}}}})
	for _, r := range res {
		require.Equal(t, PutServiceNotAvailable, r.Status, r.Remark)
	}
	require.Equal(t, int64(1), s.QueueNext("t", 0), "the failed append's offsets were given back")
}

// TestStore_GetWithoutPutLock: the pull path never takes the put lock: a
// Get, and QueueNext, answer while a put holds it.
func TestStore_GetWithoutPutLock(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), testOpts())
	defer s.Close()
	mustPut(t, s, msg("t", 0, "m0"))
	waitDispatched(t, s)
	s.putMu.Lock()
	defer s.putMu.Unlock()
	got := make(chan string, 1)
	go func() {
		next := s.QueueNext("t", 0)
		// An offset past the dispatched end: the path that consults the
		// put path's next offsets.
		res, err := s.Get(context.Background(), GetRequest{Topic: "t", QueueID: 0, Offset: 2, MaxMsgs: 32})
		got <- fmt.Sprint(next, res.Status, err)
	}()
	select {
	case g := <-got:
		require.Equal(t, fmt.Sprint(int64(1), GetOffsetOverflowBadly, nil), g)
	case <-time.After(10 * time.Second):
		t.Fatal("Get waited for the put lock")
	}
}

// failingFile fails commitlog writes with EIO while fail is set.
type failingFile struct {
	commitlog.File
	fail *atomic.Bool
}

func (f failingFile) WriteAt(p []byte, off int64) (int, error) {
	if f.fail.Load() {
		return 0, syscall.EIO
	}
	return f.File.WriteAt(p, off)
}
