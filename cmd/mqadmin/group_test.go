package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSubGroup_UpdateKeepsOtherSettingsAndDelete(t *testing.T) {
	c := startCluster(t)
	out := c.ok(t, "updateSubGroup", "-g", "cg", "-c", "DefaultCluster", "-r", "3", "-s", "false")
	require.Contains(t, out, "update subscription group cg on broker-a ("+c.broker+") success: retryMaxTimes=3 retryQueueNums=1 consumeEnable=false")

	var res []struct {
		BrokerAddr string `json:"brokerAddr"`
		Config     struct {
			GroupName      string `json:"groupName"`
			RetryMaxTimes  int    `json:"retryMaxTimes"`
			RetryQueueNums int    `json:"retryQueueNums"`
			ConsumeEnable  bool   `json:"consumeEnable"`
		} `json:"config"`
	}
	c.okJSON(t, &res, "updateSubGroup", "-g", "cg", "-b", c.broker, "-q", "2", "-s", "true")
	require.Len(t, res, 1)
	require.Equal(t, 3, res[0].Config.RetryMaxTimes, "a setting not given keeps its value")
	require.Equal(t, 2, res[0].Config.RetryQueueNums)
	require.True(t, res[0].Config.ConsumeEnable)

	// -o: RocketMQ 5's consumeMessageOrderly (FIFO POP); kept when not given.
	require.Contains(t, c.ok(t, "updateSubGroup", "-g", "cg", "-b", c.broker, "-o", "true"), "consumeMessageOrderly=true")
	var again []struct {
		Config struct {
			Orderly       bool `json:"consumeMessageOrderly"`
			RetryMaxTimes int  `json:"retryMaxTimes"`
		} `json:"config"`
	}
	c.okJSON(t, &again, "updateSubGroup", "-g", "cg", "-b", c.broker, "-r", "5")
	require.True(t, again[0].Config.Orderly, "read back from the broker")
	require.Equal(t, 5, again[0].Config.RetryMaxTimes)
	again = nil
	c.okJSON(t, &again, "updateSubGroup", "-g", "cg", "-b", c.broker, "-o", "false")
	require.False(t, again[0].Config.Orderly)
	c.fails(t, exitUsage, "updateSubGroup", "-g", "cg", "-b", c.broker, "-o", "sometimes")

	c.fails(t, exitUsage, "updateSubGroup", "-g", "cg", "-b", c.broker, "-s", "maybe")
	c.fails(t, exitUsage, "updateSubGroup", "-g", "cg", "-b", c.broker, "-r", "-1")

	require.Contains(t, c.ok(t, "deleteSubGroup", "-g", "cg", "-b", c.broker), "delete subscription group cg from "+c.broker+" success")
	stderr := c.fails(t, exitError, "deleteSubGroup", "-g", "cg", "-c", "DefaultCluster")
	require.Contains(t, stderr, "broker "+c.broker+" answered DELETE_SUBSCRIPTIONGROUP with SUBSCRIPTION_GROUP_NOT_EXIST (26)")
	require.Contains(t, stderr, "subscription group cg does not exist", "the broker's remark")
}

func TestConsumerProgress_LagAndUnknown(t *testing.T) {
	c := startCluster(t)
	c.ok(t, "updateTopic", "-t", "progress", "-b", c.broker, "-r", "2", "-w", "2")
	c.waitRoute(t, "progress")
	for range 5 {
		c.send(t, "progress", 0, []byte("m"), nil)
	}
	c.commit(t, "cg", "progress", 0, 2)
	c.waitIndexed(t)

	for _, args := range [][]string{{"-t", "progress"}, {}} {
		out := c.ok(t, append([]string{"consumerProgress", "-g", "cg"}, args...)...)
		q0 := findRow(t, out, "progress", "broker-a", "0")
		require.Equal(t, []string{"5", "2", "3"}, q0[3:6], "broker offset, consumer offset, diff")
		require.NotEqual(t, "unknown", q0[6], "the lag time of a queue with a committed offset is known")
		require.Equal(t, []string{"0", "unknown", "unknown", "unknown"}, findRow(t, out, "progress", "broker-a", "1")[3:],
			"no committed offset: unknown, not 0")
		require.Contains(t, out, "Diff Total: 3")
		require.Contains(t, out, "1 queue(s) without a committed offset")
	}

	var v struct {
		Group  string `json:"group"`
		Queues []struct {
			QueueID          int     `json:"queueId"`
			BrokerOffset     int64   `json:"brokerOffset"`
			ConsumerOffset   *int64  `json:"consumerOffset"`
			Lag              *int64  `json:"lag"`
			LagTimeMs        *int64  `json:"lagTimeMs"`
			OldestUnconsumed *string `json:"oldestUnconsumed"`
		} `json:"queues"`
		TotalLag         int64  `json:"totalLag"`
		UnknownLagQueues int    `json:"unknownLagQueues"`
		MaxLagTimeMs     *int64 `json:"maxLagTimeMs"`
	}
	c.okJSON(t, &v, "consumerProgress", "-g", "cg", "-t", "progress")
	require.Len(t, v.Queues, 2)
	q0, q1 := v.Queues[0], v.Queues[1]
	require.Equal(t, int64(5), q0.BrokerOffset)
	require.Equal(t, int64(2), *q0.ConsumerOffset)
	require.Equal(t, int64(3), *q0.Lag)
	require.NotNil(t, q0.LagTimeMs)
	require.GreaterOrEqual(t, *q0.LagTimeMs, int64(0))
	require.NotNil(t, q0.OldestUnconsumed)
	require.Nil(t, q1.ConsumerOffset, "null, never 0")
	require.Nil(t, q1.Lag)
	require.Nil(t, q1.LagTimeMs)
	require.Equal(t, int64(3), v.TotalLag)
	require.Equal(t, 1, v.UnknownLagQueues)
	require.Equal(t, *q0.LagTimeMs, *v.MaxLagTimeMs)

	// Caught up: lag 0 and lag time 0, both known.
	c.commit(t, "cg", "progress", 0, 5)
	c.okJSON(t, &v, "consumerProgress", "-g", "cg", "-t", "progress")
	require.Equal(t, int64(0), *v.Queues[0].Lag)
	require.Equal(t, int64(0), *v.Queues[0].LagTimeMs)
	require.Nil(t, v.Queues[0].OldestUnconsumed)

	// An unknown group is an error, a topic named or not.
	stderr := c.fails(t, exitError, "consumerProgress", "-g", "nobody")
	require.Contains(t, stderr, "consumer group nobody is unknown: no committed offset and no live subscription on broker "+c.broker)
	stderr = c.fails(t, exitError, "consumerProgress", "-g", "nobody", "-t", "progress")
	require.Contains(t, stderr, "consumer group nobody is unknown: no committed offset and no live subscription to topic progress on broker "+c.broker)
	stderr = c.fails(t, exitError, "consumerProgress", "-g", "cg", "-t", "TBW102")
	require.Contains(t, stderr, "consumer group cg is unknown", "a group known on other topics only")
}

func TestConsumerConnection_WarnsAboutDifferentSubscriptions(t *testing.T) {
	c := startCluster(t)
	c.heartbeat(t, "10.0.0.1@1", "cg", map[string]string{"orders": "TagA", "%RETRY%cg": "*"})
	c.heartbeat(t, "10.0.0.2@2", "cg", map[string]string{"orders": "TagB", "%RETRY%cg": "*"})
	c.heartbeat(t, "10.0.0.3@3", "alike", map[string]string{"orders": "TagA"})
	c.heartbeat(t, "10.0.0.4@4", "alike", map[string]string{"orders": "TagA"})

	out := c.ok(t, "consumerConnection", "-g", "cg")
	r1 := findRow(t, out, "10.0.0.1@1")
	require.Equal(t, []string{"GO", "V4_9_8", `%RETRY%cg=TAG:"*"`, `orders=TAG:"TagA"`}, r1[2:])
	require.Equal(t, `orders=TAG:"TagB"`, findRow(t, out, "10.0.0.2@2")[5])
	require.Contains(t, out, "MessageModel: CLUSTERING")
	warning := `WARNING: members of group cg subscribe differently; topic orders: TAG:"TagA" (10.0.0.1@1) vs TAG:"TagB" (10.0.0.2@2).`
	require.Contains(t, out, warning)
	require.Equal(t, 1, strings.Count(out, "WARNING"), "the retry topic is subscribed alike")

	var gc struct {
		Connections []struct {
			ClientID      string            `json:"clientId"`
			ClientAddr    string            `json:"clientAddr"`
			Language      string            `json:"language"`
			Subscriptions map[string]string `json:"subscriptions"`
		} `json:"connections"`
		Consistent bool   `json:"consistent"`
		Warning    string `json:"warning"`
	}
	c.okJSON(t, &gc, "consumerConnection", "-g", "cg")
	require.Len(t, gc.Connections, 2)
	require.False(t, gc.Consistent)
	require.Contains(t, gc.Warning, warning)
	require.Equal(t, "TagB", gc.Connections[1].Subscriptions["orders"])
	require.NotEmpty(t, gc.Connections[0].ClientAddr)

	require.NotContains(t, c.ok(t, "consumerConnection", "-g", "alike"), "WARNING")
	c.okJSON(t, &gc, "consumerConnection", "-g", "alike")
	require.True(t, gc.Consistent)

	// Each member's expression type and expression; one expression as
	// SQL92 and as a tag is two different subscriptions.
	c.heartbeat(t, "10.0.0.5@5", "sql", map[string]string{"orders": "SQL92:region IN ('eu','us')"})
	c.heartbeat(t, "10.0.0.6@6", "sql", map[string]string{"orders": "region"})
	c.heartbeat(t, "10.0.0.7@7", "sql", map[string]string{"orders": "SQL92:region"})
	out = c.ok(t, "consumerConnection", "-g", "sql")
	require.Equal(t, []string{`orders=SQL92:"region`, "IN", `('eu','us')"`}, findRow(t, out, "10.0.0.5@5")[4:])
	require.Equal(t, `orders=TAG:"region"`, findRow(t, out, "10.0.0.6@6")[4])
	require.Contains(t, out, `topic orders: SQL92:"region IN ('eu','us')" (10.0.0.5@5) vs SQL92:"region" (10.0.0.7@7) vs TAG:"region" (10.0.0.6@6).`)
	var sql struct {
		Connections []struct {
			Subscriptions   map[string]string `json:"subscriptions"`
			ExpressionTypes map[string]string `json:"expressionTypes"`
		} `json:"connections"`
	}
	c.okJSON(t, &sql, "consumerConnection", "-g", "sql")
	require.Len(t, sql.Connections, 3)
	for i, want := range [][2]string{{"SQL92", "region IN ('eu','us')"}, {"TAG", "region"}, {"SQL92", "region"}} {
		got := sql.Connections[i]
		require.Equal(t, want, [2]string{got.ExpressionTypes["orders"], got.Subscriptions["orders"]}, "member %d", i)
	}

	stderr := c.fails(t, exitError, "consumerConnection", "-g", "nobody")
	require.Contains(t, stderr, "broker "+c.broker+" answered GET_CONSUMER_CONNECTION_LIST with CONSUMER_NOT_ONLINE")
}
