package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// sendLoad keeps senders sending to addr until stop, and records every
// send answered SUCCESS: its body by its commitlog position.
type sendLoad struct {
	mu      sync.Mutex
	acked   map[int64]string
	refused map[int16]int // other answers, by code
	stop    chan struct{}
	wg      sync.WaitGroup
}

func startSendLoad(t *testing.T, addr string, senders int) *sendLoad {
	c := newClient(t, remoting.SerializeJSON)
	l := &sendLoad{acked: map[int64]string{}, refused: map[int16]int{}, stop: make(chan struct{})}
	for w := range senders {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				body := fmt.Sprintf("w%d-%d", w, i)
				h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "t", DefaultTopic: "TBW102",
					DefaultTopicQueueNums: 4, QueueID: int32(w % 4), BornTimestamp: time.Now().UnixMilli()}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				resp, err := c.Invoke(ctx, addr, remoting.NewRequest(protocol.SendMessage, protocol.Ext(h), []byte(body)))
				cancel()
				if err != nil {
					continue // NB: the server is gone; until stop
				}
				l.mu.Lock()
				if resp.Code == protocol.Success {
					var rh protocol.SendMessageResponseHeader
					if err := rh.FromExt(resp.ExtFields); err == nil {
						if _, pos, err := message.ParseOffsetMsgID(rh.MsgID); err == nil {
							l.acked[pos] = body
						}
					}
				} else {
					l.refused[resp.Code]++
				}
				l.mu.Unlock()
			}
		}()
	}
	t.Cleanup(l.end)
	return l
}

func (l *sendLoad) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

func (l *sendLoad) end() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// requireOnReplica checks that every send l saw acknowledged is in the
// replica's log, at the position its answer gave.
func requireOnReplica(t *testing.T, l *sendLoad, replica *commitlog.Log) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	buf := make([]byte, 4<<10)
	missing := 0
	for pos, body := range l.acked {
		if pos >= int64(replica.Next()) {
			missing++
			continue
		}
		n, _ := replica.ReadAt(buf, commitlog.Offset(pos))
		r, err := message.Decode(buf[:n])
		require.NoError(t, err, "at %d", pos)
		require.Equal(t, body, string(r.Body), "at %d", pos)
	}
	require.Zero(t, missing, "of %d acknowledged sends, %d are not on the replica (%v refused)", len(l.acked), missing, l.refused)
}

// TestHandover_ControllerModeClose: a controller-mode master closed under
// concurrent sends acknowledges none that its SyncStateSet lacks: from
// the handover on, it refuses them (retryable) until its server stops.
func TestHandover_ControllerModeClose(t *testing.T) {
	_, bs := startCtlGroup(t, nil)
	m := waitGroup(t, bs...)
	require.Eventually(t, func() bool { ss := m.ctl.syncSet.Load(); return ss != nil && len(ss.ids) == 3 }, 20*time.Second, 10*time.Millisecond)
	load := startSendLoad(t, m.Addr(), 8)
	require.Eventually(t, func() bool { return load.ackedCount() >= 200 }, 20*time.Second, time.Millisecond)
	require.NoError(t, m.Close())
	load.end()
	for _, b := range bs {
		if b != m {
			requireOnReplica(t, load, b.Store().Log())
		}
	}
	t.Logf("%d acknowledged, refused by code: %v", len(load.acked), load.refused)
}

// TestHandover_SyncMasterClose: so does a SYNC_MASTER with its slave: a
// send it acknowledged while closing is on the slave.
func TestHandover_SyncMasterClose(t *testing.T) {
	ns := startNamesrv(t, "127.0.0.1:0")
	mc, sc := groupConfigs(t, ns.Addr(), conf.RoleSyncMaster)
	master := startBroker(t, mc, Options{})
	slave := startBroker(t, sc, Options{})
	require.Eventually(t, func() bool {
		st := master.repl.master.Load().Status()
		return len(st.Slaves) == 1 && st.Acked == int64(master.Store().Log().Next())
	}, 10*time.Second, time.Millisecond)
	load := startSendLoad(t, master.Addr(), 8)
	require.Eventually(t, func() bool { return load.ackedCount() >= 200 }, 20*time.Second, time.Millisecond)
	require.NoError(t, master.Close())
	load.end()
	requireOnReplica(t, load, slave.Store().Log())
	t.Logf("%d acknowledged, refused by code: %v", len(load.acked), load.refused)
}
