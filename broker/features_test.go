package broker

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pullAll pulls a queue from offset 0 with an explicit subscription.
func pullAll(t *testing.T, c *remoting.Client, b *Broker, topic string, qid int32) []message.Record {
	t.Helper()
	resp := invoke(t, c, b.Addr(), protocol.PullMessage, pullHeader("inspect", topic, qid, 0, pullSubscription), nil)
	if resp.Code != protocol.Success {
		return nil
	}
	return decodeRecords(t, resp.Body)
}

// TestBroker_DeliveryTime: a message with TIMER_DELIVER_MS (RocketMQ 5's
// timer message) is delivered within timerSlack of its time, after waiting
// in more than one delay level; a time due now goes at once; one too far
// ahead, or not a number, is refused.
func TestBroker_DeliveryTime(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeJSON)
	at := time.Now().Add(2300 * time.Millisecond)
	h := mustSend(t, c, b.Addr(), "tm", 0, "timed", map[string]string{message.PropTimerDeliverMS: strconv.FormatInt(at.UnixMilli(), 10)})
	_, pos, err := message.ParseOffsetMsgID(h.MsgID)
	require.NoError(t, err)
	raw, err := b.store.ReadMessage(pos)
	require.NoError(t, err)
	sr, err := message.Decode(raw)
	require.NoError(t, err)
	require.Equal(t, "SCHEDULE_TOPIC_XXXX", string(sr.Topic), "stored to wait")
	mustSend(t, c, b.Addr(), "tm", 0, "due", map[string]string{message.PropTimerDeliverMS: strconv.FormatInt(time.Now().UnixMilli(), 10)})

	var recs []message.Record
	require.Eventually(t, func() bool { recs = pullAll(t, c, b, "tm", 0); return len(recs) == 2 }, 15*time.Second, 20*time.Millisecond)
	require.Equal(t, "due", string(recs[0].Body), "a time due now is not delayed")
	got := recs[1]
	require.Equal(t, "timed", string(got.Body))
	require.GreaterOrEqual(t, got.StoreTimestamp, at.Add(-timerSlack).UnixMilli(), "delivered before its time")
	hops := b.store.MaxOffset("SCHEDULE_TOPIC_XXXX", 0)
	require.GreaterOrEqual(t, hops, int64(2), "2.3 s is more than one wait of level 1 (1 s)")
	_, hasDelay := message.PropertyValueBytes(got.Properties, message.PropDelay)
	require.False(t, hasDelay)

	resp := send(t, c, b.Addr(), "tm", 0, "far", map[string]string{
		message.PropTimerDeliverMS: strconv.FormatInt(time.Now().Add(maxTimerDelay+time.Hour).UnixMilli(), 10)})
	require.Equal(t, protocol.MessageIllegal, int(resp.Code))
	require.Contains(t, resp.Remark, "at most")
	resp = send(t, c, b.Addr(), "tm", 0, "bad", map[string]string{message.PropTimerDeliverMS: "soon"})
	require.Equal(t, protocol.MessageIllegal, int(resp.Code))
}

func TestTimerLevel(t *testing.T) {
	for _, tc := range []struct {
		wait  time.Duration
		level int
		ok    bool
	}{
		{0, 0, false}, {-time.Hour, 0, false}, {499 * time.Millisecond, 0, false},
		{500 * time.Millisecond, 1, true}, {4 * time.Second, 1, true}, {5 * time.Second, 2, true},
		{90 * time.Second, 5, true}, {3 * time.Hour, 18, true},
	} {
		level, ok := timerLevel(tc.wait)
		require.Equal(t, tc.ok, ok, "%s", tc.wait)
		require.Equal(t, tc.level, level, "%s", tc.wait)
	}
}

// TestBroker_DelayLevel: a message with DELAY=1 is delivered to its topic no
// earlier than one second after it was stored.
func TestBroker_DelayLevel(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeJSON)
	mustSend(t, c, b.Addr(), "t", 0, "now", nil)
	sentAt := time.Now()
	h := mustSend(t, c, b.Addr(), "t", 0, "later", map[string]string{message.PropDelay: "1"})
	_, pos, err := message.ParseOffsetMsgID(h.MsgID)
	require.NoError(t, err)
	sched, err := b.store.ReadMessage(pos)
	require.NoError(t, err)
	sr, err := message.Decode(sched)
	require.NoError(t, err)
	require.Equal(t, "SCHEDULE_TOPIC_XXXX", string(sr.Topic))
	waitIndexed(t, b)
	early := pullAll(t, c, b, "t", 0)
	// NB: only meaningful while the delay surely has not run out; the
	// delay itself is checked on the store timestamps below.
	if time.Since(sentAt) < 500*time.Millisecond {
		require.Len(t, early, 1, "not delivered yet")
	} else {
		t.Log("slow run: the early pull came too late to check 'not delivered yet'")
	}
	var recs []message.Record
	require.Eventually(t, func() bool { recs = pullAll(t, c, b, "t", 0); return len(recs) == 2 }, 10*time.Second, 20*time.Millisecond)
	got := recs[1]
	require.Equal(t, "later", string(got.Body))
	require.GreaterOrEqual(t, got.StoreTimestamp-sr.StoreTimestamp, int64(1000), "delivered after its delay")
	_, hasDelay := message.PropertyValueBytes(got.Properties, message.PropDelay)
	require.False(t, hasDelay)
	real, _ := message.PropertyValueBytes(got.Properties, message.PropRealTopic)
	require.Equal(t, "t", string(real))
}

// TestBroker_RetryThenDLQ: a message sent back goes to %RETRY%<group> after
// its delay with reconsumeTimes 1; past maxReconsumeTimes it goes to the DLQ,
// which can be read.
func TestBroker_RetryThenDLQ(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeJSON)
	h := mustSend(t, c, b.Addr(), "t", 0, "fragile", map[string]string{message.PropUniqKey: "U1"})
	_, pos, err := message.ParseOffsetMsgID(h.MsgID)
	require.NoError(t, err)
	maxRe := int32(1)
	back := &protocol.ConsumerSendMsgBackRequestHeader{Offset: pos, Group: "cg", DelayLevel: 1, OriginMsgID: h.MsgID,
		OriginTopic: "t", MaxReconsumeTimes: &maxRe}
	resp := invoke(t, c, b.Addr(), protocol.ConsumerSendMsgBack, back, nil)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	var retry []message.Record
	require.Eventually(t, func() bool { retry = pullAll(t, c, b, "%RETRY%cg", 0); return len(retry) == 1 }, 10*time.Second, 20*time.Millisecond)
	r := retry[0]
	require.Equal(t, int32(1), r.ReconsumeTimes)
	require.Equal(t, "fragile", string(r.Body))
	for name, want := range map[string]string{message.PropRetryTopic: "t", message.PropOriginMessageID: "U1", message.PropUniqKey: "U1"} {
		v, _ := message.PropertyValueBytes(r.Properties, name)
		require.Equal(t, want, string(v), name)
	}
	// Fails again: reconsumeTimes 1 >= max 1 → DLQ at once.
	back.Offset = r.PhysicalOffset
	resp = invoke(t, c, b.Addr(), protocol.ConsumerSendMsgBack, back, nil)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	var dlq []message.Record
	require.Eventually(t, func() bool { dlq = pullAll(t, c, b, "%DLQ%cg", 0); return len(dlq) == 1 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, "fragile", string(dlq[0].Body))
	require.Equal(t, int32(2), dlq[0].ReconsumeTimes)
	// A producer resending to the retry topic past the limit also lands in the DLQ (spec 3.1 step 4).
	sh := &protocol.SendMessageRequestHeader{ProducerGroup: "CLIENT_INNER_PRODUCER", Topic: "%RETRY%cg", QueueID: 0,
		ReconsumeTimes: 3, MaxReconsumeTimes: &maxRe, BornTimestamp: time.Now().UnixMilli()}
	resp = invoke(t, c, b.Addr(), protocol.SendMessage, sh, []byte("resent"))
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	require.Eventually(t, func() bool { return len(pullAll(t, c, b, "%DLQ%cg", 0)) == 2 }, 10*time.Second, 10*time.Millisecond)
	// Send-back of a missing offset is an error with a remark.
	back.Offset = 1 << 40
	resp = invoke(t, c, b.Addr(), protocol.ConsumerSendMsgBack, back, nil)
	require.Equal(t, protocol.SystemError, int(resp.Code))
	require.Contains(t, resp.Remark, "no message")
}

func TestBroker_OrderlyLocks(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	c := newClient(t, remoting.SerializeJSON)
	lock := func(client string, qids ...int32) []protocol.MessageQueue {
		req := protocol.LockBatchRequest{ConsumerGroup: "cg", ClientID: client}
		for _, q := range qids {
			req.MQSet = append(req.MQSet, protocol.MessageQueue{Topic: "t", BrokerName: "broker-a", QueueID: q})
		}
		body, err := remoting.EncodeBody(remoting.SerializeJSON, req)
		require.NoError(t, err)
		resp := invoke(t, c, b.Addr(), protocol.LockBatchMQ, nil, body)
		require.Equal(t, protocol.Success, int(resp.Code))
		var out protocol.LockBatchResponse
		require.NoError(t, remoting.DecodeBody(remoting.SerializeJSON, resp.Body, &out))
		return out.LockOKMQSet
	}
	require.Len(t, lock("A", 0, 1), 2)
	require.Empty(t, lock("B", 0, 1), "held by A")
	body, _ := remoting.EncodeBody(remoting.SerializeJSON, protocol.LockBatchRequest{ConsumerGroup: "cg", ClientID: "A",
		MQSet: []protocol.MessageQueue{{Topic: "t", BrokerName: "broker-a", QueueID: 1}}})
	resp := invoke(t, c, b.Addr(), protocol.UnlockBatchMQ, nil, body)
	require.Equal(t, protocol.Success, int(resp.Code))
	got := lock("B", 0, 1)
	require.Equal(t, []protocol.MessageQueue{{Topic: "t", BrokerName: "broker-a", QueueID: 1}}, got)
}

// TestBroker_ConsumerMembership: a second consumer joining a group makes the
// broker notify the first; a connection close removes its member.
func TestBroker_ConsumerMembership(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	var mu sync.Mutex
	notified := 0
	c1 := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON, Logger: quiet(),
		OnRequest: func(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
			if req.Code == protocol.NotifyConsumerIDsChanged && req.ExtFields["consumerGroup"] == "cg" {
				mu.Lock()
				notified++
				mu.Unlock()
			}
		}})
	defer c1.Close()
	told := func(n int) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return notified >= n }
	}
	heartbeat(t, c1, remoting.SerializeJSON, b.Addr(), "c1", "cg", map[string]string{"t": "*"})
	// NB: changes that come faster than the notifier sends make one
	// notification; these are told apart.
	require.Eventually(t, told(1), 5*time.Second, time.Millisecond, "c1 is told when it joins")
	c2 := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON, Logger: quiet()})
	heartbeat(t, c2, remoting.SerializeJSON, b.Addr(), "c2", "cg", map[string]string{"t": "*"})
	list := func() []string {
		resp := invoke(t, c1, b.Addr(), protocol.GetConsumerListByGroup, &protocol.GetConsumerListByGroupRequestHeader{ConsumerGroup: "cg"}, nil)
		var l protocol.ConsumerList
		if resp.Code == protocol.Success {
			require.NoError(t, remoting.DecodeBody(remoting.SerializeJSON, resp.Body, &l))
		}
		return l.ConsumerIDList
	}
	require.Equal(t, []string{"c1", "c2"}, list())
	require.Eventually(t, told(2), 5*time.Second, time.Millisecond, "c1 is told when c2 joins")
	require.NoError(t, c2.Close())
	require.Eventually(t, func() bool { return len(list()) == 1 }, 5*time.Second, 5*time.Millisecond, "a closed connection leaves the group")
	_, ok := b.topics.Get("%RETRY%cg")
	require.True(t, ok, "the heartbeat created the retry topic")
}

// TestBroker_Busy: sends beyond send_queue_size waiting for the store are
// answered SYSTEM_BUSY with a remark, and counted.
func TestBroker_Busy(t *testing.T) {
	g := newFsyncGate()
	cfg := testConfig(t.TempDir())
	cfg.Store.Flush = "sync"
	cfg.Store.SendQueueSize = 2
	opts := Options{}
	opts.Store.OpenFile = func(path string, flag int, perm os.FileMode) (commitlog.File, error) {
		f, err := commitlog.OSOpenFile(path, flag, perm)
		return gatedFile{f, g}, err
	}
	b := startBroker(t, cfg, opts)
	c := newClient(t, remoting.SerializeJSON)
	mustSend(t, c, b.Addr(), "t", 0, "warm", nil)
	// NB: a handler releases its slot just after writing its reply.
	require.Eventually(t, func() bool { return len(b.sendSem) == 0 }, 10*time.Second, time.Millisecond)
	g.hold()
	var gateOnce sync.Once
	release := func() { gateOnce.Do(g.release) }
	t.Cleanup(release) // never leave the flusher blocked
	codes := make(chan int16, 3)
	for range 2 {
		go func() {
			h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "t", QueueID: 0, BornTimestamp: 1}
			resp, err := c.Invoke(context.Background(), b.Addr(), remoting.NewRequest(protocol.SendMessage, protocol.Ext(h), []byte("held")))
			if err != nil {
				t.Logf("held send: %v", err)
				codes <- -1
				return
			}
			if resp.Code != 0 {
				t.Logf("held send: %d %s", resp.Code, resp.Remark)
			}
			codes <- resp.Code
		}()
	}
	if !assert.Eventually(t, func() bool { return len(b.sendSem) == 2 }, 10*time.Second, time.Millisecond) {
		var got []int16
		for len(codes) > 0 {
			got = append(got, <-codes)
		}
		t.Fatalf("two sends should wait for the store: %d waiting, answered so far: %v", len(b.sendSem), got)
	}
	resp := send(t, c, b.Addr(), "t", 0, "third", nil)
	require.Equal(t, protocol.SystemBusy, int(resp.Code))
	require.Contains(t, resp.Remark, "send_queue_size")
	require.Equal(t, int64(1), b.stats.busy.Load())
	release()
	require.Equal(t, protocol.Success, int(<-codes))
	require.Equal(t, protocol.Success, int(<-codes))
}

// TestBroker_DiskFull: above the full watermark sends get
// SERVICE_NOT_AVAILABLE naming the watermark, and resume when space returns.
func TestBroker_DiskFull(t *testing.T) {
	var mu sync.Mutex
	usage := 0.5
	cfg := testConfig(t.TempDir())
	cfg.Store.RetentionInterval = 10 * time.Millisecond
	opts := Options{}
	opts.Store.DiskUsage = func(string) (float64, error) { mu.Lock(); defer mu.Unlock(); return usage, nil }
	b := startBroker(t, cfg, opts)
	c := newClient(t, remoting.SerializeJSON)
	mustSend(t, c, b.Addr(), "t", 0, "ok", nil)
	mu.Lock()
	usage = 0.95
	mu.Unlock()
	var resp *remoting.Command
	require.Eventually(t, func() bool { resp = send(t, c, b.Addr(), "t", 0, "x", nil); return resp.Code != protocol.Success },
		5*time.Second, 5*time.Millisecond)
	require.Equal(t, protocol.ServiceNotAvailable, int(resp.Code))
	require.Contains(t, resp.Remark, "90.0% full watermark")
	mu.Lock()
	usage = 0.5
	mu.Unlock()
	require.Eventually(t, func() bool { return send(t, c, b.Addr(), "t", 0, "x", nil).Code == protocol.Success },
		5*time.Second, 5*time.Millisecond)
}

// TestBroker_GoldenClientFrames replays frames the official Go client sent
// (testdata/rocketmq-client-go) and checks the broker accepts them.
func TestBroker_GoldenClientFrames(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.LongPoll.MaxSuspend = 200 * time.Millisecond // the captured pull asks to be held 20 s
	b := startBroker(t, cfg, Options{})
	c := newClient(t, remoting.SerializeJSON)
	// The captures used topic SluiceTopic with 2 queues on broker-a.
	invoke(t, c, b.Addr(), protocol.UpdateAndCreateTopic, &protocol.CreateTopicRequestHeader{Topic: "SluiceTopic",
		ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}, nil)
	nc, err := net.Dial("tcp", b.Addr())
	require.NoError(t, err)
	defer nc.Close()
	br := bufio.NewReader(nc)
	roundTrip := func(name string) *remoting.Command {
		frame, err := os.ReadFile(filepath.Join("testdata", "rocketmq-client-go", name+".bin"))
		require.NoError(t, err)
		_, err = nc.Write(frame)
		require.NoError(t, err)
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			var lenBuf [4]byte
			_, err = io.ReadFull(br, lenBuf[:])
			require.NoError(t, err, name)
			rest := make([]byte, binary.BigEndian.Uint32(lenBuf[:]))
			_, err = io.ReadFull(br, rest)
			require.NoError(t, err)
			resp, _, err := remoting.DecodeFrame(append(lenBuf[:], rest...), 16<<20)
			require.NoError(t, err)
			require.Equal(t, remoting.SerializeJSON, resp.SerializeType)
			if !resp.IsResponse() {
				// The broker calls the client back (NOTIFY_CONSUMER_IDS_CHANGED).
				require.Equal(t, protocol.NotifyConsumerIDsChanged, int(resp.Code))
				continue
			}
			return resp
		}
	}
	for _, name := range []string{"06-heart-beat-producer", "02-send-message", "04-send-batch-message",
		"05-send-message-delay-level-3", "07-heart-beat-push-consumer"} {
		resp := roundTrip(name)
		require.Equal(t, protocol.Success, int(resp.Code), "%s: %s", name, resp.Remark)
	}
	waitIndexed(t, b)
	resp := roundTrip("08-get-consumer-list-by-group")
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	var l protocol.ConsumerList
	require.NoError(t, remoting.DecodeBody(remoting.SerializeJSON, resp.Body, &l))
	require.Len(t, l.ConsumerIDList, 1)
	resp = roundTrip("09-query-consumer-offset")
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	_, err = strconv.Atoi(resp.ExtFields["offset"])
	require.NoError(t, err)
	resp = roundTrip("17-get-max-offset")
	require.Equal(t, protocol.Success, int(resp.Code))
	resp = roundTrip("10-pull-message-queue0")
	require.Contains(t, []int16{protocol.Success, protocol.PullNotFound, protocol.PullRetryImmediately}, resp.Code, resp.Remark)
	require.NotEmpty(t, resp.ExtFields["nextBeginOffset"])
	resp = roundTrip("18-lock-batch-mq")
	require.Equal(t, protocol.Success, int(resp.Code))
	var lk protocol.LockBatchResponse
	require.NoError(t, remoting.DecodeBody(remoting.SerializeJSON, resp.Body, &lk))
	require.NotEmpty(t, lk.LockOKMQSet)
	resp = roundTrip("19-unlock-batch-mq")
	require.Equal(t, protocol.Success, int(resp.Code))
}
