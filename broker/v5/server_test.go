package v5_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/store"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/acl"
	"github.com/sluicemq/sluice/internal/acl/sig"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/nameserver"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func quiet() *slog.Logger {
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Test accounts (testutil.WriteACL's format).
const (
	adminKey, adminSecret = "v5admin", "v5admin-secret"
	userKey, userSecret   = "v5user1", "v5user1-secret"
)

const testACL = `accounts:
  - accessKey: v5admin
    secretKey: v5admin-secret
    admin: true
  - accessKey: v5user1
    secretKey: v5user1-secret
    defaultTopicPerm: DENY
    topicPerms:
      - allowed=PUB
`

// startBroker starts a broker on free loopback ports, its gRPC port too.
func startBroker(t *testing.T, edit func(*conf.Broker)) *broker.Broker {
	t.Helper()
	return startBrokerEdit(t, edit, broker.Options{Logger: quiet()})
}

// startBrokerWith starts a broker with opts.
func startBrokerWith(t *testing.T, opts broker.Options) *broker.Broker {
	t.Helper()
	return startBrokerEdit(t, nil, opts)
}

func startBrokerEdit(t *testing.T, edit func(*conf.Broker), opts broker.Options) *broker.Broker {
	t.Helper()
	cfg := conf.DefaultBroker()
	cfg.Listen = "127.0.0.1:0"
	cfg.Store.Dir = t.TempDir()
	cfg.Store.SegmentSize = 8 << 20
	cfg.Store.MaxMessageSize = 1 << 20
	cfg.Store.Preallocate = false
	if edit != nil {
		edit(&cfg)
	}
	b, err := broker.New(cfg, opts)
	require.NoError(t, err)
	require.NoError(t, b.Start())
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	require.NotEmpty(t, b.GRPCAddr())
	return b
}

// createTopic creates topic on b over remoting (signed as admin when key
// is set).
func createTopic(t *testing.T, b *broker.Broker, topic string, queues int32, key, secret string, tlsOn bool) {
	t.Helper()
	opts := remoting.ClientOptions{SerializeType: remoting.SerializeJSON}
	if tlsOn {
		opts.TLS = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the broker's self-signed test certificate
	}
	if key != "" {
		opts.Sign = sig.Signer(key, secret, "")
	}
	c := remoting.NewClient(opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := protocol.CreateTopicRequestHeader{Topic: topic, DefaultTopic: "TBW102", ReadQueueNums: queues, WriteQueueNums: queues,
		Perm: 6, TopicFilterType: "SINGLE_TAG"}
	resp, err := c.Invoke(ctx, b.Addr(), remoting.NewRequest(protocol.UpdateAndCreateTopic, protocol.Ext(&h), nil))
	require.NoError(t, err)
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
}

// dial opens a v5 client to addr (TLS without verification when tlsOn).
func dial(t *testing.T, addr string, tlsOn bool) v2.MessagingServiceClient {
	t.Helper()
	creds := insecure.NewCredentials()
	if tlsOn {
		creds = credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the broker's self-signed test certificate
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return v2.NewMessagingServiceClient(cc)
}

// callCtx is a call's context with a client's metadata, signed when key
// is set.
func callCtx(t *testing.T, clientID, key, secret string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	kv := []string{"x-mq-language", "GO", "x-mq-protocol", "v2"}
	if clientID != "" {
		kv = append(kv, "x-mq-client-id", clientID)
	}
	if key != "" {
		dt := time.Now().Format("20060102T150405Z")
		kv = append(kv, "x-mq-date-time", dt, "authorization", acl.SignV5(key, secret, dt))
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

func msg(topic, id string, body string) *v2.Message {
	return &v2.Message{Topic: &v2.Resource{Name: topic}, Body: []byte(body),
		SystemProperties: &v2.SystemProperties{MessageId: id, MessageType: v2.MessageType_NORMAL,
			BornTimestamp: timestamppb.Now()}}
}

// readAll returns the messages stored in topic's queue.
func readAll(t *testing.T, s *store.Store, topic string, queue int32) []message.Record {
	t.Helper()
	// NB: an answered send may not be indexed yet: its put dispatches it
	// only when no dispatch is running, and wakes the dispatcher otherwise
	// (TestSend_FIFOAndDelay found its 5 acknowledged sends in no queue, in
	// a loaded CI run). Wait for the dispatcher to reach the log's end, as
	// the store's and the broker's tests do.
	require.Eventually(t, func() bool { return s.DispatchLag() == 0 }, 10*time.Second, time.Millisecond,
		"the dispatcher reaching the log's end")
	var out []message.Record
	res, err := s.Get(context.Background(), store.GetRequest{Topic: topic, QueueID: queue, MaxMsgs: 1000, MaxBytes: 16 << 20})
	require.NoError(t, err)
	for body := res.Body; len(body) > 0; {
		r, err := message.Decode(body)
		require.NoError(t, err)
		out = append(out, r)
		body = body[r.TotalSize:]
	}
	return out
}

// TestSend_RouteSettingsAndSend walks a producer's calls against a broker
// registered with a nameserver: the route names the broker's gRPC
// endpoint (from the nameserver), Telemetry answers the settings the SDKs
// need, and sends are stored with the client's id as UNIQ_KEY; a resend
// of the same id is stored once.
func TestSend_RouteSettingsAndSend(t *testing.T) {
	nsCfg := conf.DefaultNameserver()
	nsCfg.Listen = "127.0.0.1:0"
	ns, err := nameserver.New(nsCfg, quiet())
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	t.Cleanup(func() { ns.Close() })
	b := startBroker(t, func(c *conf.Broker) { c.NamesrvAddr = ns.Addr() })
	createTopic(t, b, "v5normal", 4, "", "", false)
	c := dial(t, b.GRPCAddr(), false)

	resp, err := c.QueryRoute(callCtx(t, "c1", "", ""), &v2.QueryRouteRequest{Topic: &v2.Resource{Name: "v5normal"}})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
	require.Len(t, resp.MessageQueues, 4)
	for i, mq := range resp.MessageQueues {
		require.Equal(t, int32(i), mq.Id)
		require.Equal(t, v2.Permission_READ_WRITE, mq.Permission)
		require.Equal(t, int32(0), mq.Broker.Id)
		a := mq.Broker.Endpoints.Addresses[0]
		require.Equal(t, b.GRPCAddr(), netJoin(a.Host, a.Port))
		require.Len(t, mq.AcceptMessageTypes, 4, "MIXED by default")
	}
	resp, err = c.QueryRoute(callCtx(t, "c1", "", ""), &v2.QueryRouteRequest{Topic: &v2.Resource{Name: "nosuchtopic"}})
	require.NoError(t, err)
	require.Equal(t, v2.Code_TOPIC_NOT_FOUND, resp.GetStatus().GetCode())

	// Telemetry: a producer's settings are answered OK with a body limit
	// and an exponential backoff.
	tctx, cancel := context.WithCancel(callCtx(t, "c1", "", ""))
	defer cancel()
	ts, err := c.Telemetry(tctx)
	require.NoError(t, err)
	pt := v2.ClientType_PRODUCER
	require.NoError(t, ts.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: &v2.Settings{
		ClientType: &pt, PubSub: &v2.Settings_Publishing{Publishing: &v2.Publishing{Topics: []*v2.Resource{{Name: "v5normal"}}}}}}}))
	got, err := ts.Recv()
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, got.GetStatus().GetCode())
	set := got.GetSettings()
	require.Equal(t, int32(1<<20), set.GetPublishing().GetMaxBodySize())
	require.True(t, set.GetPublishing().GetValidateMessageType())
	require.NotNil(t, set.GetBackoffPolicy().GetExponentialBackoff())
	// A consumer's: batch, long polling, fifo, backoff.
	st := v2.ClientType_SIMPLE_CONSUMER
	require.NoError(t, ts.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: &v2.Settings{
		ClientType: &st, PubSub: &v2.Settings_Subscription{Subscription: &v2.Subscription{Group: &v2.Resource{Name: "g1"}}}}}}))
	got, err = ts.Recv()
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, got.GetStatus().GetCode())
	sub := got.GetSettings().GetSubscription()
	require.Equal(t, int32(32), sub.GetReceiveBatchSize())
	require.Equal(t, 20*time.Second, sub.GetLongPollingTimeout().AsDuration())
	require.False(t, sub.GetFifo())
	require.Equal(t, int32(17), got.GetSettings().GetBackoffPolicy().GetMaxAttempts())
	cancel()

	hb, err := c.Heartbeat(callCtx(t, "c1", "", ""), &v2.HeartbeatRequest{ClientType: v2.ClientType_PRODUCER})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, hb.GetStatus().GetCode())

	// Sends: twice the same id (a resend) is one stored message.
	for range 2 {
		sr, err := c.SendMessage(callCtx(t, "c1", "", ""), &v2.SendMessageRequest{Messages: []*v2.Message{msg("v5normal", "01ID0001", "hello")}})
		require.NoError(t, err)
		require.Equal(t, v2.Code_OK, sr.GetStatus().GetCode(), sr.GetStatus().GetMessage())
		require.Equal(t, "01ID0001", sr.Entries[0].MessageId)
	}
	var recs []message.Record
	for q := range int32(4) {
		recs = append(recs, readAll(t, b.Store(), "v5normal", q)...)
	}
	require.Len(t, recs, 1, "the resend is a duplicate")
	require.Equal(t, "hello", string(recs[0].Body))
	id, _ := message.PropertyValue(string(recs[0].Properties), message.PropUniqKey)
	require.Equal(t, "01ID0001", id)

	nt, err := c.NotifyClientTermination(callCtx(t, "c1", "", ""), &v2.NotifyClientTerminationRequest{})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, nt.GetStatus().GetCode())
}

func netJoin(host string, port int32) string {
	return host + ":" + itoa(int(port))
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// TestSend_FIFOAndDelay: one message group's messages go to one queue in
// order; a delayed message waits in the schedule topic; a delivery time
// past 3 days is ILLEGAL_DELIVERY_TIME; bad input gets its code.
func TestSend_FIFOAndDelay(t *testing.T) {
	b := startBroker(t, nil)
	createTopic(t, b, "v5fifo", 8, "", "", false)
	c := dial(t, b.GRPCAddr(), false)
	send := func(m *v2.Message) *v2.SendMessageResponse {
		t.Helper()
		sr, err := c.SendMessage(callCtx(t, "c2", "", ""), &v2.SendMessageRequest{Messages: []*v2.Message{m}})
		require.NoError(t, err)
		return sr
	}
	for i := range 5 {
		m := msg("v5fifo", "FIFO"+itoa(i+1), "m"+itoa(i))
		g := "order-42"
		m.SystemProperties.MessageGroup = &g
		m.SystemProperties.MessageType = v2.MessageType_FIFO
		sr := send(m)
		require.Equal(t, v2.Code_OK, sr.GetStatus().GetCode(), sr.GetStatus().GetMessage())
		require.Equal(t, int64(i), sr.Entries[0].Offset, "one queue: consecutive offsets")
	}
	var recs []message.Record
	for q := range int32(8) {
		if r := readAll(t, b.Store(), "v5fifo", q); len(r) > 0 {
			require.Empty(t, recs, "one group, one queue")
			recs = r
		}
	}
	require.Len(t, recs, 5)
	for i, r := range recs {
		require.Equal(t, "m"+itoa(i), string(r.Body))
	}

	d := msg("v5fifo", "DELAY1", "later")
	d.SystemProperties.MessageType = v2.MessageType_DELAY
	d.SystemProperties.DeliveryTimestamp = timestamppb.New(time.Now().Add(time.Hour))
	sr := send(d)
	require.Equal(t, v2.Code_OK, sr.GetStatus().GetCode(), sr.GetStatus().GetMessage())
	var sched int
	for q := range int32(len(store.DefaultDelayLevels)) {
		sched += len(readAll(t, b.Store(), store.ScheduleTopic, q))
	}
	require.Equal(t, 1, sched, "the delayed message waits in the schedule topic")

	far := msg("v5fifo", "DELAY2", "too late")
	far.SystemProperties.MessageType = v2.MessageType_DELAY
	far.SystemProperties.DeliveryTimestamp = timestamppb.New(time.Now().Add(73 * time.Hour))
	require.Equal(t, v2.Code_ILLEGAL_DELIVERY_TIME, send(far).GetStatus().GetCode())

	require.Equal(t, v2.Code_TOPIC_NOT_FOUND, send(msg("v5nosuch", "X1", "x")).GetStatus().GetCode())
	require.Equal(t, v2.Code_MESSAGE_BODY_EMPTY, send(msg("v5fifo", "X2", "")).GetStatus().GetCode())
	require.Equal(t, v2.Code_MESSAGE_BODY_TOO_LARGE, send(msg("v5fifo", "X3", string(make([]byte, 1<<20+1)))).GetStatus().GetCode())
	require.Equal(t, v2.Code_ILLEGAL_TOPIC, send(msg("bad topic!", "X4", "x")).GetStatus().GetCode())
	require.Equal(t, v2.Code_FORBIDDEN, send(msg(store.ScheduleTopic, "X6", "x")).GetStatus().GetCode())

	// No client id: CLIENT_ID_REQUIRED.
	sr, err := c.SendMessage(callCtx(t, "", "", ""), &v2.SendMessageRequest{Messages: []*v2.Message{msg("v5fifo", "X7", "x")}})
	require.NoError(t, err)
	require.Equal(t, v2.Code_CLIENT_ID_REQUIRED, sr.GetStatus().GetCode())
	// QueryAssignment (served since the PushConsumer) names a bad group.
	qa, err := c.QueryAssignment(callCtx(t, "c2", "", ""), &v2.QueryAssignmentRequest{})
	require.NoError(t, err)
	require.Equal(t, v2.Code_ILLEGAL_CONSUMER_GROUP, qa.GetStatus().GetCode())
}

// TestACL_AndTLS: with ACL on, the v5 signature is checked against the
// same accounts (unsigned UNAUTHORIZED, a wrong secret UNAUTHORIZED, a
// topic the account may not publish FORBIDDEN); with TLS enforcing, the
// port takes TLS and refuses plaintext.
func TestACL_AndTLS(t *testing.T) {
	aclFile := testutil.WriteACL(t, testACL)
	b := startBroker(t, func(c *conf.Broker) {
		c.ACL.File = aclFile
		c.TLS.Mode = conf.TLSEnforcing
	})
	createTopic(t, b, "allowed", 2, adminKey, adminSecret, true)
	createTopic(t, b, "denied", 2, adminKey, adminSecret, true)
	c := dial(t, b.GRPCAddr(), true)
	send := func(ctx context.Context, topic string) v2.Code {
		t.Helper()
		sr, err := c.SendMessage(ctx, &v2.SendMessageRequest{Messages: []*v2.Message{msg(topic, "A1", "x")}})
		require.NoError(t, err)
		return sr.GetStatus().GetCode()
	}
	require.Equal(t, v2.Code_OK, send(callCtx(t, "c3", userKey, userSecret), "allowed"))
	require.Equal(t, v2.Code_FORBIDDEN, send(callCtx(t, "c3", userKey, userSecret), "denied"))
	require.Equal(t, v2.Code_UNAUTHORIZED, send(callCtx(t, "c3", "", ""), "allowed"))
	require.Equal(t, v2.Code_UNAUTHORIZED, send(callCtx(t, "c3", userKey, "wrong-secret"), "allowed"))
	require.Equal(t, v2.Code_OK, send(callCtx(t, "c3", adminKey, adminSecret), "denied"))

	plain := dial(t, b.GRPCAddr(), false)
	_, err := plain.Heartbeat(callCtx(t, "c3", adminKey, adminSecret), &v2.HeartbeatRequest{})
	require.Error(t, err, "enforcing: plaintext refused")
}

// TestTLS_Permissive: one port takes both.
func TestTLS_Permissive(t *testing.T) {
	b := startBroker(t, func(c *conf.Broker) { c.TLS.Mode = conf.TLSPermissive })
	for _, tlsOn := range []bool{false, true} {
		hb, err := dial(t, b.GRPCAddr(), tlsOn).Heartbeat(callCtx(t, "c4", "", ""), &v2.HeartbeatRequest{})
		require.NoError(t, err, "tls %v", tlsOn)
		require.Equal(t, v2.Code_OK, hb.GetStatus().GetCode())
	}
}

// receive runs one ReceiveMessage and returns its status and messages.
func receive(t *testing.T, c v2.MessagingServiceClient, ctx context.Context, req *v2.ReceiveMessageRequest) (*v2.Status, []*v2.Message) {
	t.Helper()
	rs, err := c.ReceiveMessage(ctx, req)
	require.NoError(t, err)
	var st *v2.Status
	var msgs []*v2.Message
	for {
		r, err := rs.Recv()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if s := r.GetStatus(); s != nil {
			st = s
		}
		if m := r.GetMessage(); m != nil {
			msgs = append(msgs, m)
		}
	}
	require.NotNil(t, st, "a receive always answers a status")
	return st, msgs
}

// TestPOP_ReceiveAckChange: a SimpleConsumer's receive takes each message
// once (with its handle, attempt 1, MD5 digest), an ack ends it, a change
// of invisible time returns a new handle and makes the old one invalid,
// nothing left answers MESSAGE_NOT_FOUND, and a waiting receive is woken
// by a send.
func TestPOP_ReceiveAckChange(t *testing.T) {
	b := startBroker(t, nil)
	createTopic(t, b, "v5pop", 2, "", "", false)
	c := dial(t, b.GRPCAddr(), false)
	for i := range 3 {
		tag := "TagA"
		m := msg("v5pop", "POP"+itoa(i), "p"+itoa(i))
		m.SystemProperties.Tag = &tag
		sr, err := c.SendMessage(callCtx(t, "c5", "", ""), &v2.SendMessageRequest{Messages: []*v2.Message{m}})
		require.NoError(t, err)
		require.Equal(t, v2.Code_OK, sr.GetStatus().GetCode())
	}
	req := func(poll time.Duration) *v2.ReceiveMessageRequest {
		return &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: "popg"},
			MessageQueue:       &v2.MessageQueue{Topic: &v2.Resource{Name: "v5pop"}, Id: 0},
			FilterExpression:   &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "TagA"},
			BatchSize:          32,
			InvisibleDuration:  durationpb.New(time.Minute),
			LongPollingTimeout: durationpb.New(poll)}
	}
	st, got := receive(t, c, callCtx(t, "c5", "", ""), req(time.Second))
	require.Equal(t, v2.Code_OK, st.GetCode(), st.GetMessage())
	require.Len(t, got, 3)
	seen := map[string]bool{}
	for _, m := range got {
		sp := m.GetSystemProperties()
		seen[sp.GetMessageId()] = true
		require.Equal(t, int32(1), sp.GetDeliveryAttempt())
		require.NotEmpty(t, sp.GetReceiptHandle())
		require.Equal(t, v2.DigestType_MD5, sp.GetBodyDigest().GetType())
		require.Equal(t, "TagA", sp.GetTag())
	}
	require.Len(t, seen, 3)

	st, got2 := receive(t, c, callCtx(t, "c5", "", ""), req(time.Second))
	require.Equal(t, v2.Code_MESSAGE_NOT_FOUND, st.GetCode(), "all in flight")
	require.Empty(t, got2)

	ack := func(h string) v2.Code {
		t.Helper()
		r, err := c.AckMessage(callCtx(t, "c5", "", ""), &v2.AckMessageRequest{Group: &v2.Resource{Name: "popg"},
			Topic: &v2.Resource{Name: "v5pop"}, Entries: []*v2.AckMessageEntry{{ReceiptHandle: h}}})
		require.NoError(t, err)
		return r.GetEntries()[0].GetStatus().GetCode()
	}
	h0 := got[0].GetSystemProperties().GetReceiptHandle()
	require.Equal(t, v2.Code_OK, ack(h0))
	require.Equal(t, v2.Code_INVALID_RECEIPT_HANDLE, ack(h0), "acked twice")
	require.Equal(t, v2.Code_INVALID_RECEIPT_HANDLE, ack("garbage"))

	h1 := got[1].GetSystemProperties().GetReceiptHandle()
	ch, err := c.ChangeInvisibleDuration(callCtx(t, "c5", "", ""), &v2.ChangeInvisibleDurationRequest{Group: &v2.Resource{Name: "popg"},
		Topic: &v2.Resource{Name: "v5pop"}, ReceiptHandle: h1, InvisibleDuration: durationpb.New(time.Hour)})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, ch.GetStatus().GetCode())
	require.NotEqual(t, h1, ch.GetReceiptHandle())
	require.Equal(t, v2.Code_INVALID_RECEIPT_HANDLE, ack(h1), "the old handle after a change")
	require.Equal(t, v2.Code_OK, ack(ch.GetReceiptHandle()))
	bad, err := c.ChangeInvisibleDuration(callCtx(t, "c5", "", ""), &v2.ChangeInvisibleDurationRequest{Group: &v2.Resource{Name: "popg"},
		Topic: &v2.Resource{Name: "v5pop"}, ReceiptHandle: got[2].GetSystemProperties().GetReceiptHandle(), InvisibleDuration: durationpb.New(time.Second)})
	require.NoError(t, err)
	require.Equal(t, v2.Code_ILLEGAL_INVISIBLE_TIME, bad.GetStatus().GetCode())
	require.Equal(t, got[2].GetSystemProperties().GetReceiptHandle(), bad.GetReceiptHandle(), "a failed change keeps the handle")

	// A waiting receive is woken by a send: it answers the message before
	// its 15 s long poll is over (a receive not woken would find it only
	// when its poll ends).
	type result struct {
		st   *v2.Status
		msgs []*v2.Message
	}
	done := make(chan result, 1)
	begin := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "c5")
		rs, err := c.ReceiveMessage(ctx, req(15*time.Second))
		if err != nil {
			done <- result{}
			return
		}
		var r result
		for {
			x, err := rs.Recv()
			if err != nil {
				break
			}
			if s := x.GetStatus(); s != nil {
				r.st = s
			}
			if m := x.GetMessage(); m != nil {
				r.msgs = append(r.msgs, m)
			}
		}
		done <- r
	}()
	tag := "TagA"
	late := msg("v5pop", "POPLATE", "late")
	late.SystemProperties.Tag = &tag
	// NB: the pause lets the receive park before the send, so the wake-up
	// is what answers it; a receive that starts after the send takes the
	// message at once, which passes too.
	time.Sleep(200 * time.Millisecond)
	sr, err := c.SendMessage(callCtx(t, "c5", "", ""), &v2.SendMessageRequest{Messages: []*v2.Message{late}})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, sr.GetStatus().GetCode())
	deadline := time.After(20 * time.Second)
	for {
		select {
		case r := <-done:
			require.Equal(t, v2.Code_OK, r.st.GetCode(), r.st.GetMessage())
			require.Len(t, r.msgs, 1)
			require.Equal(t, "POPLATE", r.msgs[0].GetSystemProperties().GetMessageId())
			require.Less(t, time.Since(begin), 15*time.Second, "answered by the arrival, not by the end of the poll")
			return
		case <-deadline:
			t.Fatal("the waiting receive did not answer")
		}
	}
}

// TestPOP_StateSurvivesRestart: after a broker restart, a handle received
// before it still acks, and acked messages are not delivered again.
func TestPOP_StateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	start := func() *broker.Broker {
		cfg := conf.DefaultBroker()
		cfg.Listen = "127.0.0.1:0"
		cfg.Store.Dir = dir
		cfg.Store.SegmentSize = 8 << 20
		cfg.Store.MaxMessageSize = 1 << 20
		cfg.Store.Preallocate = false
		b, err := broker.New(cfg, broker.Options{Logger: quiet()})
		require.NoError(t, err)
		require.NoError(t, b.Start())
		return b
	}
	b := start()
	createTopic(t, b, "v5popr", 1, "", "", false)
	c := dial(t, b.GRPCAddr(), false)
	for i := range 2 {
		sr, err := c.SendMessage(callCtx(t, "c6", "", ""), &v2.SendMessageRequest{Messages: []*v2.Message{msg("v5popr", "R"+itoa(i), "r")}})
		require.NoError(t, err)
		require.Equal(t, v2.Code_OK, sr.GetStatus().GetCode())
	}
	req := &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: "popr"},
		MessageQueue:      &v2.MessageQueue{Topic: &v2.Resource{Name: "v5popr"}},
		BatchSize:         8,
		InvisibleDuration: durationpb.New(time.Minute), LongPollingTimeout: durationpb.New(time.Second)}
	st, got := receive(t, c, callCtx(t, "c6", "", ""), req)
	require.Equal(t, v2.Code_OK, st.GetCode())
	require.Len(t, got, 2)
	ack := func(c v2.MessagingServiceClient, h string) v2.Code {
		t.Helper()
		r, err := c.AckMessage(callCtx(t, "c6", "", ""), &v2.AckMessageRequest{Group: &v2.Resource{Name: "popr"},
			Topic: &v2.Resource{Name: "v5popr"}, Entries: []*v2.AckMessageEntry{{ReceiptHandle: h}}})
		require.NoError(t, err)
		return r.GetEntries()[0].GetStatus().GetCode()
	}
	require.Equal(t, v2.Code_OK, ack(c, got[0].GetSystemProperties().GetReceiptHandle()))
	require.NoError(t, b.Close())

	b = start()
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	c = dial(t, b.GRPCAddr(), false)
	require.Equal(t, v2.Code_OK, ack(c, got[1].GetSystemProperties().GetReceiptHandle()), "a handle from before the restart")
	st, again := receive(t, c, callCtx(t, "c6", "", ""), req)
	require.Equal(t, v2.Code_MESSAGE_NOT_FOUND, st.GetCode(), "nothing delivered again")
	require.Empty(t, again)
}

// TestPOP_RedeliveryAndDeadLetter: a message not acked within its
// invisible time is delivered again with attempt 2; past the group's max
// attempts (retryMaxTimes 1 + 1) it goes to %DLQ%group instead.
func TestPOP_RedeliveryAndDeadLetter(t *testing.T) {
	var skew atomic.Int64
	b := startBrokerWith(t, broker.Options{Logger: quiet(), PopClock: func() time.Time {
		return time.Now().Add(time.Duration(skew.Load()))
	}})
	createTopic(t, b, "v5dlq", 1, "", "", false)
	gc := protocol.DefaultSubscriptionGroupConfig("dlqg")
	gc.RetryMaxTimes = 1
	body, err := json.Marshal(gc)
	require.NoError(t, err)
	rc := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON})
	defer rc.Close()
	resp, err := rc.Invoke(callCtx(t, "", "", ""), b.Addr(), remoting.NewRequest(protocol.UpdateAndCreateSubscriptionGroup, nil, body))
	require.NoError(t, err)
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)

	c := dial(t, b.GRPCAddr(), false)
	sr, err := c.SendMessage(callCtx(t, "c7", "", ""), &v2.SendMessageRequest{Messages: []*v2.Message{msg("v5dlq", "DLQ1", "d")}})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, sr.GetStatus().GetCode())
	req := &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: "dlqg"},
		MessageQueue: &v2.MessageQueue{Topic: &v2.Resource{Name: "v5dlq"}}, BatchSize: 8,
		InvisibleDuration: durationpb.New(10 * time.Second), LongPollingTimeout: durationpb.New(time.Second)}
	for attempt := int32(1); attempt <= 2; attempt++ {
		st, got := receive(t, c, callCtx(t, "c7", "", ""), req)
		require.Equal(t, v2.Code_OK, st.GetCode(), "attempt %d: %s", attempt, st.GetMessage())
		require.Len(t, got, 1)
		require.Equal(t, attempt, got[0].GetSystemProperties().GetDeliveryAttempt())
		require.Equal(t, "DLQ1", got[0].GetSystemProperties().GetMessageId())
		skew.Add(int64(11 * time.Second))
	}
	st, got := receive(t, c, callCtx(t, "c7", "", ""), req)
	require.Equal(t, v2.Code_MESSAGE_NOT_FOUND, st.GetCode(), "past its max attempts: dead-lettered")
	require.Empty(t, got)
	dead := readAll(t, b.Store(), "%DLQ%dlqg", 0)
	require.Len(t, dead, 1)
	id, _ := message.PropertyValue(string(dead[0].Properties), message.PropUniqKey)
	require.Equal(t, "DLQ1", id)
	require.Equal(t, int32(2), dead[0].ReconsumeTimes)
}
