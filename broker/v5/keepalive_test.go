package v5

import (
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// frozenProxy forwards connections to addr until freeze, then holds them
// open and silent: a client that vanished without closing its socket.
type frozenProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	frozen bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startFrozenProxy(t *testing.T, addr string) *frozenProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &frozenProxy{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			for _, pair := range [][2]net.Conn{{c, s}, {s, c}} {
				p.wg.Add(1)
				go func(dst, src net.Conn) {
					defer p.wg.Done()
					buf := make([]byte, 32<<10)
					for {
						n, err := src.Read(buf)
						if err != nil {
							return
						}
						p.mu.Lock()
						frozen := p.frozen
						p.mu.Unlock()
						if frozen {
							continue // NB: read and dropped: the peer hears nothing
						}
						if _, err := dst.Write(buf[:n]); err != nil {
							return
						}
					}
				}(pair[0], pair[1])
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *frozenProxy) freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

// TestKeepalive_EndsAVanishedClientsStream: a client whose connection goes
// silent without closing (killed, cut off) loses its Telemetry stream once
// the server's keepalive ping goes unanswered, so its auto-renewed messages
// are released and transaction checks stop going to it; without server
// keepalive the stream stayed open until the kernel gave up on the socket.
func TestKeepalive_EndsAVanishedClientsStream(t *testing.T) {
	s := New(fakeBackend{}, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Keepalive: time.Second})
	require.NoError(t, s.Listen("127.0.0.1:0"))
	t.Cleanup(s.Close)
	p := startFrozenProxy(t, s.Addr())
	cc, err := grpc.NewClient("passthrough:///"+p.ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	c := v2.NewMessagingServiceClient(cc)

	prod := v2.ClientType_PRODUCER
	st, err := c.Telemetry(md(t, "gone"))
	require.NoError(t, err)
	require.NoError(t, st.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: &v2.Settings{ClientType: &prod,
		PubSub: &v2.Settings_Publishing{Publishing: &v2.Publishing{Topics: []*v2.Resource{{Name: "T"}}}}}}}))
	_, err = st.Recv()
	require.NoError(t, err)
	require.True(t, s.clients.streaming("gone"))

	p.freeze()
	require.Eventually(t, func() bool { return !s.clients.streaming("gone") }, 30*time.Second, 50*time.Millisecond,
		"the silent client's stream is still open")
}
