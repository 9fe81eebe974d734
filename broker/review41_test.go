package broker

import (
	"context"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"

	v5 "github.com/sluicemq/sluice/broker/v5"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// TestDeleteSubGroup_ForgetsPOPState: deleting a subscription group
// forgets its RocketMQ 5 (POP) state with its offsets: nothing of it stays
// in the POP table (which would be kept, and saved, for ever), its
// handles no longer ack, and so no late ack commits its offsets again;
// another group's state stays.
func TestDeleteSubGroup_ForgetsPOPState(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeJSON)
	for _, g := range []string{"gone", "kept"} {
		body, err := remoting.EncodeBody(remoting.SerializeJSON, protocol.DefaultSubscriptionGroupConfig(g))
		require.NoError(t, err)
		resp := invoke(t, c, b.Addr(), protocol.UpdateAndCreateSubscriptionGroup, nil, body)
		require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	}
	mustSend(t, c, b.Addr(), "t", 0, "a", nil)
	mustSend(t, c, b.Addr(), "t", 0, "b", nil)
	waitIndexed(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pop := func(g string) []v5.Popped {
		got, st := grpcBackend{b}.Pop(ctx, v5.PopRequest{Group: g, Topic: "t", Queue: 0, Max: 1, Invisible: time.Minute})
		require.Nil(t, st)
		require.Len(t, got, 1)
		return got
	}
	gone, kept := pop("gone"), pop("kept")
	_, ok := b.pop.Committed("gone", "t", 0)
	require.True(t, ok)

	resp := invoke(t, c, b.Addr(), protocol.DeleteSubscriptionGroup, &protocol.DeleteSubscriptionGroupRequestHeader{GroupName: "gone"}, nil)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	_, ok = b.pop.Committed("gone", "t", 0)
	require.False(t, ok, "the deleted group's POP state is gone")
	st := grpcBackend{b}.Ack("gone", "t", gone[0].Handle)
	require.Equal(t, v2.Code_INVALID_RECEIPT_HANDLE, st.GetCode(), "a deleted group's handle")
	_, ok = b.offsets.Query("gone", "t", 0)
	require.False(t, ok, "no offset committed again for the deleted group")

	require.Nil(t, grpcBackend{b}.Ack("kept", "t", kept[0].Handle))
	off, ok := b.offsets.Query("kept", "t", 0)
	require.True(t, ok)
	require.Equal(t, int64(1), off)
}

// TestEndTransaction_EmptyProducerGroup: END_TRANSACTION checks the
// producer group it names against the half message's even when it names
// none (as before 2045da5, and as Java's broker does): an empty group
// commits nothing.
func TestEndTransaction_EmptyProducerGroup(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeJSON)
	mustSend(t, c, b.Addr(), "orders", 1, "plain", nil) // the topic exists
	half, pos := sendHalf(t, c, b, "not yours")
	resp := invoke(t, c, b.Addr(), protocol.EndTransaction, &protocol.EndTransactionRequestHeader{ProducerGroup: "",
		TranStateTableOffset: half, CommitLogOffset: pos, CommitOrRollback: message.TxCommit}, nil)
	require.Equal(t, protocol.SystemError, int(resp.Code), resp.Remark)
	require.Contains(t, resp.Remark, "producer group")
	waitIndexed(t, b)
	require.Equal(t, []string{"plain"}, recordBodiesOf(pullAll(t, c, b, "orders", 1)), "nothing committed")
	endTx(t, c, b, half, pos, message.TxCommit)
	waitIndexed(t, b)
	require.Equal(t, []string{"plain", "not yours"}, recordBodiesOf(pullAll(t, c, b, "orders", 1)))
}
