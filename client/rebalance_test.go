package client

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// routeChangeOpts are consumer options whose rebalance timer and full
// route refresh never fire during a test: a rebalance it sees comes from
// the default refresh of the subscribed topics' routes finding a change
// (or a member joining or leaving, which these tests do not do once
// balanced).
func routeChangeOpts(name string) []Option {
	return []Option{WithInstanceName(name), WithRebalanceInterval(time.Hour), WithRouteRefreshInterval(time.Hour)}
}

// TestPushConsumer_RebalanceOnQueuesAdded: a topic grown from 4 to 8
// queues is shared anew by the group as soon as its route refresh sees it,
// not at the next rebalance round.
func TestPushConsumer_RebalanceOnQueuesAdded(t *testing.T) {
	c := newCluster(t, 1)
	topic := "grow"
	c.createTopic(topic, 4)
	rec := newRecorder()
	c1 := c.pushConsumer("g-grow", topic, rec.handler("c1"), routeChangeOpts("c1")...)
	c2 := c.pushConsumer("g-grow", topic, rec.handler("c2"), routeChangeOpts("c2")...)
	waitBalanced(t, topic, 4, c1, c2)

	require.NoError(t, c.admin().CreateTopic(ctxT(t, 10*time.Second), TopicSpec{Topic: topic, ReadQueues: 8, WriteQueues: 8}))
	waitBalanced(t, topic, 8, c1, c2)
}

// TestPushConsumer_RebalanceOnBrokerChange: when a broker group starts
// serving the topic, the group takes its queues; when it goes, the
// queues of the brokers left are shared anew.
func TestPushConsumer_RebalanceOnBrokerChange(t *testing.T) {
	c := newCluster(t, 1)
	topic := "brokers"
	c.createTopic(topic, 4)
	rec := newRecorder()
	c1 := c.pushConsumer("g-brokers", topic, rec.handler("c1"), routeChangeOpts("c1")...)
	c2 := c.pushConsumer("g-brokers", topic, rec.handler("c2"), routeChangeOpts("c2")...)
	waitBalanced(t, topic, 4, c1, c2)

	b := c.addBroker("broker-b")
	require.NoError(t, c.admin().CreateTopic(ctxT(t, 10*time.Second),
		TopicSpec{Topic: topic, ReadQueues: 4, WriteQueues: 4, BrokerAddr: b.Addr()}))
	waitBalanced(t, topic, 8, c1, c2)
	// Averagely over broker-a's and broker-b's sorted queues: c1 gets
	// broker-a's, c2 broker-b's.
	require.Equal(t, "broker-b", owned(c2, topic)[0].BrokerName)

	require.NoError(t, b.Close())
	waitBalanced(t, topic, 4, c1, c2)
	for _, pc := range []*PushConsumer{c1, c2} {
		for _, q := range owned(pc, topic) {
			require.Equal(t, "broker-a", q.BrokerName, fmt.Sprintf("%s still owns %v", pc.ClientID(), q))
		}
	}
}
