package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/stretchr/testify/require"
)

func TestTopic_CreateRouteStatusDelete(t *testing.T) {
	c := startCluster(t)

	out := c.ok(t, "updateTopic", "-t", "orders", "-c", "DefaultCluster", "-r", "4", "-w", "4")
	require.Contains(t, out, fmt.Sprintf("create topic orders on broker-a (%s) success", c.broker))
	require.Contains(t, out, "readQueueNums=4 writeQueueNums=4 perm=6 (RW)")
	c.waitRoute(t, "orders")

	var created struct {
		Topic   string `json:"topic"`
		Brokers []struct {
			BrokerAddr string `json:"brokerAddr"`
		} `json:"brokers"`
		Perm  int  `json:"perm"`
		Order bool `json:"order"`
	}
	c.okJSON(t, &created, "updateTopic", "-t", "orders", "-b", c.broker, "-r", "4", "-w", "4", "-p", "6", "-o", "true")
	require.Equal(t, "orders", created.Topic)
	require.True(t, created.Order, "RocketMQ's -o true")
	require.Equal(t, c.broker, created.Brokers[0].BrokerAddr)

	// topicList
	require.Contains(t, strings.Fields(c.ok(t, "topicList")), "orders")
	var list struct{ Topics []string }
	c.okJSON(t, &list, "topicList")
	require.True(t, slices.Contains(list.Topics, "orders") && slices.Contains(list.Topics, "TBW102"), list.Topics)

	// topicRoute
	out = c.ok(t, "topicRoute", "-t", "orders")
	require.Equal(t, []string{"DefaultCluster", "broker-a", "0", c.broker, c.b.GRPCAddr()}, findRow(t, out, "DefaultCluster"))
	require.Equal(t, []string{"broker-a", "4", "4", "6", "(RW)"}, findRow(t, out, "broker-a", "4"))
	var route struct {
		Brokers []struct {
			BrokerName  string            `json:"brokerName"`
			BrokerAddrs map[string]string `json:"brokerAddrs"`
		} `json:"brokers"`
		Queues []struct {
			WriteQueueNums int `json:"writeQueueNums"`
			Perm           int `json:"perm"`
		} `json:"queues"`
	}
	c.okJSON(t, &route, "topicRoute", "-t", "orders")
	require.Equal(t, c.broker, route.Brokers[0].BrokerAddrs["0"])
	require.Equal(t, 4, route.Queues[0].WriteQueueNums)

	// topicStatus: min/max offset and last update per queue.
	before := time.Now().Add(-time.Second)
	for range 3 {
		c.send(t, "orders", 1, []byte("x"), nil)
	}
	c.waitIndexed(t)
	out = c.ok(t, "topicStatus", "-t", "orders")
	require.Equal(t, []string{"broker-a", "0", "0", "0", "-"}, findRow(t, out, "broker-a", "0"))
	q1 := findRow(t, out, "broker-a", "1")
	require.Equal(t, []string{"0", "3"}, q1[2:4])
	require.Len(t, q1, 6, "date and time of the last update")
	var status struct {
		Queues []struct {
			QueueID             int     `json:"queueId"`
			MinOffset           int64   `json:"minOffset"`
			MaxOffset           int64   `json:"maxOffset"`
			LastUpdateTimestamp int64   `json:"lastUpdateTimestamp"`
			LastUpdateTime      *string `json:"lastUpdateTime"`
		} `json:"queues"`
	}
	c.okJSON(t, &status, "topicStatus", "-t", "orders")
	require.Len(t, status.Queues, 4)
	require.Nil(t, status.Queues[0].LastUpdateTime, "an empty queue was never updated")
	require.Equal(t, int64(3), status.Queues[1].MaxOffset)
	require.NotNil(t, status.Queues[1].LastUpdateTime)
	require.Greater(t, status.Queues[1].LastUpdateTimestamp, before.UnixMilli())

	// deleteTopic: gone from the broker and the nameserver.
	out = c.ok(t, "deleteTopic", "-t", "orders", "-c", "DefaultCluster")
	require.Contains(t, out, "delete topic orders from broker broker-a")
	require.Contains(t, out, "delete topic orders from nameserver "+c.ns)
	stderr := c.fails(t, exitError, "topicRoute", "-t", "orders")
	require.Contains(t, stderr, "TOPIC_NOT_EXIST")
	require.Contains(t, stderr, c.ns, "names the nameserver asked")
}

func TestTopic_UpdateErrors(t *testing.T) {
	c := startCluster(t)
	// The broker refuses system topics; the error names it and its remark.
	stderr := c.fails(t, exitError, "updateTopic", "-t", "TBW102", "-b", c.broker)
	require.Contains(t, stderr, c.broker)
	require.Contains(t, stderr, "SYSTEM_ERROR")
	require.Contains(t, stderr, "system topic")

	// More write queues than read queues: done, with a warning.
	r := c.mq(t, "updateTopic", "-t", "narrow", "-b", c.broker, "-r", "4", "-w", "6")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, "warning: topic narrow has 6 write queues but 4 read queues: messages sent to queues 4 to 5 reach no consumer")
	require.NotContains(t, c.mq(t, "updateTopic", "-t", "narrow", "-b", c.broker, "-r", "6", "-w", "4").stderr, "warning")

	// Nor may the auto-create template be deleted: new topics are made
	// from it. It keeps its route.
	stderr = c.fails(t, exitError, "deleteTopic", "-t", "TBW102", "-c", "DefaultCluster")
	require.Contains(t, stderr, "system topic")
	c.ok(t, "topicRoute", "-t", "TBW102")

	stderr = c.fails(t, exitError, "updateTopic", "-t", "x", "-c", "NoSuchCluster")
	require.Contains(t, stderr, `no cluster "NoSuchCluster"`)
	require.Contains(t, stderr, "DefaultCluster", "lists the known clusters")

	c.fails(t, exitUsage, "updateTopic", "-t", "x")                                   // neither -b nor -c
	c.fails(t, exitUsage, "updateTopic", "-t", "x", "-b", c.broker, "-c", "C")        // both
	c.fails(t, exitUsage, "updateTopic", "-t", "x", "-b", c.broker, "-r", "0")        // bad count
	c.fails(t, exitUsage, "updateTopic", "-t", "x", "-b", c.broker, "-p", "9")        // bad perm
	c.fails(t, exitUsage, "updateTopic", "-t", "x", "-b", c.broker, "-p", "0")        // not silently 6
	c.fails(t, exitUsage, "updateTopic", "-t", "x", "-b", c.broker, "-o", "maybe")    // bad bool
	c.fails(t, exitUsage, "updateTopic", "-t", "x", "-b", "not-an-address")           // bad address
	c.fails(t, exitUsage, "deleteTopic", "-t", "x")                                   // -c missing
	c.fails(t, exitUsage, "updateTopic", "-t", "x", "-b", c.broker, "-r", "notanint") // bad value
}

func TestCluster_ListAndBrokerStatus(t *testing.T) {
	c := startCluster(t)
	c.send(t, "t1", 0, []byte("hello"), nil)

	out := c.ok(t, "clusterList")
	require.Contains(t, rows(out)[0], "#Put")
	row := findRow(t, out, "DefaultCluster", "broker-a")
	require.Equal(t, []string{"0", c.broker, "ASYNC_MASTER", "-", "-", "slaves=0", "1", "0", "0"}, row[2:11],
		"id, address, role, HA lag bytes and seconds, HA state, put total, get total, commitlog min")
	require.NotEqual(t, "0", row[11], "commitlog max offset")

	var cl struct {
		Brokers []struct {
			Cluster    string            `json:"cluster"`
			BrokerName string            `json:"brokerName"`
			BrokerAddr string            `json:"brokerAddr"`
			Runtime    map[string]string `json:"runtime"`
		} `json:"brokers"`
	}
	c.okJSON(t, &cl, "clusterList", "-c", "DefaultCluster")
	require.Len(t, cl.Brokers, 1)
	require.Equal(t, c.broker, cl.Brokers[0].BrokerAddr)
	require.Equal(t, "1", cl.Brokers[0].Runtime["putMessageTotal"])

	out = c.ok(t, "brokerStatus", "-b", c.broker)
	require.Equal(t, []string{"brokerName:", "broker-a"}, findRow(t, out, "brokerName:"))
	require.Equal(t, []string{"putMessageTotal:", "1"}, findRow(t, out, "putMessageTotal:"))
	require.Equal(t, []string{"keyIndexDegraded:", "false"}, findRow(t, out, "keyIndexDegraded:"))
	require.Equal(t, []string{"dedupWindow:", "2m0s"}, findRow(t, out, "dedupWindow:"), "the duplicate window's state")
	require.Equal(t, []string{"dedupKeys:", "0"}, findRow(t, out, "dedupKeys:"), "the one message sent has no UNIQ_KEY")
	var kv map[string]string
	c.okJSON(t, &kv, "brokerStatus", "-b", c.broker)
	require.Equal(t, "DefaultCluster", kv["clusterName"])
	require.Contains(t, kv, "commitLogMaxOffset")
	require.Contains(t, c.ok(t, "brokerStatus", "-c", "DefaultCluster"), "== broker-a ("+c.broker+") ==")

	stderr := c.fails(t, exitError, "brokerStatus", "-b", "127.0.0.1:1")
	require.Contains(t, stderr, "GET_BROKER_RUNTIME_INFO to broker 127.0.0.1:1 failed")
	require.Contains(t, stderr, "dial tcp 127.0.0.1:1: connect: connection refused")
}

// TestTopic_OrderConf: updateTopic -o true writes the topic's
// ORDER_TOPIC_CONFIG entry on the nameservers, as RocketMQ's does: every
// broker of the cluster with -c, this broker's part of the entry with -b.
// -o false leaves it; deleteKvConfig removes it.
func TestTopic_OrderConf(t *testing.T) {
	c := startCluster(t)
	kv := func(topic string) (string, bool) {
		resp := c.invoke(t, c.ns, protocol.GetKVConfig, &protocol.KVConfigRequestHeader{
			Namespace: protocol.OrderTopicConfigNamespace, Key: topic}, nil)
		if resp.Code == protocol.QueryNotFound {
			return "", false
		}
		require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
		var h protocol.GetKVConfigResponseHeader
		require.NoError(t, h.FromExt(resp.ExtFields))
		return h.Value, true
	}

	out := c.ok(t, "updateTopic", "-t", "ord", "-c", "DefaultCluster", "-r", "4", "-w", "4", "-o", "true")
	require.Contains(t, out, "order config of topic ord on the nameservers: broker-a:4")
	v, ok := kv("ord")
	require.True(t, ok)
	require.Equal(t, "broker-a:4", v)

	// Without -o true the entry is left alone.
	c.ok(t, "updateTopic", "-t", "ord", "-c", "DefaultCluster", "-r", "4", "-w", "6")
	c.ok(t, "updateTopic", "-t", "ord", "-c", "DefaultCluster", "-r", "4", "-w", "6", "-o", "false")
	v, _ = kv("ord")
	require.Equal(t, "broker-a:4", v)

	// -b changes this broker's part only.
	c.ok(t, "updateKvConfig", "-s", protocol.OrderTopicConfigNamespace, "-k", "ord", "-v", "broker-x:2; broker-a:4")
	require.Contains(t, c.fails(t, exitUsage, "updateKvConfig", "-s", " ", "-k", "ord", "-v", "x"), "-s (--namespace) is empty")
	require.Contains(t, c.fails(t, exitUsage, "deleteKvConfig", "-s", protocol.OrderTopicConfigNamespace, "-k", ""), "-k (--key) is empty")
	var js struct {
		OrderTopicConf *string `json:"orderTopicConf"`
	}
	c.okJSON(t, &js, "updateTopic", "-t", "ord", "-b", c.broker, "-w", "3", "-r", "3", "-o", "true")
	require.NotNil(t, js.OrderTopicConf)
	require.Equal(t, "broker-a:3;broker-x:2", *js.OrderTopicConf)
	v, _ = kv("ord")
	require.Equal(t, "broker-a:3;broker-x:2", v)

	require.Contains(t, c.ok(t, "deleteKvConfig", "-s", protocol.OrderTopicConfigNamespace, "-k", "ord"),
		"ORDER_TOPIC_CONFIG ord deleted on 1 nameserver(s)")
	_, ok = kv("ord")
	require.False(t, ok)
	require.Contains(t, c.fails(t, exitUsage, "updateKvConfig", "-s", "X", "-k", "y"), "value")
}

// TestTopic_MessageTypeAttribute: updateTopic -a +message.type=FIFO sets
// the RocketMQ 5 attribute on the broker; an update without -a keeps it;
// a value or key Sluice does not know is a usage error naming the values.
func TestTopic_MessageTypeAttribute(t *testing.T) {
	c := startCluster(t)
	attrs := func() map[string]string {
		t.Helper()
		resp := c.invoke(t, c.broker, protocol.GetAllTopicConfig, nil, nil)
		var all protocol.TopicConfigSerializeWrapper
		require.NoError(t, json.Unmarshal(resp.Body, &all))
		return all.TopicConfigTable["typed"].Attributes
	}
	out := c.ok(t, "updateTopic", "-t", "typed", "-b", c.broker, "-r", "2", "-w", "2", "-a", "+message.type=FIFO")
	require.Contains(t, out, "order=false attributes=+message.type=FIFO")
	require.Equal(t, map[string]string{"message.type": "FIFO"}, attrs())
	c.ok(t, "updateTopic", "-t", "typed", "-b", c.broker, "-r", "4", "-w", "4")
	require.Equal(t, map[string]string{"message.type": "FIFO"}, attrs(), "kept without -a")
	c.ok(t, "updateTopic", "-t", "typed", "-c", "DefaultCluster", "-a", "-message.type")
	require.Empty(t, attrs())

	stderr := c.fails(t, exitUsage, "updateTopic", "-t", "typed", "-b", c.broker, "-a", "+message.type=ORDERED")
	require.Contains(t, stderr, "want one of NORMAL, FIFO, DELAY, TRANSACTION, MIXED")
	stderr = c.fails(t, exitUsage, "updateTopic", "-t", "typed", "-b", c.broker, "-a", "+queue.type=BatchCQ")
	require.Contains(t, stderr, `unknown attribute "queue.type"`)
	c.fails(t, exitUsage, "updateTopic", "-t", "typed", "-b", c.broker, "-a", "message.type=FIFO")
}
