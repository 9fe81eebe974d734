package broker_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/servermetrics"
	"github.com/sluicemq/sluice/internal/workpool"
	"github.com/sluicemq/sluice/nameserver"
)

// Flood size: connections in all, opened by floodWorkers at a time, from
// floodAddr; then holdConns connections that send nothing, from holdAddr,
// over a cap of floodCap per address. Both are loopback addresses of their
// own, so that the cap meets them and not the producer and consumer on
// 127.0.0.1.
const (
	floodConns   = 2000
	floodWorkers = 100
	floodAddr    = "127.0.0.2"
	floodCap     = 150
	holdConns    = floodCap + 10
	holdAddr     = "127.0.0.3"
)

// floodPayloads are what a flood connection sends: garbage the reader
// refuses at once, or a frame it starts and never finishes (a length, a
// header word and part of the header), which the frame timeout reaps.
var floodPayloads = [][]byte{
	binary.BigEndian.AppendUint32(nil, 0),                              // length 0: malformed
	binary.BigEndian.AppendUint32(nil, 1<<30),                          // too large
	append(binary.BigEndian.AppendUint32(nil, 200), 0, 0, 0, 150, '{'), // half a frame
}

// withNamesrv returns a broker configuration on free loopback ports, its
// metrics endpoint included, that registers every 200 ms with a nameserver
// of its own, started for the test.
func withNamesrv(t *testing.T) conf.Broker {
	nsCfg := conf.DefaultNameserver()
	nsCfg.Listen = "127.0.0.1:0"
	ns, err := nameserver.New(nsCfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	t.Cleanup(func() { ns.Close() })
	c := conf.DefaultBroker()
	c.Listen = "127.0.0.1:0"
	c.MetricsListen = "127.0.0.1:0"
	c.NamesrvAddr = ns.Addr()
	c.RegisterInterval = 200 * time.Millisecond
	return c
}

// resources are what a flood could leak.
type resources struct {
	goroutines int
	fds        int
	heap       uint64 // bytes in use after a collection
}

func measure(t *testing.T) resources {
	t.Helper()
	runtime.GC()
	runtime.GC() // NB: pooled buffers go on the second
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	// NB: workpool's parked workers wait for the next request's task.
	return resources{goroutines: runtime.NumGoroutine() - workpool.Parked(), fds: len(fds), heap: ms.HeapInuse}
}

func (r resources) String() string {
	return fmt.Sprintf("%d goroutines, %d descriptors, heap %.1f MiB", r.goroutines, r.fds, float64(r.heap)/(1<<20))
}

// within reports whether r is back to base, give or take a tolerance for
// what the producer and consumer have in flight.
func (r resources) within(base resources) bool {
	return r.goroutines <= base.goroutines+10 && r.fds <= base.fds+4 && r.heap <= base.heap+base.heap/2+4<<20
}

// countingHandler counts the WARN lines of the remoting layer.
type countingHandler struct{ warns atomic.Int64 }

func (h *countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "remoting:") {
		h.warns.Add(1)
	}
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

// TestFlood_GarbageAndHalfOpen: 2,000 connections from one address, a
// third sending a malformed frame, a third a too-large one and a third half
// a frame, 100 at a time, then 160 silent connections from another address
// over its cap of 150, against a broker while a producer sends and a
// consumer consumes. No send fails and every message is consumed; each
// flood connection is closed, and counted once, as a bad frame, a frame
// timeout or a connection over the address's cap, and the 10 over the cap
// are refused; the remoting layer logs a few lines, not one per
// connection; and goroutines, descriptors and heap return to what they
// were before the flood.
func TestFlood_GarbageAndHalfOpen(t *testing.T) {
	cfg := withNamesrv(t)
	cfg.Store.Dir = t.TempDir()
	cfg.Store.SegmentSize = 8 << 20
	cfg.Store.ConsumeQueueEntries = 10_000
	cfg.Remoting.FrameTimeout = 200 * time.Millisecond
	cfg.Remoting.MaxConnsPerAddr = floodCap
	logs := &countingHandler{}
	b, err := broker.New(cfg, broker.Options{Logger: slog.New(logs)})
	require.NoError(t, err)
	require.NoError(t, b.Start())
	t.Cleanup(func() { b.Close() })

	quiet := client.WithLogger(slog.New(slog.DiscardHandler))
	p, err := client.NewProducer(client.WithNameServers(cfg.NamesrvAddr), quiet, client.WithGroup("flood-pg"),
		client.WithRetries(0), client.WithSendTimeout(10*time.Second))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { p.Close() })
	var sent atomic.Int64
	send := func() error {
		_, err := p.Send(t.Context(), &client.Message{Topic: "flood", Body: []byte(fmt.Sprint(sent.Load()))})
		if err == nil {
			sent.Add(1)
		}
		return err
	}
	require.Eventually(t, func() bool { return send() == nil }, 10*time.Second, 20*time.Millisecond,
		"the first send, once the broker is registered")

	var got atomic.Int64
	c, err := client.NewPushConsumer("flood-cg", client.WithNameServers(cfg.NamesrvAddr), quiet,
		client.WithConsumeFrom(client.ConsumeFromFirst), client.WithRouteRefreshInterval(200*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, c.Subscribe("flood", "*", func(_ context.Context, msgs []*client.Message) client.ConsumeResult {
		got.Add(int64(len(msgs)))
		return client.ConsumeSuccess
	}))
	require.NoError(t, c.Start())
	t.Cleanup(func() { c.Close() })
	consumedAll := func() bool { return got.Load() >= sent.Load() }
	require.Eventually(t, consumedAll, 20*time.Second, 10*time.Millisecond, "the first message consumed")

	// The producer sends one message after another until the flood ends.
	var sendErrs atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := send(); err != nil {
				sendErrs.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
		}
	}()
	require.Eventually(t, func() bool { return sent.Load() > 50 && got.Load() > 50 }, 10*time.Second, time.Millisecond)
	base := measure(t)

	start := time.Now()
	flood(t, b.Addr())
	took := time.Since(start)
	overCap(t, b.Addr())
	close(stop)
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		t.Errorf("first send error: %v", e)
	}
	require.Zero(t, sendErrs.Load(), "sends failed during the flood")
	require.Eventually(t, consumedAll, 20*time.Second, 10*time.Millisecond, "every message consumed")

	now := measure(t)
	for deadline := time.Now().Add(20 * time.Second); !now.within(base) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond) // NB: a bounded poll
		now = measure(t)
	}
	require.True(t, now.within(base), "back to the baseline: before %v, now %v", base, now)
	t.Logf("flood of %d connections in %v while %d messages went through; before %v, after %v; %d remoting WARN lines",
		floodConns, took.Round(time.Millisecond), sent.Load(), base, now, logs.warns.Load())

	v, err := servermetrics.Scrape(b.MetricsAddr())
	require.NoError(t, err)
	count := func(name string, labels map[string]string) float64 {
		x, ok := v.Lookup(name, labels)
		require.True(t, ok, name)
		return x
	}
	var closed float64
	for _, reason := range remoting.BadFrameReasons {
		closed += count("sluice_remoting_bad_frames_total", map[string]string{"reason": reason})
	}
	timeouts := count("sluice_remoting_frame_timeouts_total", nil)
	refused := count("sluice_remoting_connections_refused_total", nil)
	t.Logf("bad frames %v, frame timeouts %v, refused %v", closed, timeouts, refused)
	require.Equal(t, float64(floodConns+holdConns-floodCap), closed+timeouts+refused, "each flood connection counted once")
	require.Positive(t, closed)
	require.Positive(t, timeouts)
	require.GreaterOrEqual(t, refused, float64(holdConns-floodCap))
	// NB: per reason, one line when it starts and at most one per minute
	// after; the idle loop may also end a window.
	require.LessOrEqual(t, logs.warns.Load(), int64(10), "the remoting layer's lines are rate-limited")
}

// flood opens floodConns connections to addr from floodAddr, floodWorkers
// at a time; each sends its payload and reads until the broker closes it.
func flood(t *testing.T, addr string) {
	var next atomic.Int64
	errs := make(chan error, floodWorkers)
	for range floodWorkers {
		go func() {
			d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(floodAddr)}}
			for i := next.Add(1); i <= floodConns; i = next.Add(1) {
				if err := floodOne(d, addr, floodPayloads[i%int64(len(floodPayloads))]); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range floodWorkers {
		require.NoError(t, <-errs)
	}
}

// overCap opens holdConns silent connections to addr from holdAddr, one
// after the other: those over the cap are closed by the broker, the others
// stay open until overCap closes them.
func overCap(t *testing.T, addr string) {
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(holdAddr)}}
	conns := make([]net.Conn, holdConns)
	for i := range conns {
		conn, err := d.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		conns[i] = conn
	}
	for _, conn := range conns[floodCap:] {
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, err := io.Copy(io.Discard, conn)
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "a connection over the cap was kept")
	}
}

func floodOne(d net.Dialer, addr string, payload []byte) error {
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	// NB: a refused connection may be closed before the write.
	_, _ = conn.Write(payload)
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("flood connection %s kept open 10 s after sending %d bytes", conn.LocalAddr(), len(payload))
	}
	return nil // NB: EOF or a reset: closed by the broker
}
