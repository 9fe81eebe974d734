package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/nameserver"
)

func TestOrderQueues(t *testing.T) {
	q := func(b string, id int) MessageQueue { return MessageQueue{Topic: "t", BrokerName: b, QueueID: id} }
	require.Equal(t, []MessageQueue{q("a", 0), q("a", 1), q("b", 0)}, orderQueues("t", "a:2;b:1"))
	require.Equal(t, []MessageQueue{q("b", 0)}, orderQueues("t", " :3;a;a:x;a:0;a:2000; b:1 ;"), "bad entries skipped")
	require.Nil(t, orderQueues("t", ""))
}

// TestOrderedTopic_SendsToOrderConfQueues: with the nameserver's
// order_message_enable, a topic's ORDER_TOPIC_CONFIG entry is its list of
// write queues, a down broker's included: a send to such a queue fails
// (its key keeps its queue) instead of going elsewhere.
func TestOrderedTopic_SendsToOrderConfQueues(t *testing.T) {
	ncfg := conf.DefaultNameserver()
	ncfg.Listen = "127.0.0.1:0"
	ncfg.OrderMessageEnable = true
	ns, err := nameserver.New(ncfg, quiet())
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	t.Cleanup(func() { ns.Close() })
	c := &cluster{t: t, ns: ns}
	c.addBroker("broker-a")
	c.createTopic("ord", 4)

	// NB: listed out of alphabetical order: the client keeps the config's
	// order, as the official client does, so both put a key on one queue.
	resp := adminCall(t, ns.Addr(), protocol.PutKVConfig, &protocol.KVConfigRequestHeader{
		Namespace: protocol.OrderTopicConfigNamespace, Key: "ord", Value: "broker-z:2;broker-a:2"})
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)

	p := c.producer(WithQueueSelector(ManualSelector()), WithRetries(0))
	want := []MessageQueue{{Topic: "ord", BrokerName: "broker-z", QueueID: 0}, {Topic: "ord", BrokerName: "broker-z", QueueID: 1},
		{Topic: "ord", BrokerName: "broker-a", QueueID: 0}, {Topic: "ord", BrokerName: "broker-a", QueueID: 1}}
	require.Eventually(t, func() bool {
		r, err := p.core.routes.refresh(context.Background(), "ord")
		return err == nil && len(r.write) == 4 && r.write[3] == want[3]
	}, 10*time.Second, 20*time.Millisecond)
	r := p.core.routes.cached("ord")
	require.Equal(t, want, r.write, "the order config's queues, not the broker's 4")

	_, err = p.Send(ctxT(t, 10*time.Second), &Message{Topic: "ord", Body: []byte("x"), Queue: want[3]})
	require.NoError(t, err)
	_, err = p.Send(ctxT(t, 10*time.Second), &Message{Topic: "ord", Body: []byte("x"), Queue: want[0]})
	require.ErrorIs(t, err, ErrNoRoute)
	require.Contains(t, err.Error(), "broker broker-z of queue")
	require.Contains(t, err.Error(), "has no master (an ordered topic keeps its queues meanwhile)")
	// Queue 2 of broker-a exists on the broker but not in the order config.
	_, err = p.Send(ctxT(t, 10*time.Second), &Message{Topic: "ord", Body: []byte("x"),
		Queue: MessageQueue{Topic: "ord", BrokerName: "broker-a", QueueID: 2}})
	require.ErrorIs(t, err, ErrNoRoute)
}
