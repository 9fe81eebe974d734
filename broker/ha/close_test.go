package ha

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/broker/store"
)

// TestGate_HoldAfterClose: a closing master answers the puts it holds
// FLUSH_SLAVE_TIMEOUT, and so, at once, a put handed to it after Close (a
// store that loaded the gate just before removing it): never PutOK, never
// left unanswered.
func TestGate_HoldAfterClose(t *testing.T) {
	master := openLog(t, t.TempDir())
	appendRecords(t, master, rand.New(rand.NewPCG(21, 22)), 3)
	m := startMaster(t, master, MasterOptions{SyncTimeout: time.Minute,
		Epoch:  func() int32 { return 1 },
		InSync: func() InSyncRule { return InSyncRule{Slaves: []int64{1}, AllAck: true, MinReplicas: 1} }})
	end := int64(master.Next())
	hold := func() chan store.PutResult {
		ch := make(chan store.PutResult, 1)
		m.Hold(end, store.PutResult{Status: store.PutOK}, store.AnswerFunc(func(res store.PutResult) { ch <- res }))
		return ch
	}
	answered := func(ch chan store.PutResult) store.PutResult {
		t.Helper()
		select {
		case res := <-ch:
			return res
		case <-time.After(10 * time.Second):
			t.Fatal("a held put was never answered")
			return store.PutResult{}
		}
	}
	held := hold()
	require.Empty(t, held, "no slave confirmed it")
	m.Close()
	res := answered(held)
	require.Equal(t, store.PutFlushSlaveTimeout, res.Status)
	require.Contains(t, res.Remark, "stopped replicating")
	res = answered(hold())
	require.Equal(t, store.PutFlushSlaveTimeout, res.Status, res.Remark)
}

// TestGate_DrainBeforeClose: Drain waits for the slaves to confirm the
// puts held (a closing master's sends answered SUCCESS where the slaves
// have them), and gives up after its timeout.
func TestGate_DrainBeforeClose(t *testing.T) {
	master := openLog(t, t.TempDir())
	appendRecords(t, master, rand.New(rand.NewPCG(23, 24)), 3)
	m := startMaster(t, master, MasterOptions{SyncTimeout: time.Minute})
	report, closeSlave := fakeSlave(t, m, 0)
	defer closeSlave()
	require.Eventually(t, func() bool { st := m.Status(); return len(st.Slaves) == 1 && st.Slaves[0].Acked == 0 }, 5*time.Second, time.Millisecond)
	end := int64(master.Next())
	ch := make(chan store.PutResult, 2)
	for range 2 {
		m.Hold(end, store.PutResult{Status: store.PutOK}, store.AnswerFunc(func(res store.PutResult) { ch <- res }))
	}
	require.False(t, m.Drain(time.Millisecond), "nothing confirmed")
	drained := make(chan bool, 1)
	go func() { drained <- m.Drain(time.Minute) }()
	report(end)
	require.True(t, <-drained)
	for range 2 {
		require.Equal(t, store.PutOK, (<-ch).Status)
	}
	require.True(t, m.Drain(0), "none held")
}
