package ha

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/internal/acl/sig"
	"github.com/sluicemq/sluice/internal/tlscert"
)

// brokerAccount is the master's ACL in these tests: account "broker".
func brokerAccount(key string, content []byte, signature string) bool {
	return key == "broker" && sig.EqualConstant(sig.Sign("s3cret", content), signature)
}

// relay forwards every connection it accepts to target, through wrap
// (nil: as is), and records what the first connection's client sent.
type relay struct {
	ln   net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	sent bytes.Buffer // guarded by mu: the first client's bytes
	open []net.Conn   // guarded by mu
	n    int          // guarded by mu: connections accepted
}

func startRelay(t *testing.T, target string, server func(net.Conn) net.Conn, dial func() (net.Conn, error)) *relay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := &relay{ln: ln}
	if dial == nil {
		dial = func() (net.Conn, error) { return net.Dial("tcp", target) }
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if server != nil {
				c = server(c)
			}
			u, err := dial()
			if err != nil {
				c.Close()
				continue
			}
			r.mu.Lock()
			r.open = append(r.open, c, u)
			r.n++
			first := r.n == 1
			r.mu.Unlock()
			var w io.Writer = u
			if first {
				w = io.MultiWriter(u, lockedWriter{r})
			}
			r.wg.Add(2)
			go func() { defer r.wg.Done(); io.Copy(w, c); u.Close() }()
			go func() { defer r.wg.Done(); io.Copy(c, u); c.Close() }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		r.mu.Lock()
		for _, c := range r.open {
			c.Close()
		}
		r.mu.Unlock()
		r.wg.Wait()
	})
	return r
}

type lockedWriter struct{ r *relay }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	return w.r.sent.Write(p)
}

func (r *relay) recorded() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.sent.Bytes())
}

// TestAuth_ReplayRefused: a slave's account preamble, recorded on the
// wire, does not open another connection: the master challenges each
// connection with a fresh nonce. Before, the recorded bytes, replayed
// within 5 minutes, were taken and the master streamed its log to them.
func TestAuth_ReplayRefused(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	master := openLog(t, t.TempDir())
	appendRecords(t, master, r, 20)
	m := startMaster(t, master, MasterOptions{Authenticate: brokerAccount})
	rec := startRelay(t, m.Addr().String(), nil, nil)
	replica := openLog(t, t.TempDir())
	s := NewSlave(&logReplica{l: replica}, SlaveOptions{Master: func() string { return rec.ln.Addr().String() },
		Credentials: &Credentials{"broker", "s3cret"}, RetryInterval: 10 * time.Millisecond, Logger: quiet()})
	s.Start()
	require.Eventually(t, func() bool { return replica.Next() == master.Next() }, 10*time.Second, time.Millisecond)
	s.Close()
	wire := rec.recorded()
	require.NotEmpty(t, wire)

	before := m.Status().AuthFailures
	c, err := net.Dial("tcp", m.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write(wire)
	require.NoError(t, err)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, _ := io.ReadAll(c)
	require.Equal(t, before+1, m.Status().AuthFailures, "the replayed preamble was taken")
	require.LessOrEqual(t, len(got), 4+nonceSize, "the master sent more than its challenge: %d bytes", len(got))
}

// TestAuth_RelayedAnswerRefused: a slave that does not verify its
// master's certificate is lured to a relay that holds a TLS session of its
// own with the master and passes the challenge and the answer through.
// The answer is bound to the slave's TLS session, not the relay's, so the
// master refuses it and nothing is copied. Before, the relay was let in.
func TestAuth_RelayedAnswerRefused(t *testing.T) {
	certPEM, keyPEM, _, err := tlscert.Issue([]string{"127.0.0.1"}, nil, false)
	require.NoError(t, err)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	r := rand.New(rand.NewPCG(23, 24))
	master := openLog(t, t.TempDir())
	appendRecords(t, master, r, 20)
	m := startMaster(t, master, MasterOptions{Authenticate: brokerAccount,
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}})
	// The relay's own certificate, which an unverifying slave takes.
	fakePEM, fakeKey, _, err := tlscert.Issue([]string{"127.0.0.1"}, nil, false)
	require.NoError(t, err)
	fake, err := tls.X509KeyPair(fakePEM, fakeKey)
	require.NoError(t, err)
	mitm := startRelay(t, m.Addr().String(),
		func(c net.Conn) net.Conn { return tls.Server(c, &tls.Config{Certificates: []tls.Certificate{fake}}) },
		func() (net.Conn, error) {
			return tls.Dial("tcp", m.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the relay trusts anything
		})
	before := m.Status().AuthFailures
	replica := openLog(t, t.TempDir())
	s := NewSlave(&logReplica{l: replica}, SlaveOptions{Master: func() string { return mitm.ln.Addr().String() },
		TLS:         &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the slave without ca_file under test
		Credentials: &Credentials{"broker", "s3cret"}, RetryInterval: 10 * time.Millisecond, Logger: quiet()})
	s.Start()
	defer s.Close()
	require.Eventually(t, func() bool { return m.Status().AuthFailures >= before+2 }, 10*time.Second, time.Millisecond,
		"the master refuses the relayed answer, again on each retry")
	require.Equal(t, commitlog.Offset(0), replica.Next(), "nothing copied through the relay")
}

// TestHello_IDBoundToPeer: with CheckSlave, a peer claiming a broker id
// that is not its own is refused in its hello and its reports count for
// no id; the real member is taken. Before, any peer was taken as the id
// it claimed and its reports acknowledged sends.
func TestHello_IDBoundToPeer(t *testing.T) {
	master := openLog(t, t.TempDir())
	appendRecords(t, master, rand.New(rand.NewPCG(25, 26)), 5)
	m := startMaster(t, master, MasterOptions{Epoch: func() int32 { return 3 },
		InSync: func() InSyncRule { return InSyncRule{Slaves: []int64{1, 2}, AllAck: true, MinReplicas: 1} },
		CheckSlave: func(id int64, remote net.Addr) error {
			if id != 1 {
				return errors.New("not a member at " + remote.String())
			}
			return nil
		}})
	_, refused := helloSlave(t, m, 2, 3)
	require.True(t, refused, "a peer claiming member 2's id")
	require.Equal(t, int64(-1), m.AckedBy(2))
	report, refused := helloSlave(t, m, 1, 3)
	require.False(t, refused)
	report(int64(master.Next()))
	require.Eventually(t, func() bool { return m.AckedBy(1) == int64(master.Next()) }, 5*time.Second, time.Millisecond)

	c, err := net.Dial("tcp", m.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	require.ErrorContains(t, sayHello(c, 2, 3), "refused broker id 2")
}
