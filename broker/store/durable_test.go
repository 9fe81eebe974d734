package store

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/commitlog"
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
	r := s.PutNoWait(msg("t", 0, "pending"))
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
