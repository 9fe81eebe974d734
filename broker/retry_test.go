package broker

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/stretchr/testify/require"
)

// TestSendBack_NegativeReconsumeTimes: a message a producer sent with a
// negative reconsumeTimes, sent back without a delay level, goes to the
// retry topic at once, as Java's broker does with a level below 1. (The
// broker used to store it in queue 3+reconsumeTimes-1 of the delay topic,
// -98 here, and the dispatcher then retried that record forever: every
// consume queue stalled. FuzzBrokerRequests checks the dispatcher after
// each request.)
func TestSendBack_NegativeReconsumeTimes(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeJSON)
	sh := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "t", QueueID: 0, ReconsumeTimes: -100,
		BornTimestamp: time.Now().UnixMilli()}
	resp := invoke(t, c, b.Addr(), protocol.SendMessage, sh, []byte("hostile"))
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	var h protocol.SendMessageResponseHeader
	require.NoError(t, h.FromExt(resp.ExtFields))
	_, pos, err := message.ParseOffsetMsgID(h.MsgID)
	require.NoError(t, err)
	back := &protocol.ConsumerSendMsgBackRequestHeader{Offset: pos, Group: "cg"}
	resp = invoke(t, c, b.Addr(), protocol.ConsumerSendMsgBack, back, nil)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	waitIndexed(t, b)
	retry := pullAll(t, c, b, "%RETRY%cg", 0)
	require.Len(t, retry, 1, "in the retry topic at once")
	require.Equal(t, "hostile", string(retry[0].Body))
	mustSend(t, c, b.Addr(), "t", 0, "after", nil)
	waitIndexed(t, b)
	require.Zero(t, b.Store().DispatchRetries())
	require.Len(t, pullAll(t, c, b, "t", 0), 2, "the topic's queue goes on")
}
