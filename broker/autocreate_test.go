package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/broker/topic"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// TestAutoCreate_QueueCount: a topic auto-created by a send gets
// default_topic_queue_nums queues, capped by the count the producer asks
// for (RocketMQ's rule), also when the setting is below 8 and after it
// changed across a restart of the same store.
func TestAutoCreate_QueueCount(t *testing.T) {
	dir := t.TempDir()
	for i, tc := range []struct{ setting, ask, want int32 }{{8, 4, 4}, {8, 16, 8}, {2, 4, 2}, {16, 32, 16}} {
		cfg := testConfig(dir)
		cfg.DefaultTopicQueueNums = tc.setting
		b, err := New(cfg, Options{Logger: quiet()})
		require.NoError(t, err)
		require.NoError(t, b.Start())
		c := newClient(t, remoting.SerializeJSON)
		name := fmt.Sprintf("auto-%d", i)
		h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: name, DefaultTopic: topic.AutoCreateTemplate,
			DefaultTopicQueueNums: tc.ask, QueueID: 0, BornTimestamp: time.Now().UnixMilli()}
		resp := invoke(t, c, b.Addr(), protocol.SendMessage, h, []byte("x"))
		require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
		got, ok := b.topics.Get(name)
		require.True(t, ok)
		require.Equal(t, tc.want, got.WriteQueueNums, "setting %d, producer asks %d", tc.setting, tc.ask)
		require.Equal(t, tc.want, got.ReadQueueNums)
		require.NoError(t, b.Close())
	}
}
