package store

import (
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/commitlog"
)

// holdingGate is a master's gate no slave ever confirms: it holds puts
// until Close, which answers them FLUSH_SLAVE_TIMEOUT, as it answers a
// put it is given afterwards. A put answered PutOK past it was
// acknowledged without a replica.
type holdingGate struct {
	mu     sync.Mutex
	held   []Answerer
	res    []PutResult
	closed bool
}

func (g *holdingGate) Hold(_ int64, res PutResult, done Answerer) {
	g.mu.Lock()
	if !g.closed {
		g.held, g.res = append(g.held, done), append(g.res, res)
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	res.Status = PutFlushSlaveTimeout
	done.PutDone(res)
}

func (g *holdingGate) Close() {
	g.mu.Lock()
	g.closed = true
	held, res := g.held, g.res
	g.held, g.res = nil, nil
	g.mu.Unlock()
	for i, done := range held {
		res[i].Status = PutFlushSlaveTimeout
		done.PutDone(res[i])
	}
}

// demote is a master's handover as the broker does it: puts refused, the
// gate removed, then closed.
func demote(t testing.TB, s *Store, g *holdingGate) {
	require.NoError(t, s.SetReplica(true))
	s.SetReplicaGate(nil)
	g.Close()
}

// TestGate_SyncFlushDemotion: puts that wait for their fsync while their
// master is demoted are answered after the gate is gone: FLUSH_SLAVE_TIMEOUT
// (stored, not replicated), none PutOK; puts after the demotion are refused.
func TestGate_SyncFlushDemotion(t *testing.T) {
	fsyncs := newGate()
	c := testConf(t.TempDir())
	c.Flush = "sync"
	c.SyncFlushTimeout = time.Minute // NB: no FLUSH_DISK_TIMEOUT in this test
	o := testOpts()
	o.OpenFile = func(path string, flag int, perm os.FileMode) (commitlog.File, error) {
		f, err := commitlog.OSOpenFile(path, flag, perm)
		return gatedFile{f, fsyncs}, err
	}
	s := mustOpen(t, c, o)
	defer s.Close()
	g := &holdingGate{}
	s.SetReplicaGate(g)
	s.Submit([]PutRequest{{Msg: msg("t", 0, "warm"), Done: AnswerFunc(func(PutResult) {})}}) // creates the segment (which fsyncs)
	require.Eventually(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.held) == 1 }, 10*time.Second, time.Millisecond)

	fsyncs.block()
	const n = 20
	answers := make(chan PutResult, n)
	for i := range n {
		s.Submit([]PutRequest{{Msg: msg("t", 0, seqBodies("m", i, i+1)[0]), Done: AnswerFunc(func(r PutResult) { answers <- r })}})
	}
	require.Empty(t, answers, "waiting for their fsync")
	demote(t, s, g)
	refused := s.Put(t.Context(), msg("t", 0, "after"))
	require.Equal(t, PutServiceNotAvailable, refused.Status, refused.Remark)
	fsyncs.release()
	for range n {
		r := <-answers
		require.Equal(t, PutFlushSlaveTimeout, r.Status, "a put answered after its master's gate was removed: %s", r.Remark)
		require.True(t, r.Stored())
	}
}

// TestGate_AsyncPutRacingDemotion: an async put whose master is demoted
// between its append and its answer (here, from the arrival listener its
// own inline dispatch calls) is never answered PutOK.
func TestGate_AsyncPutRacingDemotion(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), testOpts())
	defer s.Close()
	var g atomic.Pointer[holdingGate]
	var pending atomic.Bool
	s.Subscribe(func(string, int32, int64, int64, []byte) {
		if pending.CompareAndSwap(true, false) {
			demote(t, s, g.Load())
		}
	})
	inline := 0
	for i := range 20 {
		g.Store(&holdingGate{})
		require.NoError(t, s.SetReplica(false))
		s.SetReplicaGate(g.Load())
		waitDispatched(t, s)
		before := s.inlineDispatches.Load()
		pending.Store(true)
		answer := make(chan PutResult, 1)
		s.Submit([]PutRequest{{Msg: msg("t", 0, seqBodies("m", i, i+1)[0]), Done: AnswerFunc(func(r PutResult) { answer <- r })}})
		if s.inlineDispatches.Load() > before {
			inline++
		}
		r := <-answer
		require.Equal(t, PutFlushSlaveTimeout, r.Status, "put %d: %s", i, r.Remark)
	}
	require.Positive(t, inline, "no put dispatched its own record: the race was never run")
}

// TestGate_Required: a store that needs a gate takes no put without one
// (a retryable refusal), holds puts at the gate once set, and answers a
// put stored under a gate since removed FLUSH_SLAVE_TIMEOUT. NoWait puts
// are answered once written, as RocketMQ's WAIT=false.
func TestGate_Required(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), testOpts())
	defer s.Close()
	mustPut(t, s, msg("t", 0, "no gate needed"))
	s.RequireReplicaGate()
	r := s.Put(t.Context(), msg("t", 0, "no gate"))
	require.Equal(t, PutServiceNotAvailable, r.Status)
	require.Contains(t, r.Remark, "not replicating")

	g := &holdingGate{}
	s.SetReplicaGate(g)
	answer := make(chan PutResult, 1)
	s.Submit([]PutRequest{{Msg: msg("t", 0, "held"), Done: AnswerFunc(func(r PutResult) { answer <- r })}})
	require.Empty(t, answer, "held at the gate")
	nowait := submit(s, PutRequest{Msg: msg("t", 0, "no wait"), NoWait: true})[0]
	require.Equal(t, PutOK, nowait.Status)

	s.SetReplicaGate(nil) // NB: the need stays
	r = s.Put(t.Context(), msg("t", 0, "gate removed"))
	require.Equal(t, PutServiceNotAvailable, r.Status)
	g.Close()
	require.Equal(t, PutFlushSlaveTimeout, (<-answer).Status)
}

// TestReplica_RefusesResend: a replica refuses a producer's resend of a
// message its window holds, as it refuses any send, instead of answering
// it as a duplicate; so does a closed store.
func TestReplica_RefusesResend(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), dedupOpts(time.Hour, 1000, nil))
	first := send(t, s, keyed("t", 0, "a", "K1"))
	require.NoError(t, s.SetReplica(true))
	r := s.putWait(t.Context(), PutRequest{Msg: keyed("t", 0, "a", "K1"), Dedup: true})
	require.Equal(t, PutServiceNotAvailable, r.Status, "answered as %+v", r)
	require.Zero(t, r.Duplicates)

	require.NoError(t, s.SetReplica(false))
	dup := s.putWait(t.Context(), PutRequest{Msg: keyed("t", 0, "a", "K1"), Dedup: true})
	require.Equal(t, 1, dup.Duplicates, "a master still answers it from its window")
	require.Equal(t, first.Pos, dup.Pos)
	require.NoError(t, s.Close())
	r = s.putWait(t.Context(), PutRequest{Msg: keyed("t", 0, "a", "K1"), Dedup: true})
	require.Equal(t, PutServiceNotAvailable, r.Status)
}
