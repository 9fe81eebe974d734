package console

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/nameserver"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// env is an in-process nameserver and broker on loopback, with a console
// asking them and an admin client of the test's own.
type env struct {
	ns, broker string
	b          *broker.Broker
	con        *Server
	url        string // http://console/
	admin      *client.Admin
}

// sampleEvery is the tests' sampling interval.
const sampleEvery = 150 * time.Millisecond

// startEnv starts the cluster and a console with opts (Listen and
// NameServers are filled in), and waits until the nameserver routes
// TBW102.
func startEnv(t testing.TB, opts Options) *env {
	t.Helper()
	ncfg := conf.DefaultNameserver()
	ncfg.Listen = "127.0.0.1:0"
	ns, err := nameserver.New(ncfg, quiet())
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	t.Cleanup(func() { ns.Close() })

	bcfg := conf.DefaultBroker()
	bcfg.Listen = "127.0.0.1:0"
	bcfg.Store.Dir = t.TempDir()
	bcfg.Store.SegmentSize = 16 << 20
	bcfg.Store.ConsumeQueueEntries = 1000
	bcfg.NamesrvAddr = ns.Addr()
	bcfg.RegisterInterval = 100 * time.Millisecond
	b, err := broker.New(bcfg, broker.Options{Logger: quiet()})
	require.NoError(t, err)
	require.NoError(t, b.Start())
	t.Cleanup(func() { b.Close() })

	opts.Listen = "127.0.0.1:0"
	opts.NameServers = []string{ns.Addr()}
	if opts.SampleEvery == 0 {
		opts.SampleEvery = sampleEvery
	}
	opts.Logger = quiet()
	con, err := New(opts)
	require.NoError(t, err)
	require.NoError(t, con.Start())
	t.Cleanup(func() { require.NoError(t, con.Close()) })

	ad, err := client.NewAdmin(client.WithNameServers(ns.Addr()), client.WithLogger(quiet()))
	require.NoError(t, err)
	t.Cleanup(func() { ad.Close() })
	e := &env{ns: ns.Addr(), broker: b.Addr(), b: b, con: con, url: "http://" + con.Addr(), admin: ad}
	require.Eventually(t, func() bool {
		_, err := ad.TopicRoute(context.Background(), "TBW102")
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "route of TBW102")
	return e
}

// do sends an API request with a JSON body (nil for none) and decodes the
// answer into out (nil to skip); it returns the status.
func (e *env) do(t testing.TB, method, path string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	require.NoError(t, err)
	asPage(req, e.url)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"), string(data))
	if out != nil {
		require.NoError(t, json.Unmarshal(data, out), string(data))
	}
	return resp.StatusCode
}

// asPage gives req the headers the console's own page sends with a
// write: a JSON content type and the console's origin.
func asPage(req *http.Request, origin string) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", origin)
	}
}

// apiError is the body of a failed API request.
type apiError struct {
	Error string `json:"error"`
}

// fails requires the request to fail with status and returns its error text.
func (e *env) fails(t testing.TB, status int, method, path string, body any) string {
	t.Helper()
	var ae apiError
	require.Equal(t, status, e.do(t, method, path, body, &ae), ae.Error)
	require.NotEmpty(t, ae.Error)
	return ae.Error
}

// producer returns a started producer.
func (e *env) producer(t testing.TB) *client.Producer {
	t.Helper()
	p, err := client.NewProducer(client.WithNameServers(e.ns), client.WithLogger(quiet()))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { p.Close() })
	return p
}

// createTopic creates topic with n queues and waits for its route.
func (e *env) createTopic(t testing.TB, topic string, n int) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, e.admin.CreateTopic(ctx, client.TopicSpec{Topic: topic, ReadQueues: n, WriteQueues: n}))
	require.Eventually(t, func() bool {
		_, err := e.admin.TopicRoute(ctx, topic)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "route of %s", topic)
}

// gate holds a consumer's handler while closed: hold makes deliveries
// wait, release lets them (and later ones) through.
type gate struct {
	mu   sync.Mutex
	open chan struct{}
}

func newGate() *gate {
	g := &gate{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *gate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = make(chan struct{})
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *gate) wait(ctx context.Context) {
	g.mu.Lock()
	ch := g.open
	g.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// consumer starts a push consumer of group on topic whose handler passes
// each message to fn after the gate lets it through.
func (e *env) consumer(t testing.TB, group, topic string, g *gate, fn func(*client.Message) client.ConsumeResult,
	opts ...client.Option) *client.PushConsumer {
	t.Helper()
	opts = append([]client.Option{client.WithNameServers(e.ns), client.WithLogger(quiet()),
		client.WithConsumeFrom(client.ConsumeFromFirst), client.WithCommitInterval(50 * time.Millisecond),
		client.WithRebalanceInterval(100 * time.Millisecond), client.WithHeartbeatInterval(200 * time.Millisecond)}, opts...)
	c, err := client.NewPushConsumer(group, opts...)
	require.NoError(t, err)
	require.NoError(t, c.Subscribe(topic, "*", func(ctx context.Context, msgs []*client.Message) client.ConsumeResult {
		g.wait(ctx)
		for _, m := range msgs {
			if r := fn(m); r != client.ConsumeSuccess {
				return r
			}
		}
		return client.ConsumeSuccess
	}))
	require.NoError(t, c.Start())
	t.Cleanup(func() { g.release(); c.Close() })
	return c
}

// poison sends a message "poison" to topic, which a new consumer of group
// fails once and, allowed no retry, sends to the group's DLQ; it returns
// once the DLQ holds it, with the count of its later deliveries (each
// consumed) and its send result.
func (e *env) poison(t testing.TB, p *client.Producer, group, topic string) (*atomic.Int64, client.SendResult) {
	t.Helper()
	var fails, again atomic.Int64
	e.consumer(t, group, topic, newGate(), func(m *client.Message) client.ConsumeResult {
		if string(m.Body) != "poison" {
			return client.ConsumeSuccess
		}
		if fails.Add(1) == 1 {
			return client.ConsumeRetryLater
		}
		again.Add(1)
		return client.ConsumeSuccess
	}, client.WithMaxReconsumeTimes(0))
	r, err := p.Send(context.Background(), &client.Message{Topic: topic, Body: []byte("poison")})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var dv dlqView
		return e.do(t, "GET", "/api/dlq/"+group, nil, &dv) == 200 && len(dv.Messages) == 1
	}, 15*time.Second, 20*time.Millisecond, "poison in the DLQ of %s", group)
	return &again, r
}
