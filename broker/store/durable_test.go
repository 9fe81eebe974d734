package store

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/stretchr/testify/require"
)

// gatedFile blocks commitlog fsyncs while the gate is closed.
type gatedFile struct {
	commitlog.File
	g *gate
}

type gate struct {
	mu   sync.Mutex
	open chan struct{} // closed when syncs may proceed
}

func newGate() *gate {
	g := &gate{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *gate) block() {
	g.mu.Lock()
	g.open = make(chan struct{})
	g.mu.Unlock()
}

func (g *gate) release() {
	g.mu.Lock()
	close(g.open)
	g.mu.Unlock()
}

func (f gatedFile) Sync() error {
	f.g.mu.Lock()
	ch := f.g.open
	f.g.mu.Unlock()
	<-ch
	return f.File.Sync()
}

// TestStore_SyncModeIndexesOnlyDurable: in sync flush mode a message is not
// visible to consumers until the fsync covering it has completed.
func TestStore_SyncModeIndexesOnlyDurable(t *testing.T) {
	g := newGate()
	c := testConf(t.TempDir())
	c.Flush = "sync"
	o := testOpts()
	o.OpenFile = func(path string, flag int, perm os.FileMode) (commitlog.File, error) {
		f, err := commitlog.OSOpenFile(path, flag, perm)
		return gatedFile{f, g}, err
	}
	s := mustOpen(t, c, o)
	defer s.Close()
	mustPut(t, s, msg("t", 0, "durable"))
	waitDispatched(t, s)
	g.block()
	r := submit(s, PutRequest{Msg: msg("t", 0, "pending"), NoWait: true})[0]
	require.Equal(t, PutOK, r.Status)
	// Wake the flusher; its fsync now blocks at the gate.
	go s.log.Sync(t.Context())
	time.Sleep(50 * time.Millisecond)
	require.Equal(t, []string{"durable"}, bodies(t, get(t, s, "t", 0, 0, 32).Body), "not durable, not visible")
	require.Greater(t, s.DispatchLag(), int64(0))
	g.release()
	waitDispatched(t, s)
	require.Equal(t, []string{"durable", "pending"}, bodies(t, get(t, s, "t", 0, 0, 32).Body))
}

// TestStore_SubmitDurable: in sync mode Submit answers a message or a batch
// only once the put is on disk,
// FLUSH_DISK_TIMEOUT after the sync flush timeout, and Close answers
// whatever still waits; in async mode it answers at once.
func TestStore_SubmitDurable(t *testing.T) {
	g := newGate()
	c := testConf(t.TempDir())
	c.Flush = "sync"
	c.SyncFlushTimeout = 300 * time.Millisecond
	o := testOpts()
	o.OpenFile = func(path string, flag int, perm os.FileMode) (commitlog.File, error) {
		f, err := commitlog.OSOpenFile(path, flag, perm)
		return gatedFile{f, g}, err
	}
	s := mustOpen(t, c, o)
	answers := make(chan PutResult, 4)
	done := func(r PutResult) { answers <- r }
	putThen := func(m *message.Message) {
		s.Submit([]PutRequest{{Msg: m, Done: AnswerFunc(done)}})
	}
	mustPut(t, s, msg("t", 0, "warm")) // creates the segment (which fsyncs)

	// Durable: answered after the fsync, with the put's position.
	g.block()
	putThen(msg("t", 0, "a"))
	select {
	case r := <-answers:
		t.Fatalf("answered before the fsync: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
	g.release()
	r := <-answers
	require.Equal(t, PutOK, r.Status, r.Remark)
	require.Equal(t, int64(1), r.QueueOffset)
	require.GreaterOrEqual(t, s.log.Durable(), commitlog.Offset(r.Pos+int64(r.Size)))

	// Not durable within the timeout: FLUSH_DISK_TIMEOUT, stored all the same.
	g.block()
	s.Submit([]PutRequest{{Batch: &Batch{Template: *msg("t", 0, ""), Items: []message.BatchItem{{Body: []byte("b")}}}, Done: AnswerFunc(done)}})
	r = <-answers
	require.Equal(t, PutFlushDiskTimeout, r.Status)
	require.Contains(t, r.Remark, "not flushed to disk within")
	require.Equal(t, int64(2), r.QueueOffset)

	// Close answers a waiter once the gate opens and the final sync ends.
	putThen(msg("t", 0, "c"))
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	time.Sleep(20 * time.Millisecond)
	g.release()
	require.NoError(t, <-closed)
	r = <-answers
	require.Equal(t, PutOK, r.Status, "Close synced it: %s", r.Remark)
	require.Equal(t, int64(3), r.QueueOffset)

	// Async mode: answered before Submit returns.
	c.Flush = "async"
	s = mustOpen(t, c, testOpts())
	defer s.Close()
	putThen(msg("t", 0, "d"))
	require.Len(t, answers, 1)
	require.Equal(t, PutOK, (<-answers).Status)
}

// TestStore_WarmAheadInSyncModeOnly: the commitlog keeps zeros written ahead
// of the appends only when sends wait for fsyncs; in async mode it would
// double the writes for nothing.
func TestStore_WarmAheadInSyncModeOnly(t *testing.T) {
	for flush, want := range map[string]int64{"async": 0, "sync": 16 << 20} {
		c := testConf(t.TempDir())
		c.Flush = flush
		s := &Store{cfg: c}
		require.Equal(t, want, s.logOptions().WarmAhead, flush)
	}
}
