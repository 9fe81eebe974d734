package compat

import (
	"fmt"
	"testing"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/require"
)

// TestPullConsumer: Pull takes a batch from the group's start position and
// PullFrom walks the queue by offset, batch by batch, in order.
func TestPullConsumer(t *testing.T) {
	t.Parallel()
	topic := name(t, "topic")
	createTopic(t, topic, 1)
	p := newProducer(t, "producer")
	const total, batch = 20, 8
	var order []sent
	want := map[string]sent{}
	for i := range total {
		id := fmt.Sprintf("pull-%02d", i)
		s := sendSync(t, p, id, newMessage(topic, id, "TagP"))
		require.EqualValues(t, i, s.queueOffset)
		order = append(order, s)
		want[id] = s
	}

	pc, err := rocketmq.NewPullConsumer(append(consumerSecurity(adminCreds),
		consumer.WithNameServer(nameservers),
		consumer.WithGroupName(name(t, "group")),
		consumer.WithInstance(name(t, "pc")),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithPullBatchSize(batch),
	)...)
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}))
	require.NoError(t, pc.Start())
	t.Cleanup(func() { _ = pc.Shutdown() })

	// Pull: the group has no offset yet, so it starts at the first one.
	res, err := pc.Pull(waitContext(t, patience), batch)
	require.NoError(t, err)
	require.Equal(t, primitive.PullFound, res.Status)
	require.EqualValues(t, 0, res.MinOffset)
	require.EqualValues(t, total, res.MaxOffset)
	msgs := res.GetMessageExts()
	require.Len(t, msgs, batch)
	got := 0
	for _, m := range msgs {
		requireDelivered(t, order[got], delivery{msg: m})
		got++
	}
	require.EqualValues(t, got, res.NextBeginOffset)

	// PullFrom: walk the queue from there to the end.
	mqs, err := pc.GetTopicRouteInfo(topic)
	require.NoError(t, err)
	require.Len(t, mqs, 1)
	for got < total {
		res, err := pc.PullFrom(waitContext(t, patience), mqs[0], int64(got), batch)
		require.NoError(t, err)
		require.Equal(t, primitive.PullFound, res.Status, "pull from %d", got)
		msgs := res.GetMessageExts()
		require.NotEmpty(t, msgs)
		require.LessOrEqual(t, len(msgs), batch)
		for _, m := range msgs {
			require.Less(t, got, total, "more messages than were sent")
			requireDelivered(t, order[got], delivery{msg: m})
			got++
		}
		require.EqualValues(t, got, res.NextBeginOffset)
	}

	// Reading again from an offset gives the same records.
	res, err = pc.PullFrom(waitContext(t, patience), mqs[0], 5, 3)
	require.NoError(t, err)
	require.Equal(t, primitive.PullFound, res.Status)
	require.Len(t, res.GetMessageExts(), 3)
	for i, m := range res.GetMessageExts() {
		requireDelivered(t, order[5+i], delivery{msg: m})
	}
	// Past the end is an illegal offset.
	res, err = pc.PullFrom(waitContext(t, patience), mqs[0], total+100, batch)
	require.NoError(t, err)
	require.Equal(t, primitive.PullOffsetIllegal, res.Status)
}
