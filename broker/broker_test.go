package broker

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var codecs = []struct {
	name string
	st   remoting.SerializeType
}{{"json", remoting.SerializeJSON}, {"rocketmq", remoting.SerializeRocketMQ}, {"msgpack", remoting.SerializeMsgpack}}

// TestBroker_SendPull: send and pull round trips in all three header codecs.
func TestBroker_SendPull(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	for _, cc := range codecs {
		t.Run(cc.name, func(t *testing.T) {
			c := newClient(t, cc.st)
			topic := "orders-" + cc.name
			var ids []string
			for i, body := range seq("m", 5) {
				h := mustSend(t, c, b.Addr(), topic, 1, body, map[string]string{message.PropTags: "TagA", message.PropKeys: "k" + body, message.PropWait: "true"})
				require.Equal(t, int32(1), h.QueueID)
				require.Equal(t, int64(i), h.QueueOffset)
				ids = append(ids, h.MsgID)
			}
			waitIndexed(t, b)
			heartbeat(t, c, cc.st, b.Addr(), "cid-"+cc.name, "cg", map[string]string{topic: "*"})
			resp := invoke(t, c, b.Addr(), protocol.PullMessage, pullHeader("cg", topic, 1, 0, 0), nil)
			require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
			require.Equal(t, cc.st, resp.SerializeType, "replies use the request's codec")
			ph := pullExt(t, resp)
			require.Equal(t, int64(5), ph.NextBeginOffset)
			require.Equal(t, int64(5), ph.MaxOffset)
			recs := decodeRecords(t, resp.Body)
			require.Equal(t, seq("m", 5), recordBodies(t, resp.Body))
			for i, r := range recs {
				ap, off, err := message.ParseOffsetMsgID(ids[i])
				require.NoError(t, err)
				require.Equal(t, b.Addr(), ap.String(), "msgId names the broker")
				require.Equal(t, r.PhysicalOffset, off, "msgId names the record")
				v, _ := message.PropertyValueBytes(r.Properties, message.PropCluster)
				require.Equal(t, "DefaultCluster", string(v))
				_, ok := message.PropertyValueBytes(r.Properties, message.PropWait)
				require.False(t, ok, "WAIT is not stored (as Java)")
				v, _ = message.PropertyValueBytes(r.Properties, message.PropKeys)
				require.Equal(t, "k"+recordBodies(t, resp.Body)[i], string(v))
			}
			// Caught up: no new message.
			resp = invoke(t, c, b.Addr(), protocol.PullMessage, pullHeader("cg", topic, 1, 5, 0), nil)
			require.Equal(t, protocol.PullNotFound, int(resp.Code))
			require.Equal(t, int64(5), pullExt(t, resp).NextBeginOffset)
			// Past the end.
			resp = invoke(t, c, b.Addr(), protocol.PullMessage, pullHeader("cg", topic, 1, 9, 0), nil)
			require.Equal(t, protocol.PullOffsetMoved, int(resp.Code))
			require.Equal(t, int64(5), pullExt(t, resp).NextBeginOffset)
		})
	}
}

func TestBroker_PullErrors(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeJSON)
	mustSend(t, c, b.Addr(), "t", 0, "x", nil)
	resp := invoke(t, c, b.Addr(), protocol.PullMessage, pullHeader("nobody", "t", 0, 0, 0), nil)
	require.Equal(t, protocol.SubscriptionNotExist, int(resp.Code))
	require.Contains(t, resp.Remark, "heartbeat")
	resp = invoke(t, c, b.Addr(), protocol.PullMessage, pullHeader("g", "missing", 0, 0, pullSubscription), nil)
	require.Equal(t, protocol.TopicNotExist, int(resp.Code))
	resp = invoke(t, c, b.Addr(), protocol.PullMessage, pullHeader("g", "t", 99, 0, pullSubscription), nil)
	require.Equal(t, protocol.SystemError, int(resp.Code))
	require.Contains(t, resp.Remark, "out of range")
	resp = invoke(t, c, b.Addr(), protocol.PullMessage, rawExt{"topic": "t"}, nil)
	require.Equal(t, protocol.SystemError, int(resp.Code))
	require.Contains(t, resp.Remark, "bad pull header")
	resp = invoke(t, c, b.Addr(), 9999, nil, nil)
	require.Equal(t, protocol.RequestCodeNotSupported, int(resp.Code))
}

// TestBroker_TagFilter: a pull uses the subscription from the heartbeat.
func TestBroker_TagFilter(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeJSON)
	for i, tag := range []string{"TagA", "TagB", "TagC", "TagA"} {
		mustSend(t, c, b.Addr(), "t", 0, seq("m", 4)[i], map[string]string{message.PropTags: tag})
	}
	waitIndexed(t, b)
	heartbeat(t, c, remoting.SerializeJSON, b.Addr(), "cid", "cg", map[string]string{"t": "TagA || TagB"})
	resp := invoke(t, c, b.Addr(), protocol.PullMessage, pullHeader("cg", "t", 0, 0, 0), nil)
	require.Equal(t, []string{"m-0", "m-1", "m-3"}, recordBodies(t, resp.Body))
	// A subscription in the request (pull consumer) wins.
	resp = invoke(t, c, b.Addr(), protocol.PullMessage, &protocol.PullMessageRequestHeader{ConsumerGroup: "x", Topic: "t",
		MaxMsgNums: 32, SysFlag: pullSubscription, Subscription: "TagC"}, nil)
	require.Equal(t, []string{"m-2"}, recordBodies(t, resp.Body))
}

// TestBroker_LongPoll: a parked pull is answered by a later send, and other
// requests on the same connection are not blocked meanwhile.
func TestBroker_LongPoll(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeMsgpack)
	mustSend(t, c, b.Addr(), "t", 0, "first", nil)
	waitIndexed(t, b) // NB: so that offset 1 is the queue's end, and GET_MAX_OFFSET says 1
	heartbeat(t, c, remoting.SerializeMsgpack, b.Addr(), "cid", "cg", map[string]string{"t": "*"})
	got := make(chan *remoting.Command, 1)
	c.Invoke(context.Background(), b.Addr(), remoting.NewRequest(protocol.PullMessage,
		protocol.Ext(pullHeader("cg", "t", 0, 1, pullSuspend)), nil), remoting.Async(func(r *remoting.Command, err error) {
		require.NoError(t, err)
		got <- r
	}))
	require.Eventually(t, func() bool { return b.hold.Parked() == 1 }, 5*time.Second, time.Millisecond)
	// The connection still serves other requests.
	resp := invoke(t, c, b.Addr(), protocol.GetMaxOffset, &protocol.GetMaxOffsetRequestHeader{Topic: "t"}, nil)
	require.Equal(t, "1", resp.ExtFields["offset"])
	select {
	case r := <-got:
		t.Fatalf("answered before a message arrived: %d %s", r.Code, r.Remark)
	default:
	}
	mustSend(t, c, b.Addr(), "t", 0, "second", nil)
	select {
	case r := <-got:
		require.Equal(t, protocol.Success, int(r.Code), r.Remark)
		require.Equal(t, []string{"second"}, recordBodies(t, r.Body))
		require.Equal(t, int64(2), pullExt(t, r).NextBeginOffset)
	case <-time.After(10 * time.Second):
		t.Fatal("parked pull not answered after a send")
	}
}

// TestBroker_LongPollExpires: a parked pull is answered PULL_NOT_FOUND at its
// suspend timeout, and Close answers the ones still parked.
func TestBroker_LongPollExpires(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeJSON)
	mustSend(t, c, b.Addr(), "t", 0, "x", nil)
	waitIndexed(t, b)
	h := pullHeader("g", "t", 0, 1, pullSuspend|pullSubscription)
	h.SuspendTimeoutMillis = 50
	resp := invoke(t, c, b.Addr(), protocol.PullMessage, h, nil)
	require.Equal(t, protocol.PullNotFound, int(resp.Code))
	require.Equal(t, int64(1), pullExt(t, resp).NextBeginOffset)

	h.SuspendTimeoutMillis = 60000
	got := make(chan *remoting.Command, 1)
	c.Invoke(context.Background(), b.Addr(), remoting.NewRequest(protocol.PullMessage, protocol.Ext(h), nil),
		remoting.Async(func(r *remoting.Command, err error) {
			if err == nil {
				got <- r
			}
		}))
	require.Eventually(t, func() bool { return b.hold.Parked() == 1 }, 5*time.Second, time.Millisecond)
	go b.Close()
	select {
	case r := <-got:
		require.Equal(t, protocol.PullNotFound, int(r.Code))
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not answer the parked pull")
	}
}

// TestBroker_OffsetsSurviveRestart: committed offsets are persisted.
func TestBroker_OffsetsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	b := startBroker(t, cfg, Options{})
	c := newClient(t, remoting.SerializeJSON)
	for range 3 {
		mustSend(t, c, b.Addr(), "t", 2, "x", nil)
	}
	q := &protocol.QueryConsumerOffsetRequestHeader{ConsumerGroup: "cg", Topic: "t", QueueID: 2}
	resp := invoke(t, c, b.Addr(), protocol.QueryConsumerOffset, q, nil)
	require.Equal(t, protocol.Success, int(resp.Code), "a queue still starting at 0: offset 0")
	require.Equal(t, "0", resp.ExtFields["offset"])
	invoke(t, c, b.Addr(), protocol.UpdateConsumerOffset, &protocol.UpdateConsumerOffsetRequestHeader{
		ConsumerGroup: "cg", Topic: "t", QueueID: 2, CommitOffset: 2}, nil)
	// A pull with the commit flag stores the offset too.
	invoke(t, c, b.Addr(), protocol.PullMessage, func() *protocol.PullMessageRequestHeader {
		h := pullHeader("cg2", "t", 2, 1, pullCommitOffset|pullSubscription)
		h.CommitOffset = 1
		return h
	}(), nil)
	require.NoError(t, b.Close())

	b = startBroker(t, cfg, Options{})
	c2 := newClient(t, remoting.SerializeMsgpack)
	resp = invoke(t, c2, b.Addr(), protocol.QueryConsumerOffset, q, nil)
	require.Equal(t, "2", resp.ExtFields["offset"])
	q.ConsumerGroup = "cg2"
	resp = invoke(t, c2, b.Addr(), protocol.QueryConsumerOffset, q, nil)
	require.Equal(t, "1", resp.ExtFields["offset"])
	resp = invoke(t, c2, b.Addr(), protocol.GetMaxOffset, &protocol.GetMaxOffsetRequestHeader{Topic: "t", QueueID: 2}, nil)
	require.Equal(t, "3", resp.ExtFields["offset"], "messages survive too")
}

func TestBroker_Batch(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeJSON)
	body, err := message.AppendBatch(nil, []message.BatchItem{{Body: []byte("b0")}, {Body: []byte("b1"), Properties: "TAGS\x01TB\x02"}})
	require.NoError(t, err)
	h := protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "bt", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4, QueueID: 0, Batch: true}
	resp := invoke(t, c, b.Addr(), protocol.SendBatchMessage, func() *protocol.SendMessageRequestHeaderV2 { v := h.V2(); return &v }(), body)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	require.Len(t, strings.Split(resp.ExtFields["msgId"], ","), 2)
	waitIndexed(t, b)
	resp = invoke(t, c, b.Addr(), protocol.PullMessage, pullHeader("g", "bt", 0, 0, pullSubscription), nil)
	recs := decodeRecords(t, resp.Body)
	require.Equal(t, []string{"b0", "b1"}, recordBodies(t, resp.Body))
	tags, _ := message.PropertyValueBytes(recs[1].Properties, message.PropTags)
	require.Equal(t, "TB", string(tags))
	cl, _ := message.PropertyValueBytes(recs[1].Properties, message.PropCluster)
	require.Equal(t, "DefaultCluster", string(cl))
	// A delayed batch is refused.
	h.Properties = "DELAY\x012"
	resp = invoke(t, c, b.Addr(), protocol.SendBatchMessage, func() *protocol.SendMessageRequestHeaderV2 { v := h.V2(); return &v }(), body)
	require.Equal(t, protocol.MessageIllegal, int(resp.Code))
	// So is a batch with a member that has a delivery time.
	h.Properties = ""
	timed, err := message.AppendBatch(nil, []message.BatchItem{{Body: []byte("t0")},
		{Body: []byte("t1"), Properties: message.PropTimerDeliverMS + "\x011800000000000"}})
	require.NoError(t, err)
	resp = invoke(t, c, b.Addr(), protocol.SendBatchMessage, func() *protocol.SendMessageRequestHeaderV2 { v := h.V2(); return &v }(), timed)
	require.Equal(t, protocol.MessageIllegal, int(resp.Code))
	require.Contains(t, resp.Remark, message.PropTimerDeliverMS)
}

func TestBroker_SendErrors(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.AutoCreateTopic = false
	cfg.Store.MaxMessageSize = 1024
	b := startBroker(t, cfg, Options{})
	c := newClient(t, remoting.SerializeJSON)
	resp := send(t, c, b.Addr(), "unknown", 0, "x", nil)
	require.Equal(t, protocol.TopicNotExist, int(resp.Code))
	require.Contains(t, resp.Remark, "updateTopic")
	resp = send(t, c, b.Addr(), "SCHEDULE_TOPIC_XXXX", 0, "x", nil)
	require.Equal(t, protocol.NoPermission, int(resp.Code))
	invoke(t, c, b.Addr(), protocol.UpdateAndCreateTopic, &protocol.CreateTopicRequestHeader{Topic: "small", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}, nil)
	resp = send(t, c, b.Addr(), "small", 5, "x", nil)
	require.Equal(t, protocol.SystemError, int(resp.Code))
	require.Contains(t, resp.Remark, "out of range")
	resp = send(t, c, b.Addr(), "small", 0, strings.Repeat("x", 1025), nil)
	require.Equal(t, protocol.MessageIllegal, int(resp.Code))
	require.Contains(t, resp.Remark, "1024")
	resp = send(t, c, b.Addr(), "bad/name", 0, "x", nil)
	require.Equal(t, protocol.MessageIllegal, int(resp.Code))
	resp = invoke(t, c, b.Addr(), protocol.SendMessage, rawExt{"topic": "small"}, []byte("x"))
	require.Equal(t, protocol.SystemError, int(resp.Code))
}

// TestBroker_GarbageFrame: a garbage frame closes only its own connection.
func TestBroker_GarbageFrame(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeJSON)
	mustSend(t, c, b.Addr(), "t", 0, "x", nil)
	for _, garbage := range [][]byte{
		{0x01, 0x00, 0x00, 0x01, 0xFF, 0xFF, 0xFF, 0xFF}, // 16 MiB + 1
		{0, 0, 0, 8, 9, 0, 0, 1, 'x', 'x', 'x', 'x'},     // unknown serialize type
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
	} {
		nc, err := net.Dial("tcp", b.Addr())
		require.NoError(t, err)
		_, err = nc.Write(garbage)
		require.NoError(t, err)
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = nc.Read(make([]byte, 1))
		require.Error(t, err, "the broker closes a connection that sent garbage")
		nc.Close()
	}
	mustSend(t, c, b.Addr(), "t", 0, "still works", nil)
}

// TestBroker_PullMaxMessages: a pull returns what the client asks, up to
// pull_max_messages.
func TestBroker_PullMaxMessages(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.PullMaxMessages = 40
	b := startBroker(t, cfg, Options{})
	c := newClient(t, remoting.SerializeMsgpack)
	for i := range 50 {
		mustSend(t, c, b.Addr(), "many", 0, fmt.Sprintf("m%d", i), nil)
	}
	waitIndexed(t, b)
	for _, tc := range []struct{ ask, want int32 }{{32, 32}, {100, 40}, {0, 1}} {
		h := pullHeader("cg", "many", 0, 0, pullSubscription)
		h.Subscription, h.MaxMsgNums = "*", tc.ask
		resp := invoke(t, c, b.Addr(), protocol.PullMessage, h, nil)
		require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
		require.Len(t, decodeRecords(t, resp.Body), int(tc.want), "asked %d", tc.ask)
		require.Equal(t, int64(tc.want), pullExt(t, resp).NextBeginOffset)
	}
}

// TestBroker_AnswerIDs: pipelined sends and batches on one connection,
// answered from the reused answers (inline bursts; in sync flush mode, by
// the store's notifier later), each carry the offset ids of their own
// records, in both flush modes.
func TestBroker_AnswerIDs(t *testing.T) {
	for _, flush := range []string{conf.FlushAsync, conf.FlushSync} {
		t.Run(flush, func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			cfg.Store.Flush = flush
			b := startBroker(t, cfg, Options{})
			c := newClient(t, remoting.SerializeMsgpack)
			type sent struct {
				bodies []string
				ids    chan string
			}
			var all []sent
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for i := range 40 {
				s := sent{ids: make(chan string, 1)}
				h := protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "ids", DefaultTopic: "TBW102",
					DefaultTopicQueueNums: 1, QueueID: 0, BornTimestamp: time.Now().UnixMilli()}
				code, body := int16(protocol.SendMessageV2), []byte(fmt.Sprintf("m%d", i))
				s.bodies = []string{string(body)}
				if i%3 == 1 {
					items := []message.BatchItem{{Body: []byte(fmt.Sprintf("b%d.0", i))}, {Body: []byte(fmt.Sprintf("b%d.1", i))}}
					var err error
					body, err = message.AppendBatch(nil, items)
					require.NoError(t, err)
					code, h.Batch, s.bodies = protocol.SendBatchMessage, true, []string{string(items[0].Body), string(items[1].Body)}
				}
				v2 := h.V2()
				req := remoting.NewRequest(code, nil, body)
				req.ExtWriter = &v2
				_, err := c.Invoke(ctx, b.Addr(), req, remoting.Async(func(resp *remoting.Command, err error) {
					if assert.NoError(t, err) && assert.EqualValues(t, protocol.Success, resp.Code, resp.Remark) {
						var rh protocol.SendMessageResponseHeader
						assert.NoError(t, rh.FromExtPairs(resp.ExtPairs))
						s.ids <- rh.MsgID
					} else {
						s.ids <- ""
					}
				}))
				require.NoError(t, err)
				all = append(all, s)
			}
			answers, want := make([]string, len(all)), 0
			for i, s := range all {
				answers[i] = <-s.ids
				want += len(s.bodies)
			}
			waitIndexed(t, b)
			byPos := map[int64]string{}
			for len(byPos) < want {
				resp := invoke(t, c, b.Addr(), protocol.PullMessage, pullHeader("g", "ids", 0, int64(len(byPos)), pullSubscription), nil)
				require.EqualValues(t, protocol.Success, resp.Code, resp.Remark)
				for _, r := range decodeRecords(t, resp.Body) {
					byPos[r.PhysicalOffset] = string(r.Body)
				}
			}
			for i, s := range all {
				ids := strings.Split(answers[i], ",")
				require.Len(t, ids, len(s.bodies))
				for k, id := range ids {
					_, pos, err := message.ParseOffsetMsgID(id)
					require.NoError(t, err)
					require.Equal(t, s.bodies[k], byPos[pos], "id %s", id)
				}
			}
		})
	}
}

// TestBroker_CloseAfterFailedStart: a Start that fails (its port taken, or
// the metrics port) leaves a broker that Close shuts down with the error
// reported, not a panic (it used to unregister through a name server
// client Start never made).
func TestBroker_CloseAfterFailedStart(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	for _, tc := range []struct {
		name string
		set  func(*conf.Broker)
	}{
		{"listen", func(c *conf.Broker) { c.Listen = taken.Addr().String() }},
		{"metrics", func(c *conf.Broker) { c.MetricsListen = taken.Addr().String() }},
		// NB: the gRPC server's stream workers run from v5.New on: its
		// failed Listen left 256 of them (goleak, at the package's end).
		{"grpc", func(c *conf.Broker) { c.GRPC.Listen = taken.Addr().String() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(t.TempDir())
			c.NamesrvAddr = "127.0.0.1:1"
			tc.set(&c)
			b, err := New(c, Options{Logger: quiet()})
			require.NoError(t, err)
			err = b.Start()
			require.Error(t, err)
			assert.Contains(t, err.Error(), "address already in use")
			require.NotPanics(t, func() { _ = b.Close() })
		})
	}
}
