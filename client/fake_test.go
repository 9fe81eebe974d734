package client

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeRoute is the route of topic with 4 queues on one broker at addr.
func fakeRoute(addr string) protocol.TopicRouteData {
	return protocol.TopicRouteData{
		QueueDatas:  []protocol.QueueData{{BrokerName: "fake", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}},
		BrokerDatas: []protocol.BrokerData{{Cluster: "c", BrokerName: "fake", BrokerAddrs: map[int64]string{0: addr}}},
	}
}

// fakeSendOK answers a send with SUCCESS.
func fakeSendOK(req *remoting.Command) *remoting.Command {
	h, _ := protocol.DecodeSendMessageRequestHeader(req.Code, req.ExtMap())
	resp := remoting.NewResponse(req, protocol.Success, "")
	resp.ExtFields = protocol.Ext(&protocol.SendMessageResponseHeader{MsgID: "7F000001000051AF00000000000000AA",
		QueueID: h.QueueID, QueueOffset: 7})
	return resp
}

// startFake starts a remoting server that is both name server and broker:
// it answers routes pointing at itself, heartbeats, and sends with send.
func startFake(t *testing.T, send func(req *remoting.Command) *remoting.Command) string {
	return startFakeRoutes(t, func(_, addr string) (protocol.TopicRouteData, bool) { return fakeRoute(addr), true }, send)
}

// startFakeRoutes is startFake with the route of each topic from route
// (false: TOPIC_NOT_EXIST).
func startFakeRoutes(t *testing.T, route func(topic, addr string) (protocol.TopicRouteData, bool),
	send func(req *remoting.Command) *remoting.Command,
) string {
	t.Helper()
	s := remoting.NewServer("127.0.0.1:0", remoting.ServerOptions{Logger: quiet()})
	var addr string
	s.Handle(protocol.GetRouteInfoByTopic, func(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
		r, ok := route(req.ExtFields["topic"], addr)
		if !ok {
			_ = w.Write(remoting.NewResponse(req, protocol.TopicNotExist, "no route"))
			return
		}
		resp := remoting.NewResponse(req, protocol.Success, "")
		resp.Body, _ = remoting.EncodeBody(req.SerializeType, r)
		_ = w.Write(resp)
	})
	s.Handle(protocol.HeartBeat, func(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
		_ = w.Write(remoting.NewResponse(req, protocol.Success, ""))
	})
	s.HandleDefault(func(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
		_ = w.Write(send(req))
	})
	require.NoError(t, s.Start())
	addr = s.Addr().String()
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return addr
}

// TestProducer_Busy: SYSTEM_BUSY answers are retried with backoff, not
// surfaced, and do not use up the retry budget.
func TestProducer_Busy(t *testing.T) {
	var calls atomic.Int32
	addr := startFake(t, func(req *remoting.Command) *remoting.Command {
		if calls.Add(1) <= 5 {
			return remoting.NewResponse(req, protocol.SystemBusy, "too busy")
		}
		return fakeSendOK(req)
	})
	p, err := NewProducer(WithNameServers(addr), WithLogger(quiet()), WithRetries(0),
		WithBusyBackoff(time.Millisecond, 5*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer p.Close()
	res, err := p.Send(ctxT(t, 10*time.Second), &Message{Topic: "busy", Body: []byte("x")})
	require.NoError(t, err)
	require.Equal(t, SendOK, res.Status)
	require.Equal(t, int64(7), res.QueueOffset)
	require.Equal(t, int32(6), calls.Load())

	// Busy until the deadline: the error matches ErrBusy. NB: the route and
	// connection are warm from the send above, and the deadline is long
	// enough that it ends after busy answers, not during the first attempt.
	calls.Store(-1 << 20)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = p.Send(ctx, &Message{Topic: "busy", Body: []byte("x")})
	require.ErrorIs(t, err, ErrBusy)
	var be *BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, CodeSystemBusy, be.Code)
	require.Equal(t, addr, be.Addr)
	require.ErrorIs(t, err, &BrokerError{Code: CodeSystemBusy})
}

// TestProducer_BusyThenDeadlineMidAttempt: when the caller's deadline
// expires during the attempt after a busy answer, the error still says the
// broker was busy (the attempt's own timeout is no fault of the broker's).
func TestProducer_BusyThenDeadlineMidAttempt(t *testing.T) {
	var calls atomic.Int32
	var armed atomic.Bool
	release := make(chan struct{})
	addr := startFake(t, func(req *remoting.Command) *remoting.Command {
		if req.Code != protocol.SendMessageV2 {
			return remoting.NewResponse(req, protocol.Success, "")
		}
		if !armed.Load() {
			return fakeSendOK(req) // warm-up
		}
		if calls.Add(1) == 1 {
			return remoting.NewResponse(req, protocol.SystemBusy, "too busy")
		}
		<-release
		return fakeSendOK(req)
	})
	defer close(release)
	p, err := NewProducer(WithNameServers(addr), WithLogger(quiet()), WithRetries(0),
		WithBusyBackoff(time.Millisecond, 5*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer p.Close()
	// NB: a first send warms the route and the connection, so that the
	// deadline is not spent before the busy answer.
	_, err = p.Send(ctxT(t, 10*time.Second), &Message{Topic: "busy", Body: []byte("warm")})
	require.NoError(t, err)
	armed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = p.Send(ctx, &Message{Topic: "busy", Body: []byte("x")})
	require.ErrorIs(t, err, ErrBusy)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, int32(2), calls.Load())
}

// TestProducer_SendStatuses: FLUSH_DISK_TIMEOUT counts as sent; a
// non-retryable answer is returned at once as a *BrokerError.
func TestProducer_SendStatuses(t *testing.T) {
	var code atomic.Int32
	var calls atomic.Int32
	addr := startFake(t, func(req *remoting.Command) *remoting.Command {
		calls.Add(1)
		resp := fakeSendOK(req)
		resp.Code = int16(code.Load())
		resp.Remark = "remark"
		return resp
	})
	p, err := NewProducer(WithNameServers(addr), WithLogger(quiet()), WithRetries(2))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer p.Close()
	ctx := ctxT(t, 10*time.Second)

	code.Store(protocol.FlushDiskTimeout)
	res, err := p.Send(ctx, &Message{Topic: "st", Body: []byte("x")})
	require.NoError(t, err)
	require.Equal(t, SendFlushDiskTimeout, res.Status)

	calls.Store(0)
	code.Store(protocol.MessageIllegal)
	_, err = p.Send(ctx, &Message{Topic: "st", Body: []byte("x")})
	require.ErrorIs(t, err, ErrMessageIllegal)
	require.Equal(t, int32(1), calls.Load(), "not retried")

	calls.Store(0)
	code.Store(protocol.ServiceNotAvailable)
	_, err = p.Send(ctx, &Message{Topic: "st", Body: []byte("x")})
	require.ErrorIs(t, err, ErrServiceNotAvailable)
	require.Equal(t, int32(3), calls.Load(), "retried twice")
}

// jsonOnlyServer is a name server + broker that, like Apache RocketMQ,
// drops connections that send a serialize type it does not know (anything
// but JSON here).
type jsonOnlyServer struct {
	ln       net.Listener
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
	rejected atomic.Int32
}

func startJSONOnly(t *testing.T) (*jsonOnlyServer, string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &jsonOnlyServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(c, ln.Addr().String())
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s, ln.Addr().String()
}

func (s *jsonOnlyServer) serve(c net.Conn, addr string) {
	defer c.Close()
	for {
		var head [8]byte
		if _, err := io.ReadFull(c, head[:]); err != nil {
			return
		}
		if head[4] != byte(remoting.SerializeJSON) {
			s.rejected.Add(1)
			return
		}
		n := binary.BigEndian.Uint32(head[:4])
		frame := make([]byte, 4+n)
		copy(frame, head[:])
		if _, err := io.ReadFull(c, frame[8:]); err != nil {
			return
		}
		req, _, err := remoting.DecodeFrame(frame, 0)
		if err != nil {
			return
		}
		var resp *remoting.Command
		switch req.Code {
		case protocol.GetRouteInfoByTopic:
			resp = remoting.NewResponse(req, protocol.Success, "")
			resp.Body, _ = remoting.EncodeBody(remoting.SerializeJSON, fakeRoute(addr))
		case protocol.SendMessageV2:
			resp = fakeSendOK(req)
		default:
			resp = remoting.NewResponse(req, protocol.Success, "")
		}
		out, err := remoting.EncodeFrame(resp)
		if err != nil {
			return
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// TestTransport_JSONFallback: a server that drops msgpack requests is
// retried in JSON, and the client remembers it speaks JSON.
func TestTransport_JSONFallback(t *testing.T) {
	s, addr := startJSONOnly(t)
	p, err := NewProducer(WithNameServers(addr), WithLogger(quiet()))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer p.Close()
	ctx := ctxT(t, 10*time.Second)
	for range 3 {
		res, err := p.Send(ctx, &Message{Topic: "legacy", Body: []byte("x")})
		require.NoError(t, err)
		require.Equal(t, int64(7), res.QueueOffset)
	}
	require.Equal(t, codecJSON, p.core.tr.mode(addr))
	require.Equal(t, int32(1), s.rejected.Load(), "msgpack tried once, then JSON only")
}

// TestTransport_MsgpackToSluice: a Sluice server keeps getting msgpack.
func TestTransport_MsgpackToSluice(t *testing.T) {
	var st atomic.Int32
	addr := startFake(t, func(req *remoting.Command) *remoting.Command {
		st.Store(int32(req.SerializeType))
		return fakeSendOK(req)
	})
	p, err := NewProducer(WithNameServers(addr), WithLogger(quiet()))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer p.Close()
	_, err = p.Send(ctxT(t, 10*time.Second), &Message{Topic: "native", Body: []byte("x")})
	require.NoError(t, err)
	require.Equal(t, int32(remoting.SerializeMsgpack), st.Load())
	require.Equal(t, codecMsgpack, p.core.tr.mode(addr))
}

// TestJSONHeaders_EndToEnd: a client told to speak JSON does everything in
// JSON against Sluice (heartbeat, lock and member-list bodies included).
func TestJSONHeaders_EndToEnd(t *testing.T) {
	c := newCluster(t, 1)
	c.createTopic("js", 2)
	rec := newRecorder()
	oc := c.pushConsumer("g-js", "js", rec.handler("o"), WithJSONHeaders(), WithOrderly(true),
		WithConsumeFrom(ConsumeFromFirst))
	waitBalanced(t, "js", 2, oc)
	p := c.producer(WithJSONHeaders())
	sendN(t, p, "js", "j", 10, nil)
	rec.waitDistinct(t, 10, 20*time.Second)
	for _, a := range c.brokers {
		require.Equal(t, codecJSON, oc.core.tr.mode(a.Addr()))
	}
}

// asyncSend sends m with SendAsync and waits for its callback.
func asyncSend(t *testing.T, p *Producer, ctx context.Context, m *Message) (SendResult, error) {
	t.Helper()
	type outcome struct {
		res SendResult
		err error
	}
	ch := make(chan outcome, 1)
	p.SendAsync(ctx, m, func(res SendResult, err error) { ch <- outcome{res, err} })
	select {
	case o := <-ch:
		return o.res, o.err
	case <-time.After(20 * time.Second):
		t.Fatal("no callback")
		return SendResult{}, nil
	}
}

// TestProducer_AsyncInlineFirstAttempt: once the route and the connection
// are known, SendAsync's first attempt goes out without a goroutine of its
// own, and what follows a failed first attempt is Send's: the same retry
// budget, busy backoff, non-retryable answers returned at once.
func TestProducer_AsyncInlineFirstAttempt(t *testing.T) {
	var calls atomic.Int32
	var code atomic.Int32
	addr := startFake(t, func(req *remoting.Command) *remoting.Command {
		if req.Code != protocol.SendMessageV2 {
			return remoting.NewResponse(req, protocol.Success, "")
		}
		calls.Add(1)
		if c := int16(code.Load()); c != protocol.Success {
			if c == protocol.SystemBusy {
				code.Store(protocol.Success) // busy once
			}
			return remoting.NewResponse(req, c, "no")
		}
		return fakeSendOK(req)
	})
	p, err := NewProducer(WithNameServers(addr), WithLogger(quiet()), WithRetries(1),
		WithBusyBackoff(time.Millisecond, 5*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer p.Close()
	ctx := ctxT(t, 20*time.Second)
	_, err = p.Send(ctx, &Message{Topic: "fast", Body: []byte("warm")}) // route, codec and connection
	require.NoError(t, err)

	calls.Store(0)
	res, err := asyncSend(t, p, ctx, &Message{Topic: "fast", Body: []byte("x")})
	require.NoError(t, err)
	require.Equal(t, int64(7), res.QueueOffset)
	require.Equal(t, int32(1), calls.Load())
	require.Equal(t, int64(1), p.inlineFirst.Load(), "the first attempt went inline")

	for _, tc := range []struct {
		code  int16
		calls int32
		is    error
	}{
		{protocol.ServiceNotAvailable, 2, ErrServiceNotAvailable}, // retried once (WithRetries(1))
		{protocol.MessageIllegal, 1, ErrMessageIllegal},           // not retried
		{protocol.SystemBusy, 2, nil},                             // backoff, then sent
	} {
		calls.Store(0)
		code.Store(int32(tc.code))
		_, err := asyncSend(t, p, ctx, &Message{Topic: "fast", Body: []byte("x")})
		if tc.is == nil {
			require.NoError(t, err, "code %d", tc.code)
		} else {
			require.ErrorIs(t, err, tc.is, "code %d", tc.code)
		}
		require.Equal(t, tc.calls, calls.Load(), "code %d", tc.code)
		code.Store(protocol.Success)
	}
}

// TestProducer_AsyncCallbackSendsAgain: a callback may call SendAsync even
// when the in-flight bound is reached (its own slot is free by then).
func TestProducer_AsyncCallbackSendsAgain(t *testing.T) {
	addr := startFake(t, fakeSendOK)
	p, err := NewProducer(WithNameServers(addr), WithLogger(quiet()), WithAsyncInflight(1))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer p.Close()
	ctx := ctxT(t, 20*time.Second)
	_, err = p.Send(ctx, &Message{Topic: "chain", Body: []byte("warm")})
	require.NoError(t, err)
	done := make(chan error, 1)
	var send func(n int)
	send = func(n int) {
		p.SendAsync(ctx, &Message{Topic: "chain", Body: []byte("x")}, func(_ SendResult, err error) {
			if err != nil || n == 50 {
				done <- err
				return
			}
			send(n + 1)
		})
	}
	send(1)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("a callback that sends again stalled")
	}
}

// newTopicProducer starts a producer against fake name servers that know
// the template topic and not "brand-new", each ask for which they count
// and answer after delay.
func newTopicProducer(t *testing.T, delay time.Duration) (*Producer, *atomic.Int32) {
	asked := new(atomic.Int32)
	addr := startFakeRoutes(t, func(topic, addr string) (protocol.TopicRouteData, bool) {
		if topic == "brand-new" {
			asked.Add(1)
			time.Sleep(delay)
			return protocol.TopicRouteData{}, false
		}
		route := fakeRoute(addr)
		route.QueueDatas[0].Perm |= protocol.PermInherit
		return route, true
	}, fakeSendOK)
	p, err := NewProducer(WithNameServers(addr), WithLogger(quiet()))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { p.Close() })
	return p, asked
}

// TestProducer_StaleDerivedRouteAskedOnce: when a new topic's route
// derived from the template goes stale under a burst of sends, one of
// them asks the name servers again, not each send in flight (they asked
// once each while the answer was on its way, a CI failure of
// TestProducer_NewTopicAsksNameServerOnceAMoment).
func TestProducer_StaleDerivedRouteAskedOnce(t *testing.T) {
	// NB: a slow answer keeps the other sends in flight meanwhile.
	p, asked := newTopicProducer(t, 50*time.Millisecond)
	ctx := ctxT(t, 20*time.Second)
	_, err := p.Send(ctx, &Message{Topic: "brand-new", Body: []byte("x")})
	require.NoError(t, err)
	require.EqualValues(t, 1, asked.Load())

	v, ok := p.derived.Load("brand-new")
	require.True(t, ok, "the derived route is kept")
	p.derived.Store("brand-new", derivedRoute{route: v.(derivedRoute).route, until: time.Now().Add(-time.Millisecond)})
	start := time.Now()
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := p.Send(ctx, &Message{Topic: "brand-new", Body: []byte("x")})
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	again := asked.Load() - 1
	// NB: one ask for the stale route, and one more per moment the burst lasted.
	require.LessOrEqual(t, again, int32(time.Since(start)/derivedRouteTTL)+1, "asked %d times in %v", again, time.Since(start))
	require.GreaterOrEqual(t, again, int32(1), "the stale route is asked for again")
}

// TestProducer_NewTopicAsksNameServerOnceAMoment: while the name servers
// do not know a new topic yet, its sends go through the template topic's
// route, and a burst of them asks the name servers again once per moment,
// not once per send.
func TestProducer_NewTopicAsksNameServerOnceAMoment(t *testing.T) {
	p, asked := newTopicProducer(t, 0)
	ctx := ctxT(t, 20*time.Second)
	start := time.Now()
	for range 300 {
		_, err := p.Send(ctx, &Message{Topic: "brand-new", Body: []byte("x")})
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	for range 300 {
		wg.Add(1)
		p.SendAsync(ctx, &Message{Topic: "brand-new", Body: []byte("x")}, func(_ SendResult, err error) {
			assert.NoError(t, err)
			wg.Done()
		})
	}
	wg.Wait()
	moments := int32(time.Since(start)/derivedRouteTTL) + 2
	require.LessOrEqual(t, asked.Load(), moments, "asked %d times in %v", asked.Load(), time.Since(start))
}
