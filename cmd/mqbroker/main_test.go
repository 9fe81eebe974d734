package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/acl/sig"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/nameserver"
	"github.com/stretchr/testify/require"
)

func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mqbroker")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, string(out))
	return bin
}

var servingRE = regexp.MustCompile(`serving on (\S+) \(nameserver (\S+),`)

// startProcess runs mqbroker on free ports with an embedded nameserver and
// returns the broker and nameserver addresses.
func startProcess(t *testing.T, bin, dir string) (*exec.Cmd, string, string) {
	t.Helper()
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--store-dir", dir)
	cmd.Env = append(os.Environ(), "SLUICE_EMBEDDED_NAMESRV_LISTEN=127.0.0.1:0")
	addr, ns := serving(t, cmd)
	return cmd, addr, ns
}

// serving starts cmd and returns the broker and nameserver addresses its
// first line names.
func serving(t *testing.T, cmd *exec.Cmd) (string, string) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	m := servingRE.FindStringSubmatch(line)
	require.NotNil(t, m, line)
	return m[1], m[2]
}

var metricsRE = regexp.MustCompile(`msg="mqbroker: metrics" url=http://(\S+)/metrics`)

// TestMQBroker_NamesrvAddrAndPprof: as the README says, mqbroker registers
// with the nameserver NAMESRV_ADDR names (none embedded), and with
// --metrics-listen serves Go's profiler at /debug/pprof/.
func TestMQBroker_NamesrvAddrAndPprof(t *testing.T) {
	cfg := conf.DefaultNameserver()
	cfg.Listen = "127.0.0.1:0"
	ns, err := nameserver.New(cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	defer ns.Close()

	cmd := exec.Command(buildBinary(t), "--listen", "127.0.0.1:0", "--store-dir", t.TempDir(), "--pprof", "--metrics-listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "NAMESRV_ADDR="+ns.Addr())
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	addr, nsAddr := serving(t, cmd)
	require.Equal(t, ns.Addr(), nsAddr, "the nameserver NAMESRV_ADDR names, none embedded")
	var metrics string
	for sc := bufio.NewScanner(stderr); metrics == "" && sc.Scan(); {
		if m := metricsRE.FindStringSubmatch(sc.Text()); m != nil {
			metrics = m[1]
		}
	}
	require.NotEmpty(t, metrics, "the metrics address is logged")
	go io.Copy(io.Discard, stderr)

	c := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON})
	defer c.Close()
	require.Equal(t, addr, templateRoute(t, c, ns.Addr()).BrokerDatas[0].BrokerAddrs[0])

	get := func(path string) []byte {
		resp, err := http.Get("http://" + metrics + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return b
	}
	require.Contains(t, string(get("/debug/pprof/")), "goroutine")
	prof := get("/debug/pprof/profile?seconds=1")
	require.Greater(t, len(prof), 2)
	require.Equal(t, []byte{0x1f, 0x8b}, prof[:2], "a gzipped profile, as go tool pprof reads")
	require.Contains(t, string(get("/debug/pprof/goroutine?debug=1")), "goroutine profile:")
}

func TestMQBroker_QuickstartProcess(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	cmd, addr, ns := startProcess(t, bin, dir)
	c := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The broker registered with its embedded nameserver, TBW102 included.
	require.Equal(t, addr, templateRoute(t, c, ns).BrokerDatas[0].BrokerAddrs[0])
	h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "orders", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4, QueueID: 0}
	resp, err := c.Invoke(ctx, addr, remoting.NewRequest(protocol.SendMessage, protocol.Ext(h), []byte("hello")))
	require.NoError(t, err)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "clean shutdown exits 0")

	// Restart on the same store: the message is still there.
	_, addr, _ = startProcess(t, bin, dir)
	resp, err = c.Invoke(ctx, addr, remoting.NewRequest(protocol.GetMaxOffset, protocol.Ext(&protocol.GetMaxOffsetRequestHeader{Topic: "orders"}), nil))
	require.NoError(t, err)
	require.Equal(t, "1", resp.ExtFields["offset"])
}

func TestMQBroker_BadInput(t *testing.T) {
	var out, errb strings.Builder
	require.Equal(t, exitUsage, run([]string{"--flush", "sometimes"}, &out, &errb, nil))
	require.Contains(t, errb.String(), "store.flush")
	errb.Reset()
	require.Equal(t, exitUsage, run([]string{"--nope"}, &out, &errb, nil))
	require.Contains(t, errb.String(), "nope")
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("store:\n  segmnt_size: 5\n"), 0o644))
	errb.Reset()
	require.Equal(t, exitError, run([]string{"-c", bad}, &out, &errb, nil))
	require.Contains(t, errb.String(), "segmnt_size")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(errb.String()), "\n")+1, "one line")
	// --acl with the embedded nameserver (which checks the same file)
	// needs the broker's own account to register.
	errb.Reset()
	require.Equal(t, exitUsage, run([]string{"--acl", testutil.WriteACL(t, testutil.ACLRules)}, &out, &errb, nil))
	require.Contains(t, errb.String(), "acl.access_key")
	require.Contains(t, errb.String(), "SLUICE_ACL_ACCESS_KEY")
	out.Reset()
	require.Equal(t, exitOK, run([]string{"-h"}, &out, &errb, nil))
	require.Contains(t, out.String(), "--store-dir")

	// A port in use: the broker's (Start fails, then Close; it panicked),
	// or the console's (after the broker started): the error, once.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	errb.Reset()
	require.Equal(t, exitError, run([]string{"-n", "127.0.0.1:1", "--listen", taken.Addr().String(),
		"--store-dir", t.TempDir(), "--console-listen", "off"}, &out, &errb, nil))
	require.Contains(t, errb.String(), "mqbroker: broker: listen "+taken.Addr().String())
	require.Contains(t, errb.String(), "address already in use")
	errb.Reset()
	require.Equal(t, exitError, run([]string{"-n", "127.0.0.1:1", "--listen", "127.0.0.1:0",
		"--store-dir", t.TempDir(), "--console-listen", taken.Addr().String()}, &out, &errb, nil))
	require.Contains(t, errb.String(), "mqbroker: console: listen tcp "+taken.Addr().String())
}

// templateRoute waits until the nameserver at ns routes TBW102 (a broker
// registered with it) and returns that route.
func templateRoute(t *testing.T, c *remoting.Client, ns string) protocol.TopicRouteData {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var route protocol.TopicRouteData
	require.Eventually(t, func() bool {
		resp, err := c.Invoke(ctx, ns, remoting.NewRequest(protocol.GetRouteInfoByTopic, map[string]string{"topic": "TBW102"}, nil))
		return err == nil && resp.Code == protocol.Success && remoting.DecodeBody(resp.SerializeType, resp.Body, &route) == nil
	}, 10*time.Second, 20*time.Millisecond, "a broker registered with %s", ns)
	return route
}

// TestMQBroker_SecureQuickstart: mqbroker --acl --tls-mode enforcing with
// its embedded nameserver: the broker registers (signed, over TLS) with
// the nameserver it embeds; a signed TLS client gets routes and sends; a
// plaintext client is refused; the self-signed certificate is kept under
// the store; and no secret appears anywhere in the log of the whole run.
func TestMQBroker_SecureQuickstart(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	aclFile := testutil.WriteACL(t, testutil.ACLRules)
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--store-dir", dir, "--acl", aclFile, "--tls-mode", "enforcing")
	cmd.Env = append(os.Environ(), "SLUICE_EMBEDDED_NAMESRV_LISTEN=127.0.0.1:0",
		"SLUICE_ACL_ACCESS_KEY=rootroot", "SLUICE_ACL_SECRET_KEY=root-secret-1")
	var logs testutil.SyncBuffer
	cmd.Stderr = &logs
	addr, ns := serving(t, cmd)

	c := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON, DialTimeout: 3 * time.Second,
		TLS: &tls.Config{InsecureSkipVerify: true}, Sign: sig.Signer("alice1", "alice-secret-1", "")}) //nolint:gosec // self-signed
	defer c.Close()
	require.Equal(t, addr, templateRoute(t, c, ns).BrokerDatas[0].BrokerAddrs[0])
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "orders", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4, QueueID: 0}
	resp, err := c.Invoke(ctx, addr, remoting.NewRequest(protocol.SendMessage, protocol.Ext(h), []byte("hello")))
	require.NoError(t, err)
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	h.Topic = "vault"
	resp, err = c.Invoke(ctx, addr, remoting.NewRequest(protocol.SendMessage, protocol.Ext(h), []byte("x")))
	require.NoError(t, err)
	require.Equal(t, protocol.NoPermission, int(resp.Code), resp.Remark)

	plain := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON, DialTimeout: 3 * time.Second})
	defer plain.Close()
	resp, err = plain.Invoke(ctx, addr, remoting.NewRequest(protocol.GetRouteInfoByTopic, map[string]string{"topic": "TBW102"}, nil))
	require.NoError(t, err)
	require.Equal(t, remoting.PlaintextRefusedRemark, resp.Remark, "plaintext to an enforcing broker: refused, saying why")
	_, err = os.Stat(filepath.Join(dir, "tls", "self-signed.crt"))
	require.NoError(t, err)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "clean shutdown exits 0")
	out := logs.String()
	require.Contains(t, out, "serving a self-signed certificate")
	require.Contains(t, out, "plaintext connection refused: this port enforces TLS")
	require.Contains(t, out, `ACL: access key \"alice1\" has no PUB permission on topic \"vault\"`)
	for _, line := range strings.Split(testutil.ACLRules, "\n") {
		if _, secret, ok := strings.Cut(line, "secretKey: "); ok {
			require.NotContains(t, out, secret, "a secret key in the log")
		}
	}
}

// TestServingLine: the line scripts wait for names the role and id the
// config gives, or, in controller mode, where they come from (the
// config's default role was printed there, which the controllers had not
// given).
func TestServingLine(t *testing.T) {
	cfg := conf.DefaultBroker()
	cfg.NamesrvAddr, cfg.Store.Dir = "127.0.0.1:9876", "d"
	line := servingLine(cfg, "127.0.0.1:10911")
	require.Regexp(t, servingRE, line)
	require.Contains(t, line, "role ASYNC_MASTER, id 0)")
	cfg.Controller = "127.0.0.1:9878"
	line = servingLine(cfg, "127.0.0.1:10911")
	require.Regexp(t, servingRE, line)
	require.Contains(t, line, "role and id from the controllers at 127.0.0.1:9878)")
	require.NotContains(t, line, "ASYNC_MASTER")
}

// TestMQBroker_ControllerTLSFlags: --controller-tls-ca turns on TLS to the
// controllers with that CA file (a missing file fails the start, naming
// controller_tls).
func TestMQBroker_ControllerTLSFlags(t *testing.T) {
	var out, errb strings.Builder
	missing := filepath.Join(t.TempDir(), "no-such-ca.pem")
	require.Equal(t, exitError, run([]string{"-n", "127.0.0.1:1", "--controller", "127.0.0.1:2", "--controller-tls-ca", missing,
		"--listen", "127.0.0.1:0", "--store-dir", t.TempDir(), "--console-listen", "off"}, &out, &errb, nil))
	require.Contains(t, errb.String(), "controller_tls")
	require.Contains(t, errb.String(), missing)
	out.Reset()
	require.Equal(t, exitOK, run([]string{"-h"}, &out, &errb, nil))
	require.Contains(t, out.String(), "--controller-tls-insecure")
}

// TestMQBroker_SelfSignedTrustAnchor: with TLS on and no certificate given,
// the broker and the nameserver it embeds serve the one self-signed
// certificate kept under the store, so that file verifies both
// (--tls-ca DIR/tls/self-signed.crt). The nameserver's was made in memory:
// verifying it against the broker's file failed.
func TestMQBroker_SelfSignedTrustAnchor(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--store-dir", dir, "--tls-mode", "enforcing", "--console-listen", "off")
	cmd.Env = append(os.Environ(), "SLUICE_EMBEDDED_NAMESRV_LISTEN=127.0.0.1:0")
	addr, ns := serving(t, cmd)
	pem, err := os.ReadFile(filepath.Join(dir, "tls", "self-signed.crt"))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem))
	for _, a := range []string{addr, ns} {
		conn, err := tls.Dial("tcp", a, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		require.NoError(t, err, "%s verified against the store's self-signed.crt", a)
		require.NoError(t, conn.Close())
	}
}

// TestMQBroker_SecureNamesrvFromFlags: a broker joins a nameserver that
// enforces TLS and ACL with flags alone (--namesrv-tls-insecure,
// --access-key, --secret-key; they had no flags); without them it does not
// start and says which flags it needs (it logged a warning and served,
// unfindable).
func TestMQBroker_SecureNamesrvFromFlags(t *testing.T) {
	cfg := conf.DefaultNameserver()
	cfg.Listen = "127.0.0.1:0"
	cfg.TLS.Mode = conf.TLSEnforcing
	cfg.ACL.File = testutil.WriteACL(t, testutil.ACLRules)
	ns, err := nameserver.New(cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	defer ns.Close()
	base := []string{"-n", ns.Addr(), "--listen", "127.0.0.1:0", "--console-listen", "off", "--grpc-listen", "off"}

	var out, errb strings.Builder
	require.Equal(t, exitError, run(append(base, "--store-dir", t.TempDir()), &out, &errb, nil))
	require.Contains(t, errb.String(), "--namesrv-tls", "plaintext towards an enforcing nameserver: the flag to use")

	errb.Reset()
	require.Equal(t, exitError, run(append(base, "--store-dir", t.TempDir(), "--namesrv-tls-insecure"), &out, &errb, nil))
	require.Contains(t, errb.String(), "--access-key/--secret-key", "unsigned: the flags to use")

	cmd := exec.Command(buildBinary(t), append(base, "--store-dir", t.TempDir(), "--namesrv-tls-insecure",
		"--access-key", "rootroot", "--secret-key", "root-secret-1")...)
	serving(t, cmd)
	rc := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON, Sign: sig.Signer("rootroot", "root-secret-1", ""),
		TLS: &tls.Config{InsecureSkipVerify: true}}) //nolint:gosec // the nameserver's self-signed certificate
	defer rc.Close()
	require.NotEmpty(t, templateRoute(t, rc, ns.Addr()).BrokerDatas, "registered, signed, over TLS")
}
