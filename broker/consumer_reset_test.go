package broker

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// TestBroker_ResetOffset: INVOKE_BROKER_TO_RESET_OFFSET moves the group's
// offsets (to the end with timestamp -1; backwards only without isForce),
// answers the new table, and refuses an unknown topic.
func TestBroker_ResetOffset(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeMsgpack)
	for range 5 {
		mustSend(t, c, b.Addr(), "rs", 0, "m", nil)
	}
	waitIndexed(t, b)
	reset := func(ts int64, force bool) (int16, map[protocol.MessageQueue]int64) {
		resp := invoke(t, c, b.Addr(), protocol.InvokeBrokerToResetOffset,
			&protocol.ResetOffsetRequestHeader{Topic: "rs", Group: "g", Timestamp: ts, IsForce: force}, nil)
		if resp.Code != protocol.Success {
			return resp.Code, nil
		}
		var body protocol.ResetOffsetBody
		require.NoError(t, json.Unmarshal(resp.Body, &body))
		return resp.Code, body.OffsetTable
	}
	q0 := protocol.MessageQueue{Topic: "rs", BrokerName: b.cfg.BrokerName, QueueID: 0}
	code, table := reset(-1, true)
	require.Equal(t, int16(protocol.Success), code)
	require.Equal(t, int64(5), table[q0], "timestamp -1: the end")
	off, ok := b.offsets.Query("g", "rs", 0)
	require.True(t, ok)
	require.Equal(t, int64(5), off)

	_, table = reset(0, true)
	require.Equal(t, int64(0), table[q0], "back to the first message")
	_, table = reset(-1, false)
	require.Equal(t, int64(0), table[q0], "without isForce, never forward")

	code, _ = reset(0, true)
	require.Equal(t, int16(protocol.Success), code)
	resp := invoke(t, c, b.Addr(), protocol.InvokeBrokerToResetOffset,
		&protocol.ResetOffsetRequestHeader{Topic: "nope", Group: "g", Timestamp: 0, IsForce: true}, nil)
	require.Equal(t, int16(protocol.TopicNotExist), resp.Code)

	// A group name no client can use is refused, and leaves no offsets.
	for _, g := range []string{"a b", "g\nx", strings.Repeat("g", 300), ""} {
		resp = invoke(t, c, b.Addr(), protocol.InvokeBrokerToResetOffset,
			&protocol.ResetOffsetRequestHeader{Topic: "rs", Group: g, Timestamp: 0, IsForce: true}, nil)
		require.Equal(t, int16(protocol.SystemError), resp.Code, "%q", g)
		require.Contains(t, resp.Remark, "bad group name")
		_, ok := b.offsets.Query(g, "rs", 0)
		require.False(t, ok, "%q", g)
	}
}
