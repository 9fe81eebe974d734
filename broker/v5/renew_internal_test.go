package v5

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicemq/sluice/broker/pop"
	"github.com/sluicemq/sluice/internal/message"
)

// popBackend is fakeBackend with POP over a real pop.Table on one queue
// of any topic, on a fake clock, and routes to answer.
type popBackend struct {
	fakeBackend
	clock  *fakeClock
	tab    *pop.Table
	routes map[string][]RouteBroker

	mu   sync.Mutex
	next int64   // messages stored: offsets [0, next)
	dead []int32 // dead-lettered: each one's broker attempt
}

func (b *popBackend) Route(_ context.Context, name string) ([]RouteBroker, error) {
	if r, ok := b.routes[name]; ok {
		return r, nil
	}
	return nil, ErrTopicNotFound
}

func (b *popBackend) store(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next += int64(n)
}

func (b *popBackend) Pop(_ context.Context, r PopRequest) ([]Popped, *v2.Status) {
	b.mu.Lock()
	end := b.next
	b.mu.Unlock()
	var out []Popped
	for _, d := range b.tab.Pop("b", r.Group, r.Topic, 0, 0, end, r.Max, r.Invisible, b.clock.Now()) {
		off := strconv.FormatInt(d.Offset, 10)
		out = append(out, Popped{Attempt: d.Attempt, Handle: d.Handle.Encode(), Rec: message.Record{Topic: []byte(r.Topic),
			QueueOffset: d.Offset, Body: []byte("m" + off), Properties: []byte(message.PropUniqKey + "\x01id" + off + "\x02")}})
	}
	return out, nil
}

func (b *popBackend) handle(topic, s string) (pop.Handle, *v2.Status) {
	h, err := pop.DecodeHandle(s)
	if err == nil && h.Topic != topic {
		err = pop.ErrInvalidHandle
	}
	if err != nil {
		return h, status(v2.Code_INVALID_RECEIPT_HANDLE, err.Error())
	}
	return h, nil
}

func (b *popBackend) Ack(group, topic, s string) *v2.Status {
	h, st := b.handle(topic, s)
	if st == nil {
		if err := b.tab.Ack(group, h, b.clock.Now()); err != nil {
			st = status(v2.Code_INVALID_RECEIPT_HANDLE, err.Error())
		}
	}
	return st
}

func (b *popBackend) Change(group, topic, s string, d time.Duration) (string, *v2.Status) {
	h, st := b.handle(topic, s)
	if st != nil {
		return s, st
	}
	nh, err := b.tab.Change(group, h, d, b.clock.Now())
	if err != nil {
		return s, status(v2.Code_INVALID_RECEIPT_HANDLE, err.Error())
	}
	return nh.Encode(), nil
}

func (b *popBackend) Arrival() <-chan struct{} { return make(chan struct{}) }

func (b *popBackend) Extend(group, topic, s string, d time.Duration) *v2.Status {
	h, st := b.handle(topic, s)
	if st == nil {
		if err := b.tab.Extend(group, h, d, b.clock.Now()); err != nil {
			st = status(v2.Code_INVALID_RECEIPT_HANDLE, err.Error())
		}
	}
	return st
}

func (b *popBackend) PopNow() time.Time { return b.clock.Now() }

func (b *popBackend) DeadLetter(_ context.Context, group, topic, s string) *v2.Status {
	h, st := b.handle(topic, s)
	if st != nil {
		return st
	}
	a, err := b.tab.Attempt(group, h, b.clock.Now())
	if err != nil {
		return status(v2.Code_INVALID_RECEIPT_HANDLE, err.Error())
	}
	b.mu.Lock()
	b.dead = append(b.dead, a)
	b.mu.Unlock()
	return b.Ack(group, topic, s)
}

// startPop serves a Server over a popBackend.
func startPop(t *testing.T) (*Server, *popBackend, v2.MessagingServiceClient) {
	t.Helper()
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	b := &popBackend{clock: clock, tab: pop.New(), routes: map[string][]RouteBroker{}}
	s := New(b, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: clock.Now})
	require.NoError(t, s.Listen("127.0.0.1:0"))
	t.Cleanup(s.Close)
	cc, err := grpc.NewClient("passthrough:///"+s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return s, b, v2.NewMessagingServiceClient(cc)
}

// recv runs one receive of client id and returns its status and
// messages.
func recv(t *testing.T, c v2.MessagingServiceClient, id string, req *v2.ReceiveMessageRequest) (*v2.Status, []*v2.Message) {
	t.Helper()
	rs, err := c.ReceiveMessage(md(t, id), req)
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
	require.NotNil(t, st)
	return st, msgs
}

func pushReq(group, attempt string, batch int32) *v2.ReceiveMessageRequest {
	r := &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: group}, BatchSize: batch, AutoRenew: true,
		MessageQueue: &v2.MessageQueue{Topic: &v2.Resource{Name: "T"}, Id: -1}, LongPollingTimeout: durationpb.New(0)}
	if attempt != "" {
		r.AttemptId = &attempt
	}
	return r
}

func simpleReq(group string) *v2.ReceiveMessageRequest {
	return &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: group}, BatchSize: 32,
		MessageQueue:      &v2.MessageQueue{Topic: &v2.Resource{Name: "T"}},
		InvisibleDuration: durationpb.New(10 * time.Second), LongPollingTimeout: durationpb.New(0)}
}

func delivered(ms []*v2.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, string(m.Body)+"@"+strconv.Itoa(int(m.GetSystemProperties().GetDeliveryAttempt())))
	}
	return out
}

// TestQueryAssignment_Shapes: a group that is not orderly gets one
// assignment (queue id -1) per readable master with a gRPC endpoint, an
// orderly one one per read queue; a topic with no readable queue is
// FORBIDDEN "no readable queue", an unknown one TOPIC_NOT_FOUND. Before,
// QueryAssignment answered codes.Unimplemented.
func TestQueryAssignment_Shapes(t *testing.T) {
	_, b, c := startPop(t)
	b.routes["T"] = []RouteBroker{
		{Name: "rw", GrpcAddr: "127.0.0.1:8081", ReadQueues: 2, WriteQueues: 2, Perm: 6},
		{Name: "ro", GrpcAddr: "127.0.0.1:8082", ReadQueues: 3, WriteQueues: 3, Perm: 4},
		{Name: "wo", GrpcAddr: "127.0.0.1:8083", ReadQueues: 4, WriteQueues: 4, Perm: 2},
		{Name: "noread", GrpcAddr: "127.0.0.1:8084", ReadQueues: 0, WriteQueues: 4, Perm: 6},
		{Name: "nogrpc", GrpcAddr: "", ReadQueues: 4, WriteQueues: 4, Perm: 6},
	}
	b.routes["W"] = []RouteBroker{{Name: "wo", GrpcAddr: "127.0.0.1:8083", ReadQueues: 4, WriteQueues: 4, Perm: 2}}
	ask := func(group, topic string) *v2.QueryAssignmentResponse {
		t.Helper()
		r, err := c.QueryAssignment(md(t, "qa"), &v2.QueryAssignmentRequest{Topic: &v2.Resource{Name: topic}, Group: &v2.Resource{Name: group}})
		require.NoError(t, err)
		return r
	}
	shape := func(r *v2.QueryAssignmentResponse) []string {
		require.Equal(t, v2.Code_OK, r.GetStatus().GetCode(), r.GetStatus().GetMessage())
		var out []string
		for _, a := range r.GetAssignments() {
			mq := a.GetMessageQueue()
			require.Equal(t, "T", mq.GetTopic().GetName())
			addr := mq.GetBroker().GetEndpoints().GetAddresses()[0]
			out = append(out, mq.GetBroker().GetName()+"/"+strconv.Itoa(int(mq.GetId()))+"/"+mq.GetPermission().String()+
				"/"+strconv.Itoa(int(addr.GetPort())))
		}
		return out
	}
	require.Equal(t, []string{"rw/-1/READ_WRITE/8081", "ro/-1/READ/8082"}, shape(ask("plain", "T")))
	require.Equal(t, []string{"rw/0/READ_WRITE/8081", "rw/1/READ_WRITE/8081", "ro/0/READ/8082", "ro/1/READ/8082", "ro/2/READ/8082"},
		shape(ask("fifo-g", "T")))

	r := ask("plain", "W")
	require.Equal(t, v2.Code_FORBIDDEN, r.GetStatus().GetCode())
	require.Contains(t, r.GetStatus().GetMessage(), "no readable queue")
	require.Equal(t, v2.Code_TOPIC_NOT_FOUND, ask("plain", "nope").GetStatus().GetCode())
	require.Equal(t, v2.Code_ILLEGAL_CONSUMER_GROUP, ask("bad group!", "T").GetStatus().GetCode())
}

// TestAutoRenew_HoldsWhileLiveReleasesWhenGone: a message received with
// auto_renew stays invisible past its invisible time (60 s, the SDKs
// name none) while its client heartbeats, and the handle the client got
// still acks it; a nack (ChangeInvisibleDuration, 1 s: a PushConsumer's
// backoff) is taken and ends the renewal; when the client's Telemetry
// stream ends what it holds is delivered again a second later. Before,
// an auto_renew receive was NOT_IMPLEMENTED.
func TestAutoRenew_HoldsWhileLiveReleasesWhenGone(t *testing.T) {
	s, b, c := startPop(t)
	ctx, cancel := context.WithCancel(md(t, "pc"))
	tel, err := c.Telemetry(ctx)
	require.NoError(t, err)
	push := v2.ClientType_PUSH_CONSUMER
	require.NoError(t, tel.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: &v2.Settings{ClientType: &push,
		PubSub: &v2.Settings_Subscription{Subscription: &v2.Subscription{Group: &v2.Resource{Name: "g"}}}}}}))
	_, err = tel.Recv()
	require.NoError(t, err)

	b.store(3)
	st, got := recv(t, c, "pc", pushReq("g", "", 32))
	require.Equal(t, v2.Code_OK, st.GetCode(), st.GetMessage())
	require.Equal(t, []string{"m0@1", "m1@1", "m2@1"}, delivered(got))
	require.Equal(t, autoRenewInvisible, got[0].GetSystemProperties().GetInvisibleDuration().AsDuration())
	held, _ := s.Renewals()
	require.Equal(t, 3, held)

	heartbeat := func() {
		t.Helper()
		r, err := c.Heartbeat(md(t, "pc"), &v2.HeartbeatRequest{Group: &v2.Resource{Name: "g"}, ClientType: push})
		require.NoError(t, err)
		require.Equal(t, v2.Code_OK, r.GetStatus().GetCode())
	}
	// Three renewals, each at 2/3 of the 60 s: 100 s past the first
	// invisible time.
	// NB: a heartbeat every 20 s at most, so the renewal loop (it runs
	// too, on real time) never finds the client quiet.
	for i := range 4 {
		b.clock.Add(20 * time.Second)
		heartbeat()
		b.clock.Add(21 * time.Second)
		heartbeat()
		s.renewDue(b)
		_, renewed := s.Renewals()
		require.Equal(t, uint64(3*(i+1)), renewed)
		st, _ := recv(t, c, "other", simpleReq("g"))
		require.Equal(t, v2.Code_MESSAGE_NOT_FOUND, st.GetCode(), "held after %d s", 41*(i+1))
	}
	ack, err := c.AckMessage(md(t, "pc"), &v2.AckMessageRequest{Group: &v2.Resource{Name: "g"}, Topic: &v2.Resource{Name: "T"},
		Entries: []*v2.AckMessageEntry{{ReceiptHandle: got[0].GetSystemProperties().GetReceiptHandle()}}})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, ack.GetStatus().GetCode(), "the handle the client got: %s", ack.GetStatus().GetMessage())
	nack, err := c.ChangeInvisibleDuration(md(t, "pc"), &v2.ChangeInvisibleDurationRequest{Group: &v2.Resource{Name: "g"},
		Topic: &v2.Resource{Name: "T"}, ReceiptHandle: got[1].GetSystemProperties().GetReceiptHandle(),
		InvisibleDuration: durationpb.New(time.Second)})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, nack.GetStatus().GetCode(), nack.GetStatus().GetMessage())
	held, _ = s.Renewals()
	require.Equal(t, 1, held, "acked and nacked ones are no longer renewed")
	b.clock.Add(2 * time.Second)
	st, again := recv(t, c, "other", simpleReq("g"))
	require.Equal(t, v2.Code_OK, st.GetCode())
	require.Equal(t, []string{"m1@2"}, delivered(again), "the nacked one after its backoff; m2 still held")

	cancel() // NB: the client's Telemetry stream ends
	require.Eventually(t, func() bool { held, _ := s.Renewals(); return held == 0 }, 10*time.Second, 10*time.Millisecond)
	b.clock.Add(releaseAfter)
	st, again = recv(t, c, "other", simpleReq("g"))
	require.Equal(t, v2.Code_OK, st.GetCode())
	require.Equal(t, []string{"m2@2"}, delivered(again), "released when its client went")
}

// TestAutoRenew_HeartbeatsStop: a client that stops heartbeating (no
// Telemetry stream) no longer holds its messages: the next renewal
// releases them.
func TestAutoRenew_HeartbeatsStop(t *testing.T) {
	s, b, c := startPop(t)
	b.store(1)
	r, err := c.Heartbeat(md(t, "quiet"), &v2.HeartbeatRequest{Group: &v2.Resource{Name: "g"}})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, r.GetStatus().GetCode())
	st, got := recv(t, c, "quiet", pushReq("g", "", 32))
	require.Equal(t, v2.Code_OK, st.GetCode(), st.GetMessage())
	require.Len(t, got, 1)
	b.clock.Add(41 * time.Second) // NB: no heartbeat for longer than clientLiveness
	s.renewDue(b)
	held, renewed := s.Renewals()
	require.Equal(t, [2]uint64{0, 0}, [2]uint64{uint64(held), renewed})
	b.clock.Add(releaseAfter)
	st, got = recv(t, c, "other", simpleReq("g"))
	require.Equal(t, v2.Code_OK, st.GetCode())
	require.Equal(t, []string{"m0@2"}, delivered(got))
}

// TestAttemptID_Replay: a receive retried with the same attempt id (same
// client, group and topic; auto_renew or not) gets the same messages and handles, not a new
// batch; another attempt id, or the same one from another client or
// after the window, gets a new batch. Before, the retry got the next
// message.
func TestAttemptID_Replay(t *testing.T) {
	_, b, c := startPop(t)
	b.store(4)
	pushReq := func(group, attempt string, batch int32) *v2.ReceiveMessageRequest {
		r := pushReq(group, attempt, batch)
		r.AutoRenew, r.InvisibleDuration = false, durationpb.New(20*time.Second) // NB: no renewal loop on real time
		return r
	}
	_, first := recv(t, c, "pc", pushReq("g", "A", 1))
	require.Equal(t, []string{"m0@1"}, delivered(first))
	_, again := recv(t, c, "pc", pushReq("g", "A", 1))
	require.Equal(t, []string{"m0@1"}, delivered(again))
	require.Equal(t, first[0].GetSystemProperties().GetReceiptHandle(), again[0].GetSystemProperties().GetReceiptHandle())
	_, next := recv(t, c, "pc", pushReq("g", "B", 1))
	require.Equal(t, []string{"m1@1"}, delivered(next))
	_, other := recv(t, c, "pc2", pushReq("g", "A", 1))
	require.Equal(t, []string{"m2@1"}, delivered(other), "another client's attempt id A")
	b.clock.Add(attemptWindow + time.Second)
	_, late := recv(t, c, "pc", pushReq("g", "A", 1))
	require.Len(t, late, 1)
	require.Equal(t, int32(2), late[0].GetSystemProperties().GetDeliveryAttempt(),
		"past the window: a new pop (m0, m1 and m2 are over their 20 s: one of them again)")
	require.NotEqual(t, first[0].GetSystemProperties().GetReceiptHandle(), late[0].GetSystemProperties().GetReceiptHandle())
}

// TestForwardToDeadLetter: ForwardMessageToDeadLetterQueue dead-letters
// the handle's message with the broker's attempt (not the client's
// delivery_attempt), acks it and ends its renewal; a handle not current
// is INVALID_RECEIPT_HANDLE. Before, the RPC answered codes.Unimplemented.
func TestForwardToDeadLetter(t *testing.T) {
	s, b, c := startPop(t)
	b.store(1)
	_, got := recv(t, c, "pc", pushReq("fifo-g", "", 32))
	require.Len(t, got, 1)
	fwd := func() *v2.Status {
		t.Helper()
		r, err := c.ForwardMessageToDeadLetterQueue(md(t, "pc"), &v2.ForwardMessageToDeadLetterQueueRequest{
			Group: &v2.Resource{Name: "fifo-g"}, Topic: &v2.Resource{Name: "T"},
			ReceiptHandle: got[0].GetSystemProperties().GetReceiptHandle(), DeliveryAttempt: 3, MaxDeliveryAttempts: 3})
		require.NoError(t, err)
		return r.GetStatus()
	}
	require.Equal(t, v2.Code_OK, fwd().GetCode())
	require.Equal(t, []int32{1}, b.dead, "one delivery by the broker; the client's local retries are not added")
	held, _ := s.Renewals()
	require.Zero(t, held)
	require.Equal(t, v2.Code_INVALID_RECEIPT_HANDLE, fwd().GetCode(), "acked already")
	b.clock.Add(2 * time.Minute)
	st, _ := recv(t, c, "pc", simpleReq("fifo-g"))
	require.Equal(t, v2.Code_MESSAGE_NOT_FOUND, st.GetCode(), "dead-lettered, not delivered again")
}

// TestAutoRenew_KeptWhenTheServerCloses: a closing server ends its
// clients' Telemetry streams, but that is not the clients going: what
// they hold keeps its invisible time (their acks after a restart land),
// where a client's own stream end releases it a second later.
func TestAutoRenew_KeptWhenTheServerCloses(t *testing.T) {
	s, b, c := startPop(t)
	tel, err := c.Telemetry(md(t, "pc"))
	require.NoError(t, err)
	push := v2.ClientType_PUSH_CONSUMER
	require.NoError(t, tel.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: &v2.Settings{ClientType: &push,
		PubSub: &v2.Settings_Subscription{Subscription: &v2.Subscription{Group: &v2.Resource{Name: "g"}}}}}}))
	_, err = tel.Recv()
	require.NoError(t, err)
	b.store(1)
	st, got := recv(t, c, "pc", pushReq("g", "", 32))
	require.Equal(t, v2.Code_OK, st.GetCode(), st.GetMessage())
	require.Len(t, got, 1)

	s.Close() // NB: returns once the stream's handler has ended
	b.clock.Add(2 * releaseAfter)
	require.Empty(t, b.tab.Pop("b", "g", "T", 0, 0, 1, 1, time.Minute, b.clock.Now()), "not released by the closing server")
	b.clock.Add(autoRenewInvisible)
	require.Len(t, b.tab.Pop("b", "g", "T", 0, 0, 1, 1, time.Minute, b.clock.Now()), 1, "delivered again after its invisible time")
}

// TestAttemptIDs_Bounded: the answers kept for attempt ids expire after
// the window and are at most maxAttemptIDs, the oldest going first.
func TestAttemptIDs_Bounded(t *testing.T) {
	var r renewals
	t0 := time.Unix(1_800_000_000, 0)
	key := func(i int) attemptKey { return attemptKey{client: "c", group: "g", topic: "T", id: strconv.Itoa(i)} }
	for i := range maxAttemptIDs + 10 {
		r.keep(key(i), &attemptResult{at: t0})
	}
	require.Len(t, r.attempts, maxAttemptIDs)
	require.Nil(t, r.replay(key(9), t0), "among the oldest: gone")
	require.NotNil(t, r.replay(key(10), t0))
	require.NotNil(t, r.replay(key(maxAttemptIDs+9), t0))
	require.Nil(t, r.replay(key(10), t0.Add(attemptWindow+time.Second)), "past the window")

	r.keep(key(-1), &attemptResult{at: t0.Add(attemptWindow + time.Second)})
	require.Len(t, r.attempts, 1, "the expired ones went")
	require.Len(t, r.attemptOrder, 1)
}

// TestAttemptIDs_BoundedBytes: the bodies kept for attempt ids are at most
// maxAttemptBytes (a PushConsumer names an attempt id on every receive),
// the oldest going first; a key kept again keeps its newest answer.
func TestAttemptIDs_BoundedBytes(t *testing.T) {
	var r renewals
	t0 := time.Unix(1_800_000_000, 0)
	key := func(i int) attemptKey { return attemptKey{client: "c", group: "g", topic: "T", id: strconv.Itoa(i)} }
	body := make([]byte, 1<<20)
	n := maxAttemptBytes>>20 + 8
	for i := range n {
		r.keep(key(i), &attemptResult{at: t0, msgs: []*v2.Message{{Body: body}}})
	}
	require.LessOrEqual(t, r.attemptBytes, maxAttemptBytes)
	require.Equal(t, maxAttemptBytes, r.attemptBytes)
	require.Nil(t, r.replay(key(7), t0), "among the oldest: gone")
	require.NotNil(t, r.replay(key(8), t0))
	require.NotNil(t, r.replay(key(n-1), t0))

	again := &attemptResult{at: t0, msgs: []*v2.Message{{Body: body}}}
	r.keep(key(8), again) // NB: its first slot is now the oldest, and stale
	r.keep(key(n), &attemptResult{at: t0, msgs: []*v2.Message{{Body: body}}})
	require.Same(t, again, r.replay(key(8), t0), "the stale slot took nothing")
	require.Equal(t, maxAttemptBytes, r.attemptBytes)
}
