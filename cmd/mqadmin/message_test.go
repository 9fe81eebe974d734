package main

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/stretchr/testify/require"
)

// msgJSON is a message in mqadmin's JSON output.
type msgJSON struct {
	Topic          string            `json:"topic"`
	BrokerName     string            `json:"brokerName"`
	QueueID        int               `json:"queueId"`
	QueueOffset    int64             `json:"queueOffset"`
	MsgID          string            `json:"msgId"`
	OffsetMsgID    string            `json:"offsetMsgId"`
	Keys           []string          `json:"keys"`
	Tags           string            `json:"tags"`
	StoreTimestamp int64             `json:"storeTimestamp"`
	StoreTime      *string           `json:"storeTime"`
	BornTime       *string           `json:"bornTime"`
	ReconsumeTimes int               `json:"reconsumeTimes"`
	Properties     map[string]string `json:"properties"`
	BodyLength     int               `json:"bodyLength"`
	BodyEncoding   string            `json:"bodyEncoding"`
	Body           string            `json:"body"`
}

type sendJSON struct {
	Status      string `json:"status"`
	MsgID       string `json:"msgId"`
	OffsetMsgID string `json:"offsetMsgId"`
	BrokerName  string `json:"brokerName"`
	QueueID     int    `json:"queueId"`
	QueueOffset int64  `json:"queueOffset"`
}

func TestMessage_SendAndQuery(t *testing.T) {
	c := startCluster(t)
	c.ok(t, "updateTopic", "-t", "orders", "-b", c.broker, "-r", "2", "-w", "2")
	c.waitRoute(t, "orders")

	out := c.ok(t, "sendMessage", "-t", "orders", "-p", "hello world", "-k", "order-1 customer-7", "-c", "TagA")
	row := findRow(t, out, "broker-a")
	require.Equal(t, "SEND_OK", row[2])
	var sent sendJSON
	c.okJSON(t, &sent, "sendMessage", "-t", "orders", "-p", "second", "-k", "order-2", "-c", "TagB", "-b", "broker-a", "-i", "1")
	require.Equal(t, "SEND_OK", sent.Status)
	require.Equal(t, 1, sent.QueueID, "-b and -i pick the queue")
	require.Len(t, sent.MsgID, 32)
	c.waitIndexed(t)

	// queryMsgById round-trips the message.
	var msgs []msgJSON
	c.okJSON(t, &msgs, "queryMsgById", "-i", sent.OffsetMsgID)
	require.Len(t, msgs, 1)
	m := msgs[0]
	require.Equal(t, "orders", m.Topic)
	require.Equal(t, 1, m.QueueID)
	require.Equal(t, sent.QueueOffset, m.QueueOffset)
	require.Equal(t, sent.MsgID, m.MsgID)
	require.Equal(t, sent.OffsetMsgID, m.OffsetMsgID)
	require.Equal(t, []string{"order-2"}, m.Keys)
	require.Equal(t, "TagB", m.Tags)
	require.Equal(t, "text", m.BodyEncoding)
	require.Equal(t, "second", m.Body)
	require.Equal(t, 6, m.BodyLength)
	require.NotNil(t, m.StoreTime)
	require.NotNil(t, m.BornTime)
	require.Equal(t, sent.MsgID, m.Properties[message.PropUniqKey])

	out = c.ok(t, "queryMsgById", "-i", sent.OffsetMsgID)
	require.Equal(t, []string{"Topic:", "orders"}, findRow(t, out, "Topic:"))
	require.Equal(t, []string{"Msg", "ID", "(UNIQ_KEY):", sent.MsgID}, findRow(t, out, "Msg", "ID"))
	require.Equal(t, []string{"Offset", "Msg", "ID:", sent.OffsetMsgID}, findRow(t, out, "Offset", "Msg"))
	require.Equal(t, []string{"Tags:", "TagB"}, findRow(t, out, "Tags:"))
	require.Equal(t, []string{"Reconsume", "Times:", "0"}, findRow(t, out, "Reconsume"))
	require.Contains(t, out, "Body (6 bytes, text):\n  second\n")

	// A binary body prints as hex with its length.
	bin := c.send(t, "orders", 0, []byte{0, 1, 2, 0xff}, map[string]string{"KEYS": "blob"})
	c.waitIndexed(t)
	c.okJSON(t, &msgs, "queryMsgById", "-i", bin.MsgID)
	require.Equal(t, "hex", msgs[0].BodyEncoding)
	require.Equal(t, "000102ff", msgs[0].Body)
	require.Equal(t, 4, msgs[0].BodyLength)
	require.Contains(t, c.ok(t, "queryMsgById", "-i", bin.MsgID), "Body (4 bytes, binary, hex):\n  000102ff\n")

	// queryMsgByKey finds messages by a KEYS token, within a time range.
	c.okJSON(t, &msgs, "queryMsgByKey", "-t", "orders", "-k", "customer-7")
	require.Len(t, msgs, 1)
	require.Equal(t, "hello world", msgs[0].Body)
	require.Equal(t, "TagA", msgs[0].Tags)
	c.okJSON(t, &msgs, "queryMsgByKey", "-t", "orders", "-k", "customer-7",
		"-b", strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10))
	require.Empty(t, msgs)
	require.Contains(t, c.ok(t, "queryMsgByKey", "-t", "orders", "-k", "nope"), "no message with key nope in topic orders")
	require.Contains(t, c.fails(t, exitUsage, "queryMsgByKey", "-t", "orders", "-k", "k", "-b", "soon"), `-b "soon" is not a time`)
	require.Contains(t, c.fails(t, exitUsage, "queryMsgByKey", "-t", "orders", "-k", " "), "-k (--msgKey) is empty")
	require.Contains(t, c.fails(t, exitUsage, "queryMsgByKey", "-t", "orders", "-k", "k", "--maxNum", "0"), "--maxNum 0: give at least 1")

	// queryMsgByOffset reads one queue offset.
	c.okJSON(t, &msgs, "queryMsgByOffset", "-t", "orders", "-b", "broker-a", "-i", "1", "-o", strconv.FormatInt(sent.QueueOffset, 10))
	require.Len(t, msgs, 1)
	require.Equal(t, sent.MsgID, msgs[0].MsgID)
	stderr := c.fails(t, exitError, "queryMsgByOffset", "-t", "orders", "-b", "broker-a", "-i", "1", "-o", "99")
	require.Contains(t, stderr, "no message at offset 99 of queue orders@broker-a#1")

	// Errors: a malformed id is a bad command line; an unreachable broker
	// is named.
	c.fails(t, exitUsage, "queryMsgById", "-i", "XYZ")
	require.Contains(t, c.fails(t, exitUsage, "queryMsgById", "-i", " , "), `-i " , " holds no message id`)
	dead := message.OffsetMsgID(mustAddrPort(t, "127.0.0.1:1"), 0)
	stderr = c.fails(t, exitError, "queryMsgById", "-i", dead)
	require.Contains(t, stderr, "127.0.0.1:1")
	stderr = c.fails(t, exitError, "queryMsgById", "-i", message.OffsetMsgID(mustAddrPort(t, c.broker), 1<<40))
	require.Contains(t, stderr, "SYSTEM_ERROR")
	require.Contains(t, stderr, c.broker)
}

func TestMessage_ConsumePrintAndReset(t *testing.T) {
	c := startCluster(t)
	c.ok(t, "updateTopic", "-t", "cm", "-b", c.broker, "-r", "1", "-w", "1")
	c.waitRoute(t, "cm")
	start := time.Now()
	for i := range 3 {
		c.send(t, "cm", 0, []byte("m"+strconv.Itoa(i)), nil)
	}
	c.waitIndexed(t)

	var res struct {
		Messages  []msgJSON `json:"messages"`
		Committed []struct {
			QueueID int   `json:"queueId"`
			Offset  int64 `json:"offset"`
		} `json:"committed"`
	}
	c.okJSON(t, &res, "consumeMessage", "-t", "cm", "-c", "2")
	require.Len(t, res.Messages, 2)
	require.Equal(t, "m0", res.Messages[0].Body)
	require.Empty(t, res.Committed, "no group, no commit")
	require.Contains(t, c.ok(t, "consumeMessage", "-t", "cm"), "3 message(s) from 1 queue(s); nothing committed (no -g)")

	// With a group: start at its offset and commit what was printed.
	c.okJSON(t, &res, "consumeMessage", "-t", "cm", "-g", "cg", "-c", "2")
	require.Len(t, res.Messages, 2)
	require.Equal(t, int64(2), res.Committed[0].Offset)
	out := c.ok(t, "consumeMessage", "-t", "cm", "-g", "cg")
	require.Contains(t, out, "m2")
	require.Contains(t, out, "1 message(s) from 1 queue(s); committed for group cg: broker-a#0=3")
	c.okJSON(t, &res, "consumeMessage", "-t", "cm", "-g", "cg")
	require.Empty(t, res.Messages)
	c.okJSON(t, &res, "consumeMessage", "-t", "cm", "-b", "broker-a", "-i", "0", "-o", "1")
	require.Len(t, res.Messages, 2)
	require.Equal(t, "m1", res.Messages[0].Body)
	c.fails(t, exitUsage, "consumeMessage", "-t", "cm", "-i", "0")
	require.Contains(t, c.fails(t, exitUsage, "consumeMessage", "-t", "cm", "-o", "-5"), "-o -5: the offset must be at least 0")

	// printMsg: every message in a time range.
	var msgs []msgJSON
	c.okJSON(t, &msgs, "printMsg", "-t", "cm")
	require.Len(t, msgs, 3)
	c.okJSON(t, &msgs, "printMsg", "-t", "cm", "-s", strconv.FormatInt(start.Add(-time.Minute).UnixMilli(), 10), "-e", "now")
	require.Len(t, msgs, 3)
	c.okJSON(t, &msgs, "printMsg", "-t", "cm", "-s", time.Now().Add(time.Hour).Format(time.RFC3339))
	require.Empty(t, msgs)
	require.Contains(t, c.ok(t, "printMsg", "-t", "cm", "-e", "0"), "no message in topic cm in that time range")
	// The error names the flag given: printMsg's begin is -s.
	require.Contains(t, c.fails(t, exitUsage, "printMsg", "-t", "cm", "-s", "yesterday"), `-s "yesterday" is not a time`)
	require.Contains(t, c.fails(t, exitUsage, "printMsg", "-t", "cm", "-s", "5000", "-e", "0"),
		"the end time "+fmtAt(time.UnixMilli(0))+" is before the begin time "+fmtAt(time.UnixMilli(5000)))

	// resetOffsetByTime moves the group back to the start.
	var reset struct {
		Queues []struct {
			QueueID int   `json:"queueId"`
			Offset  int64 `json:"offset"`
		} `json:"queues"`
	}
	c.okJSON(t, &reset, "resetOffsetByTime", "-g", "cg", "-t", "cm", "-s", "0")
	require.Len(t, reset.Queues, 1)
	require.Equal(t, int64(0), reset.Queues[0].Offset)
	out = c.ok(t, "consumerProgress", "-g", "cg", "-t", "cm")
	require.Equal(t, []string{"3", "0", "3"}, findRow(t, out, "cm", "broker-a", "0")[3:6])
	require.Contains(t, c.ok(t, "resetOffsetByTime", "-g", "cg", "-t", "cm", "-s", "0"),
		"reset offsets of group cg on topic cm to "+fmtAt(time.UnixMilli(0)))
	c.fails(t, exitUsage, "resetOffsetByTime", "-g", "cg", "-t", "cm", "-s", "soon")
}

func TestResendDLQ_PutsTheMessageIntoTheRetryTopic(t *testing.T) {
	c := startCluster(t)
	sent := c.send(t, "orders", 0, []byte("poison"), map[string]string{"KEYS": "k1", "TAGS": "TagA", "UNIQ_KEY": "AC1100010001000000000000000A0001"})
	c.waitIndexed(t)
	_, phys, err := message.ParseOffsetMsgID(sent.MsgID)
	require.NoError(t, err)
	// The group gave up on the message: it goes to %DLQ%cg.
	resp := c.invoke(t, c.broker, protocol.ConsumerSendMsgBack, &protocol.ConsumerSendMsgBackRequestHeader{
		Offset: phys, Group: "cg", DelayLevel: -1, OriginTopic: "orders"}, nil)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	c.waitRoute(t, "%DLQ%cg")
	c.waitIndexed(t)
	var dlq []msgJSON
	c.okJSON(t, &dlq, "printMsg", "-t", "%DLQ%cg")
	require.Len(t, dlq, 1)

	var res struct {
		MsgID string `json:"msgId"`
		From  struct {
			Topic string `json:"topic"`
		} `json:"from"`
		To struct {
			Topic       string `json:"topic"`
			BrokerAddr  string `json:"brokerAddr"`
			QueueOffset int64  `json:"queueOffset"`
			OffsetMsgID string `json:"offsetMsgId"`
		} `json:"to"`
		OriginalTopic string `json:"originalTopic"`
	}
	c.okJSON(t, &res, "resendDLQ", "-g", "cg", "-i", "AC1100010001000000000000000A0001")
	require.Equal(t, "%DLQ%cg", res.From.Topic)
	require.Equal(t, "%RETRY%cg", res.To.Topic)
	require.Equal(t, c.broker, res.To.BrokerAddr)
	require.Equal(t, "orders", res.OriginalTopic)
	c.waitIndexed(t)

	// The retry topic now holds it, with its id, body and original topic,
	// and reconsume times back at 0.
	var msgs []msgJSON
	c.okJSON(t, &msgs, "queryMsgById", "-i", res.To.OffsetMsgID)
	require.Equal(t, "%RETRY%cg", msgs[0].Topic)
	require.Equal(t, "AC1100010001000000000000000A0001", msgs[0].MsgID)
	require.Equal(t, "poison", msgs[0].Body)
	require.Equal(t, 0, msgs[0].ReconsumeTimes)
	require.Equal(t, "orders", msgs[0].Properties[message.PropRetryTopic])
	require.Equal(t, []string{"k1"}, msgs[0].Keys)
	require.NotContains(t, msgs[0].Properties, message.PropDelay)

	// By the offset id of the DLQ copy too; the text says what happened.
	out := c.ok(t, "resendDLQ", "-g", "cg", "-i", dlq[0].OffsetMsgID)
	require.Contains(t, out, "resent message AC1100010001000000000000000A0001 from %DLQ%cg")
	require.Contains(t, out, "to %RETRY%cg")
	require.Contains(t, out, "consumers of group cg will receive it again as a message of topic orders")
	c.waitIndexed(t)
	c.okJSON(t, &msgs, "printMsg", "-t", "%RETRY%cg")
	require.Len(t, msgs, 2)

	stderr := c.fails(t, exitError, "resendDLQ", "-g", "cg", "-i", "AC1100010001000000000000000AFFFF")
	require.Contains(t, stderr, "no message with id AC1100010001000000000000000AFFFF in %DLQ%cg (asked broker-a ("+c.broker+"))")
	stderr = c.fails(t, exitError, "resendDLQ", "-g", "nogroup", "-i", "AC1100010001000000000000000AFFFF")
	require.Contains(t, stderr, "group nogroup has no dead-letter topic %DLQ%nogroup")
	require.Contains(t, stderr, "TOPIC_NOT_EXIST")
}

// TestConsumeMessage_SQL: --sql prints only the messages whose properties
// match (a message lacking one does not), and with -g commits past the
// ones filtered away; a bad expression is a bad command line.
func TestConsumeMessage_SQL(t *testing.T) {
	c := startCluster(t)
	c.ok(t, "updateTopic", "-t", "cmsql", "-b", c.broker, "-r", "1", "-w", "1")
	c.waitRoute(t, "cmsql")
	for i, props := range []map[string]string{
		{"amount": "60", "region": "eu"}, {"amount": "60"}, {"region": "us"}, {"amount": "10", "region": "us"},
		{"amount": "99", "region": "us"}, {"amount": "x", "region": "eu"}, nil,
	} {
		c.send(t, "cmsql", 0, []byte("m"+strconv.Itoa(i)), props)
	}
	c.waitIndexed(t)
	const expr = "amount BETWEEN 50 AND 99 AND region IN ('eu','us')"
	var res struct {
		Messages  []msgJSON `json:"messages"`
		Committed []struct {
			Offset int64 `json:"offset"`
		} `json:"committed"`
	}
	c.okJSON(t, &res, "consumeMessage", "-t", "cmsql", "--sql", expr, "-g", "cgsql")
	var got []string
	for _, m := range res.Messages {
		got = append(got, m.Body)
	}
	require.Equal(t, []string{"m0", "m4"}, got)
	require.Equal(t, int64(7), res.Committed[0].Offset, "past the filtered tail")
	require.Contains(t, c.ok(t, "consumeMessage", "-t", "cmsql", "--sql", "region = 'us'"), "3 message(s) from 1 queue(s)")
	stderr := c.fails(t, exitUsage, "consumeMessage", "-t", "cmsql", "--sql", "amount >")
	require.Contains(t, stderr, `--sql "amount >": filter: column 9`)
}

// TestMessage_SendNotOKFails: a SYNC_MASTER with no slave stores the
// message but answers SEND_SLAVE_NOT_AVAILABLE: mqadmin prints the result
// and exits 1 saying why, where it exited 0.
func TestMessage_SendNotOKFails(t *testing.T) {
	c := startClusterWith(t, func(b *conf.Broker) { b.Role = conf.RoleSyncMaster })
	c.ok(t, "updateTopic", "-t", "orders", "-b", c.broker, "-r", "1", "-w", "1")
	c.waitRoute(t, "orders")
	r := c.mq(t, "sendMessage", "-t", "orders", "-p", "hello")
	require.Equal(t, exitError, r.code, r.stderr)
	require.Contains(t, r.stdout, "SEND_SLAVE_NOT_AVAILABLE", "the result is printed")
	require.Contains(t, r.stderr, "SEND_SLAVE_NOT_AVAILABLE: the message is stored on broker-a but not replicated: the master has no slave in sync")

	r = c.mq(t, "--json", "sendMessage", "-t", "orders", "-p", "hello")
	require.Equal(t, exitError, r.code, r.stderr)
	var sent sendJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &sent), r.stdout)
	require.Equal(t, "SEND_SLAVE_NOT_AVAILABLE", sent.Status)
}
