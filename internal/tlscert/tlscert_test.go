package tlscert

import (
	"context"
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

const codeEcho = 9999

// startServer serves echo with TLS settings t; logs go to logs.
func startServer(t testing.TB, ts *remoting.ServerTLS, logs *testutil.SyncBuffer) *remoting.Server {
	t.Helper()
	opts := remoting.ServerOptions{TLS: ts, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	s := remoting.NewServer("127.0.0.1:0", opts)
	s.Handle(codeEcho, func(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
		resp := remoting.NewResponse(req, protocol.Success, w.Conn().RemoteAddrPort().Addr().String())
		resp.Body = req.Body
		_ = w.Write(resp)
	})
	require.NoError(t, s.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Shutdown(ctx))
	})
	return s
}

func newClient(t testing.TB, cfg *tls.Config) *remoting.Client {
	t.Helper()
	c := remoting.NewClient(remoting.ClientOptions{TLS: cfg, Logger: slog.New(slog.DiscardHandler), DialTimeout: 3 * time.Second})
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

// echoCall sends body and returns the answer (remark: the address the
// server saw).
func echoCall(t testing.TB, c *remoting.Client, addr string, body []byte) (*remoting.Command, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Invoke(ctx, addr, remoting.NewRequest(codeEcho, nil, body))
}

func insecure() *tls.Config { return &tls.Config{InsecureSkipVerify: true} } //nolint:gosec // a self-signed test server

func TestTLS_Enforcing(t *testing.T) {
	var logs testutil.SyncBuffer
	ts, err := Server(conf.TLS{Mode: conf.TLSEnforcing}, "", slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	s := startServer(t, ts, &logs)
	addr := s.Addr().String()
	require.Contains(t, logs.String(), "serving a self-signed certificate")

	resp, err := echoCall(t, newClient(t, insecure()), addr, []byte("over tls"))
	require.NoError(t, err)
	require.Equal(t, "over tls", string(resp.Body))
	require.Equal(t, "127.0.0.1", resp.Remark, "the handler sees the TLS peer's address")

	big := make([]byte, 3<<20) // several TLS records and pump buffers
	for i := range big {
		big[i] = byte(i * 7)
	}
	resp, err = echoCall(t, newClient(t, insecure()), addr, big)
	require.NoError(t, err)
	require.Equal(t, big, resp.Body)

	// A plaintext request is answered with why (it was only closed:
	// clients said "connection closed").
	resp, err = echoCall(t, newClient(t, nil), addr, []byte("plain"))
	require.NoError(t, err, "plaintext against enforcing: an answer")
	require.Equal(t, int16(protocol.SystemError), resp.Code)
	require.Equal(t, remoting.PlaintextRefusedRemark, resp.Remark)
	require.Eventually(t, func() bool {
		return strings.Contains(logs.String(), "plaintext connection refused: this port enforces TLS")
	}, 10*time.Second, 10*time.Millisecond)
	require.NotZero(t, s.Stats().PlaintextRefused)

	_, err = echoCall(t, newClient(t, &tls.Config{}), addr, []byte("verified"))
	require.ErrorContains(t, err, "certificate", "a verifying client refuses the self-signed certificate")
}

func TestTLS_Permissive(t *testing.T) {
	var logs testutil.SyncBuffer
	ts, err := Server(conf.TLS{Mode: conf.TLSPermissive}, "", slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	s := startServer(t, ts, &logs)
	addr := s.Addr().String()
	for name, cfg := range map[string]*tls.Config{"tls": insecure(), "plaintext": nil} {
		c := newClient(t, cfg)
		for i := range 3 {
			resp, err := echoCall(t, c, addr, []byte{byte(i)})
			require.NoError(t, err, name)
			require.Equal(t, []byte{byte(i)}, resp.Body, name)
			require.Equal(t, "127.0.0.1", resp.Remark, name)
		}
	}
}

// TestTLS_ClientCA: with a client CA, a client must present a certificate
// the CA signed; the server is verified against its CA file.
func TestTLS_ClientCA(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o600))
		return p
	}
	caPEM, _, ca, err := Issue(nil, nil, true)
	require.NoError(t, err)
	srvCert, srvKey, _, err := Issue([]string{"127.0.0.1"}, ca, false)
	require.NoError(t, err)
	cliCert, cliKey, _, err := Issue([]string{"client"}, ca, false)
	require.NoError(t, err)
	otherCert, otherKey, _, err := Issue([]string{"client"}, nil, false)
	require.NoError(t, err)
	caFile := write("ca.pem", caPEM)
	ts, err := Server(conf.TLS{Mode: conf.TLSEnforcing, Cert: write("srv.pem", srvCert), Key: write("srv.key", srvKey),
		ClientCA: caFile}, "", slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	var logs testutil.SyncBuffer
	s := startServer(t, ts, &logs)
	addr := s.Addr().String()

	good, err := Client(caFile, false, write("cli.pem", cliCert), write("cli.key", cliKey))
	require.NoError(t, err)
	resp, err := echoCall(t, newClient(t, good), addr, []byte("with a client certificate"))
	require.NoError(t, err)
	require.Equal(t, "with a client certificate", string(resp.Body))

	none, err := Client(caFile, false, "", "")
	require.NoError(t, err)
	_, err = echoCall(t, newClient(t, none), addr, []byte("x"))
	require.Error(t, err, "no client certificate")
	stranger, err := Client(caFile, false, write("o.pem", otherCert), write("o.key", otherKey))
	require.NoError(t, err)
	_, err = echoCall(t, newClient(t, stranger), addr, []byte("x"))
	require.Error(t, err, "a certificate the CA did not sign")
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "TLS handshake failed") }, 10*time.Second, 10*time.Millisecond)
	require.NotZero(t, s.Stats().TLSHandshakeFailures)
}

func TestSelfSigned_KeptUnderDir(t *testing.T) {
	dir := t.TempDir()
	a, made, err := selfSigned(dir)
	require.NoError(t, err)
	require.True(t, made)
	b, made, err := selfSigned(dir)
	require.NoError(t, err)
	require.False(t, made, "the second start reuses it")
	require.Equal(t, a.Certificate, b.Certificate)
	info, err := os.Stat(filepath.Join(dir, SelfSignedKey))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}

func TestServer_BadFiles(t *testing.T) {
	_, err := Server(conf.TLS{Mode: conf.TLSEnforcing, Cert: "/nonexistent.pem", Key: "/nonexistent.key"}, "", slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "tls.cert /nonexistent.pem")
	bad := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(bad, []byte("not pem"), 0o600))
	_, err = Server(conf.TLS{Mode: conf.TLSPermissive, ClientCA: bad}, "", slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "holds no PEM certificate")
	ts, err := Server(conf.TLS{Mode: conf.TLSDisabled}, "", nil)
	require.NoError(t, err)
	require.Nil(t, ts)
}
