package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"

	v5 "github.com/sluicemq/sluice/broker/v5"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// TestResetOffset_POPGroup: mqadmin resetOffset (INVOKE_BROKER_TO_RESET_OFFSET
// by timestamp) applies to a RocketMQ 5 (POP) group. A group that
// received and acked 10 messages receives all 10 again after a reset to
// the start (attempt 1); a forward reset to the end while those are in
// flight skips them: their handles answer INVALID_RECEIPT_HANDLE, no ack
// commits the old position, they are not delivered again once their
// invisible time is over, and only messages sent afterwards come.
// Before the hook in handleResetOffset the receive after the backward
// reset got nothing (the POP table's next offset only moved forward).
func TestResetOffset_POPGroup(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Now().UnixMilli())
	b := startBroker(t, testConfig(t.TempDir()), Options{PopClock: func() time.Time { return time.UnixMilli(clock.Load()) }})
	c := newClient(t, remoting.SerializeJSON)
	for i := range 10 {
		mustSend(t, c, b.Addr(), "rp", 0, fmt.Sprintf("m%d", i), nil)
	}
	waitIndexed(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	be := grpcBackend{b}
	receive := func() []v5.Popped {
		got, st := be.Pop(ctx, v5.PopRequest{Group: "g", Topic: "rp", Queue: 0, Max: 32, Invisible: time.Minute})
		require.Nil(t, st)
		return got
	}
	bodies := func(ps []v5.Popped) []string {
		var out []string
		for _, p := range ps {
			out = append(out, string(p.Rec.Body))
		}
		return out
	}
	want := make([]string, 10)
	for i := range want {
		want[i] = fmt.Sprintf("m%d", i)
	}
	reset := func(ts int64) map[protocol.MessageQueue]int64 {
		resp := invoke(t, c, b.Addr(), protocol.InvokeBrokerToResetOffset,
			&protocol.ResetOffsetRequestHeader{Topic: "rp", Group: "g", Timestamp: ts, IsForce: true}, nil)
		require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
		var body protocol.ResetOffsetBody
		require.NoError(t, json.Unmarshal(resp.Body, &body))
		return body.OffsetTable
	}
	q0 := protocol.MessageQueue{Topic: "rp", BrokerName: b.cfg.BrokerName, QueueID: 0}

	first := receive()
	require.ElementsMatch(t, want, bodies(first))
	for _, p := range first {
		require.Nil(t, be.Ack("g", "rp", p.Handle))
	}
	require.Empty(t, receive(), "all acked")
	off, _ := b.offsets.Query("g", "rp", 0)
	require.Equal(t, int64(10), off)

	// Back to the start, by timestamp as mqadmin resets.
	require.Equal(t, int64(0), reset(0)[q0])
	again := receive()
	require.ElementsMatch(t, want, bodies(again), "all 10 again after the reset")
	for _, p := range again {
		require.Equal(t, int32(1), p.Attempt, "delivered as new")
	}
	off, _ = b.offsets.Query("g", "rp", 0)
	require.Equal(t, int64(0), off, "nothing acked since the reset")

	// Forward to the end while the 10 are in flight.
	require.Equal(t, int64(10), reset(-1)[q0])
	st := be.Ack("g", "rp", again[0].Handle)
	require.Equal(t, v2.Code_INVALID_RECEIPT_HANDLE, st.GetCode(), "a handle from before the reset")
	off, _ = b.offsets.Query("g", "rp", 0)
	require.Equal(t, int64(10), off, "no ack committed the old position over the reset")
	clock.Add((2 * time.Minute).Milliseconds())
	require.Empty(t, receive(), "skipped messages are not delivered again once their invisible time is over")
	mustSend(t, c, b.Addr(), "rp", 0, "after", nil)
	waitIndexed(t, b)
	require.Equal(t, []string{"after"}, bodies(receive()), "only what came after the reset")
}
