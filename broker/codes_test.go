package broker

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/store"
	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/stretchr/testify/require"
)

// fsyncGate holds the commitlog's fsyncs while closed.
type fsyncGate struct {
	mu   sync.Mutex
	open chan struct{}
}

func newFsyncGate() *fsyncGate {
	g := &fsyncGate{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *fsyncGate) hold() { g.mu.Lock(); g.open = make(chan struct{}); g.mu.Unlock() }

func (g *fsyncGate) release() { g.mu.Lock(); close(g.open); g.mu.Unlock() }

func (g *fsyncGate) wait() {
	g.mu.Lock()
	ch := g.open
	g.mu.Unlock()
	<-ch
}

type gatedFile struct {
	commitlog.File
	g *fsyncGate
}

func (f gatedFile) Sync() error { f.g.wait(); return f.File.Sync() }

// TestBroker_StoredButSlowIsNotAFailure: in sync flush mode, a put that is
// stored but not flushed within the sync flush timeout is answered as
// RocketMQ does: FLUSH_DISK_TIMEOUT (10) with the message's ids for a send,
// SUCCESS for a send-back and an end-transaction commit (their message is
// stored; a failure would make the client ask again and store it twice).
// Once the disk catches up, each message is there exactly once.
func TestBroker_StoredButSlowIsNotAFailure(t *testing.T) {
	g := newFsyncGate()
	c := testConfig(t.TempDir())
	c.Store.Flush = "sync"
	c.Store.SyncFlushTimeout = 200 * time.Millisecond
	opts := Options{}
	opts.Store.OpenFile = func(path string, flag int, perm os.FileMode) (commitlog.File, error) {
		f, err := commitlog.OSOpenFile(path, flag, perm)
		return gatedFile{f, g}, err
	}
	b := startBroker(t, c, opts)
	cl := newClient(t, remoting.SerializeJSON)
	sent := mustSend(t, cl, b.Addr(), "t", 0, "fragile", map[string]string{message.PropUniqKey: "U1"})
	_, pos, err := message.ParseOffsetMsgID(sent.MsgID)
	require.NoError(t, err)
	mustSend(t, cl, b.Addr(), "orders", 1, "plain", nil)
	half, halfPos := sendHalf(t, cl, b, "commit-me")

	g.hold()
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(g.release) }
	t.Cleanup(release) // never leave the flusher blocked
	resp := send(t, cl, b.Addr(), "t", 0, "slow", nil)
	require.Equal(t, protocol.FlushDiskTimeout, int(resp.Code), resp.Remark)
	var sh protocol.SendMessageResponseHeader
	require.NoError(t, sh.FromExt(resp.ExtFields))
	require.NotEmpty(t, sh.MsgID, "a stored send carries its ids")

	back := &protocol.ConsumerSendMsgBackRequestHeader{Offset: pos, Group: "cg", DelayLevel: -1, OriginMsgID: sent.MsgID, OriginTopic: "t"}
	resp = invoke(t, cl, b.Addr(), protocol.ConsumerSendMsgBack, back, nil)
	require.Equal(t, protocol.Success, int(resp.Code), "send-back stored but slow: %s", resp.Remark)
	endTx(t, cl, b, half, halfPos, message.TxCommit)

	release()
	require.Eventually(t, func() bool { return len(pullAll(t, cl, b, "%DLQ%cg", 0)) == 1 }, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return len(pullAll(t, cl, b, "orders", 1)) == 2 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, []string{"plain", "commit-me"}, recordBodiesOf(pullAll(t, cl, b, "orders", 1)))
	require.Equal(t, []string{"fragile", "slow"}, recordBodiesOf(pullAll(t, cl, b, "t", 0)))
}

// TestCodes_Table pins the one table from store outcomes to wire codes.
func TestCodes_Table(t *testing.T) {
	for _, tc := range []struct {
		status store.PutStatus
		kind   putKind
		want   int16
	}{
		{store.PutOK, putSend, protocol.Success},
		{store.PutOK, putInternal, protocol.Success},
		{store.PutFlushDiskTimeout, putSend, protocol.FlushDiskTimeout},
		{store.PutFlushDiskTimeout, putInternal, protocol.Success},
		{store.PutFlushSlaveTimeout, putSend, protocol.FlushSlaveTimeout},
		{store.PutFlushSlaveTimeout, putInternal, protocol.Success},
		{store.PutSlaveNotAvailable, putSend, protocol.SlaveNotAvailable},
		{store.PutSlaveNotAvailable, putInternal, protocol.Success},
		{store.PutMessageIllegal, putSend, protocol.MessageIllegal},
		{store.PutMessageIllegal, putInternal, protocol.MessageIllegal},
		{store.PutServiceNotAvailable, putSend, protocol.ServiceNotAvailable},
		{store.PutServiceNotAvailable, putInternal, protocol.ServiceNotAvailable},
		{store.PutStatus(99), putSend, protocol.SystemError},
		{store.PutOK, putSendBack, protocol.Success},
		{store.PutFlushDiskTimeout, putSendBack, protocol.Success},
		{store.PutFlushSlaveTimeout, putSendBack, protocol.SystemError},
		{store.PutSlaveNotAvailable, putSendBack, protocol.SystemError},
		{store.PutInSyncReplicasNotEnough, putSendBack, protocol.SystemError},
		{store.PutServiceNotAvailable, putSendBack, protocol.ServiceNotAvailable},
	} {
		code, remark := putCode(store.PutResult{Status: tc.status, Remark: "why"}, tc.kind)
		require.Equal(t, tc.want, code, "%v kind %d", tc.status, tc.kind)
		if code != protocol.Success {
			require.Contains(t, remark, "why")
		}
	}
	require.Equal(t, int16(protocol.ServiceNotAvailable), storeErrCode(fmt.Errorf("read: %w", store.ErrClosed)))
	require.Equal(t, int16(protocol.ServiceNotAvailable), storeErrCode(commitlog.ErrClosed))
	require.Equal(t, int16(protocol.SystemError), storeErrCode(commitlog.ErrOffsetRemoved))
}

// TestBroker_SendBackNotReplicatedIsNotSuccess: a SYNC_MASTER with no slave
// stores a send-back but cannot replicate it: the consumer is told to send
// it back again (SYSTEM_ERROR naming why), not SUCCESS, on which it would
// move on from a message a failover can then lose.
func TestBroker_SendBackNotReplicatedIsNotSuccess(t *testing.T) {
	ns := startNamesrv(t, "127.0.0.1:0")
	mc, _ := groupConfigs(t, ns.Addr(), conf.RoleSyncMaster)
	b := startBroker(t, mc, Options{})
	cl := newClient(t, remoting.SerializeJSON)
	resp := send(t, cl, b.Addr(), "t", 0, "to-retry", nil)
	require.Equal(t, protocol.SlaveNotAvailable, int(resp.Code), resp.Remark)
	var sh protocol.SendMessageResponseHeader
	require.NoError(t, sh.FromExt(resp.ExtFields))
	_, pos, err := message.ParseOffsetMsgID(sh.MsgID)
	require.NoError(t, err)
	back := &protocol.ConsumerSendMsgBackRequestHeader{Offset: pos, Group: "cg", DelayLevel: 1, OriginMsgID: sh.MsgID, OriginTopic: "t"}
	resp = invoke(t, cl, b.Addr(), protocol.ConsumerSendMsgBack, back, nil)
	require.Equal(t, protocol.SystemError, int(resp.Code), resp.Remark)
	require.Contains(t, resp.Remark, "not on its replicas")
}
