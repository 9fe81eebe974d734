package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/conf"
	"github.com/stretchr/testify/require"
)

// startConsumer starts a push consumer of group on topic that counts what
// it handles.
func (c *cluster) startConsumer(t *testing.T, group, topic string, handled *atomic.Int64) *client.PushConsumer {
	t.Helper()
	pc, err := client.NewPushConsumer(group, client.WithNameServers(c.ns),
		client.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		client.WithRebalanceInterval(time.Second), client.WithCommitInterval(200*time.Millisecond),
		client.WithRouteRefreshInterval(200*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe(topic, "*", func(context.Context, []*client.Message) client.ConsumeResult {
		handled.Add(1)
		return client.ConsumeSuccess
	}))
	require.NoError(t, pc.Start())
	t.Cleanup(func() { pc.Close() })
	return pc
}

func TestConsumerStatus(t *testing.T) {
	c := startCluster(t)
	c.ok(t, "updateTopic", "-t", "st", "-b", c.broker, "-r", "2", "-w", "2")
	c.waitRoute(t, "st")
	var handled atomic.Int64
	pc := c.startConsumer(t, "st-g", "st", &handled)
	var ids []string
	for i := range 6 {
		ids = append(ids, c.send(t, "st", int32(i%2), []byte("m"), nil).MsgID)
	}
	require.Eventually(t, func() bool { return handled.Load() == 6 }, 10*time.Second, 20*time.Millisecond)

	// The group: one row per client, the running info's totals.
	var row []string
	require.Eventually(t, func() bool {
		row = findRow(t, c.ok(t, "consumerStatus", "-g", "st-g"), pc.ClientID())
		return row[4] == "3" // queues: 2 of st, 1 of the retry topic
	}, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, []string{"push", "false", "3", "0"}, row[2:6], "type, orderly, queues, cached")

	// One client in detail: its queues with their commit offsets.
	out := c.ok(t, "consumerStatus", "-g", "st-g", "-i", pc.ClientID())
	require.Contains(t, out, "PROP_CONSUME_TYPE")
	require.Contains(t, out, `st "*"`)
	require.Equal(t, "3", findRow(t, out, "st", "broker-a", "0")[3], "commit offset of queue 0")
	require.Equal(t, "3", findRow(t, out, "st", "broker-a", "1")[3], "commit offset of queue 1")
	require.NotContains(t, out, "#Goroutines")
	require.Contains(t, c.ok(t, "consumerStatus", "-g", "st-g", "-i", pc.ClientID(), "-s"), "#Goroutines")

	var js struct {
		Clients []struct {
			ClientID string `json:"clientId"`
			Queues   []struct {
				Topic        string `json:"topic"`
				QueueID      int    `json:"queueId"`
				CommitOffset int64  `json:"commitOffset"`
			} `json:"queues"`
			StatusTable map[string]struct {
				ConsumeOKTPS float64 `json:"consumeOKTPS"`
			} `json:"statusTable"`
		} `json:"clients"`
	}
	c.okJSON(t, &js, "consumerStatus", "-g", "st-g")
	require.Len(t, js.Clients, 1)
	q := js.Clients[0].Queues
	require.Len(t, q, 3)
	require.Equal(t, "%RETRY%st-g", q[0].Topic, "sorted by topic")
	require.Equal(t, "st", q[1].Topic)
	require.EqualValues(t, 3, q[1].CommitOffset)
	require.Positive(t, js.Clients[0].StatusTable["st"].ConsumeOKTPS)

	// Consume one again, directly, on that client.
	out = c.ok(t, "queryMsgById", "-i", ids[0], "-g", "st-g", "-d", pc.ClientID())
	require.Contains(t, out, "consumed directly by client "+pc.ClientID()+" of group st-g: CR_SUCCESS")
	require.EqualValues(t, 7, handled.Load())

	// Errors.
	require.Contains(t, c.fails(t, exitUsage, "consumerStatus", "-g", "st-g", "-s"), "-s needs -i")
	require.Contains(t, c.fails(t, exitError, "consumerStatus", "-g", "st-g", "-i", "nobody@1"),
		"client nobody@1 is not a live member of group st-g; its members are: "+pc.ClientID())
	require.Contains(t, c.fails(t, exitUsage, "queryMsgById", "-i", ids[0], "-g", "st-g"), "-g and -d go together")
	require.Contains(t, c.fails(t, exitError, "queryMsgById", "-i", ids[0], "-g", "st-g", "-d", "nobody@1"),
		"consumer nobody@1 of group st-g is not online on broker broker-a")

	// The offsets each client holds, asked through the broker
	// (INVOKE_BROKER_TO_GET_CONSUMER_STATUS → GET_CONSUMER_STATUS_FROM_CLIENT).
	out = c.ok(t, "getConsumerStatus", "-g", "st-g", "-t", "st")
	require.Equal(t, []string{pc.ClientID(), "st", "broker-a", "0", "3"}, findRow(t, out, pc.ClientID(), "st", "broker-a", "0"))
	require.Equal(t, []string{pc.ClientID(), "st", "broker-a", "1", "3"}, findRow(t, out, pc.ClientID(), "st", "broker-a", "1"))
	var gs struct {
		Clients map[string][]struct {
			QueueID int   `json:"queueId"`
			Offset  int64 `json:"offset"`
		} `json:"clients"`
	}
	c.okJSON(t, &gs, "getConsumerStatus", "-g", "st-g", "-t", "st", "-i", pc.ClientID())
	require.Len(t, gs.Clients[pc.ClientID()], 2)
	require.Contains(t, c.fails(t, exitError, "getConsumerStatus", "-g", "st-g", "-t", "st", "-i", "nobody@1"),
		"consumer group st-g has no live client nobody@1 on broker broker-a")

	// A member that does not answer GET_CONSUMER_RUNNING_INFO (this raw
	// client answers REQUEST_CODE_NOT_SUPPORTED) is reported, and the
	// command fails after printing the others.
	c.heartbeat(t, "10.0.0.9@9", "st-g", map[string]string{"st": "*", "%RETRY%st-g": "*"})
	r := c.mq(t, "consumerStatus", "-g", "st-g")
	require.Equal(t, exitError, r.code)
	require.NotNil(t, findRow(t, r.stdout, pc.ClientID()))
	require.Contains(t, r.stdout, "ERROR 10.0.0.9@9: broker")
	require.True(t, strings.Contains(r.stderr, "1 of 2 clients did not report their running info"), r.stderr)
	// It does not answer GET_CONSUMER_STATUS_FROM_CLIENT either: the
	// others are shown, and it is named.
	out = c.ok(t, "getConsumerStatus", "-g", "st-g", "-t", "st")
	require.NotNil(t, findRow(t, out, pc.ClientID(), "st", "broker-a"))
	require.Contains(t, out, "WARNING broker broker-a")
	require.Contains(t, out, "not answered: 10.0.0.9@9: REQUEST_CODE_NOT_SUPPORTED")
}

// TestGetConsumerStatus_TwoBrokers: every broker of the topic asks the
// same clients, which answer with all their queues: each queue is shown
// once.
func TestGetConsumerStatus_TwoBrokers(t *testing.T) {
	c := startCluster(t)
	bcfg := conf.DefaultBroker()
	bcfg.BrokerName = "broker-b"
	bcfg.Listen = "127.0.0.1:0"
	bcfg.Store.Dir = t.TempDir()
	bcfg.Store.SegmentSize = 8 << 20
	bcfg.Store.ConsumeQueueEntries = 1000
	bcfg.NamesrvAddr = c.ns
	bcfg.RegisterInterval = 100 * time.Millisecond
	b2, err := broker.New(bcfg, broker.Options{Logger: quiet()})
	require.NoError(t, err)
	require.NoError(t, b2.Start())
	t.Cleanup(func() { b2.Close() })
	require.Eventually(t, func() bool {
		return strings.Contains(c.ok(t, "clusterList"), "broker-b")
	}, 10*time.Second, 50*time.Millisecond)
	c.ok(t, "updateTopic", "-t", "two", "-c", "DefaultCluster", "-r", "2", "-w", "2")
	require.Eventually(t, func() bool {
		out := c.ok(t, "topicRoute", "-t", "two")
		return strings.Contains(out, "broker-a") && strings.Contains(out, "broker-b")
	}, 10*time.Second, 50*time.Millisecond, "the topic is on both brokers")
	var handled atomic.Int64
	pc := c.startConsumer(t, "two-g", "two", &handled)

	var gs struct {
		Clients map[string][]struct {
			BrokerName string `json:"brokerName"`
			QueueID    int    `json:"queueId"`
		} `json:"clients"`
	}
	require.Eventually(t, func() bool {
		c.okJSON(t, &gs, "getConsumerStatus", "-g", "two-g", "-t", "two")
		return len(gs.Clients[pc.ClientID()]) >= 4
	}, 10*time.Second, 50*time.Millisecond)
	require.Len(t, gs.Clients[pc.ClientID()], 4, "2 queues on each of 2 brokers, each once")
}

// TestJoinSlaveLag: a slave row gets the lag its master measured for the
// replication connection the slave reports; other rows are left alone.
func TestJoinSlaveLag(t *testing.T) {
	rows := []clusterRow{
		{BrokerID: 0, Runtime: map[string]string{"brokerRole": "SYNC_MASTER", "haLagBytes": "300", "haLagSeconds": "1.500",
			"haSlave0": "127.0.0.1:5001 acked=100 lagBytes=300 lagSeconds=1.500",
			"haSlave1": "127.0.0.1:5002 acked=400 lagBytes=0 lagSeconds=0.000"}},
		{BrokerID: 1, Runtime: map[string]string{"brokerRole": "SLAVE", "haLocalAddr": "127.0.0.1:5002", "haLagBytes": "7"}},
		{BrokerID: 2, Runtime: map[string]string{"brokerRole": "SLAVE", "haLocalAddr": "127.0.0.1:5001"}},
		{BrokerID: 3, Runtime: map[string]string{"brokerRole": "SLAVE", "haLocalAddr": ""}},
	}
	joinSlaveLag(rows)
	require.Equal(t, "0", rows[1].Runtime["haLagBytes"])
	require.Equal(t, "0.000", rows[1].Runtime["haLagSeconds"])
	require.Equal(t, "300", rows[2].Runtime["haLagBytes"])
	require.Equal(t, "1.500", rows[2].Runtime["haLagSeconds"])
	require.NotContains(t, rows[3].Runtime, "haLagBytes")
	require.Equal(t, "300", rows[0].Runtime["haLagBytes"], "the master's own row keeps its furthest slave")
}
