package broker

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/broker/store"
	v5 "github.com/sluicemq/sluice/broker/v5"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// TestV5Send_ConcurrentCallsMerged: concurrent v5 sends, whose puts go to
// the store together (v5Puts), each get their own answer, and every
// message is stored once at its answered offset: enough calls that a
// submitter hands its queue to a goroutine of its own (v5PutRounds).
func TestV5Send_ConcurrentCallsMerged(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeJSON)
	resp := invoke(t, c, b.Addr(), protocol.UpdateAndCreateTopic,
		&protocol.CreateTopicRequestHeader{Topic: "merged", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}, nil)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	g := grpcBackend{b}
	const senders, calls = 32, 40
	type stored struct {
		q   int32
		off int64
	}
	var mu sync.Mutex
	seen := map[stored]string{}
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range calls {
				id := fmt.Sprintf("ID-%d-%d", s, k)
				reqs := []v5.SendRequest{{Msg: message.Message{Topic: "merged", QueueID: -1, Body: []byte(id), BornHost: netip.MustParseAddrPort("127.0.0.1:1"),
					Properties: string(message.AppendProperties(nil, map[string]string{message.PropUniqKey: id}))}}}
				out := g.Send(context.Background(), reqs)
				if out[0].Status.GetCode() != v2.Code_OK {
					errs <- fmt.Errorf("%s: %v", id, out[0].Status)
					return
				}
				mu.Lock()
				key := stored{reqs[0].Msg.QueueID, out[0].QueueOffset}
				if prev, dup := seen[key]; dup {
					mu.Unlock()
					errs <- fmt.Errorf("%s and %s both answered queue %d offset %d", prev, id, key.q, key.off)
					return
				}
				seen[key] = id
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, seen, senders*calls)
	// NB: an answer says stored, not dispatched: the queues' offsets move
	// once the dispatcher has indexed (a CI run read 499 of 1,280).
	waitIndexed(t, b)
	require.Equal(t, int64(senders*calls), b.store.MaxOffset("merged", 0)+b.store.MaxOffset("merged", 1))
	for key, id := range seen {
		rec, err := b.readAt(context.Background(), "merged", key.q, key.off)
		require.NoError(t, err)
		require.Equal(t, id, string(rec.Body), "queue %d offset %d", key.q, key.off)
	}
}

// TestV5Puts_HandOff: a submitter out of rounds leaves the pending puts
// and the busy mark to the goroutine it starts, which stores them all and
// clears the mark.
func TestV5Puts_HandOff(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeJSON)
	resp := invoke(t, c, b.Addr(), protocol.UpdateAndCreateTopic,
		&protocol.CreateTopicRequestHeader{Topic: "handoff", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}, nil)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	var v v5Puts
	answers := make(chan store.PutResult, 3)
	for i := range 3 {
		m := &message.Message{Topic: "handoff", Body: []byte{byte('a' + i)}, BornHost: netip.MustParseAddrPort("127.0.0.1:1"),
			StoreHost: netip.MustParseAddrPort("127.0.0.1:2")}
		v.pending = append(v.pending, store.PutRequest{Msg: m, Done: store.AnswerFunc(func(r store.PutResult) { answers <- r })})
	}
	v.busy = true
	require.False(t, v.drain(b.store, 0), "no round left: still busy")
	require.Len(t, v.pending, 3)
	require.True(t, v.drain(b.store, -1))
	for range 3 {
		require.True(t, (<-answers).Stored())
	}
	require.False(t, v.busy)
	require.Empty(t, v.pending)
	waitIndexed(t, b) // NB: answered means stored, not yet dispatched
	require.Equal(t, int64(3), b.store.MaxOffset("handoff", 0))
}
