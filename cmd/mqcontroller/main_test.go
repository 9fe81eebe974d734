package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/acl/sig"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/internal/tlscert"
	"github.com/sluicemq/sluice/nameserver/controller"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// patience bounds every wait on the processes; tests assert outcomes, not
// speed.
const patience = 60 * time.Second

func buildBinary(t *testing.T) string {
	bin := filepath.Join(t.TempDir(), "mqcontroller")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// freePort returns a loopback address whose port was free a moment ago.
// NB: Raft peers must be known before the processes start, so the port is
// closed again; another process taking it in between fails the test
// loudly, it cannot pass wrongly.
// freePorts returns n distinct free addresses on 127.0.0.1 (see
// testutil.FreeAddrs).
func freePorts(t *testing.T, n int) []string { return testutil.FreeAddrs(t, n) }

// proc is one mqcontroller process.
type proc struct {
	cmd  *exec.Cmd
	addr string // remoting address, from its log
	done chan struct{}
	mu   sync.Mutex
	log  strings.Builder // guarded by mu
}

var listenRe = regexp.MustCompile(`msg="mqcontroller: listening" addr=(\S+)`)

func start(t *testing.T, bin string, env []string, args ...string) *proc {
	p := &proc{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env = append(cleanEnv(), env...)
	stderr, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	addrC := make(chan string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := listenRe.FindStringSubmatch(sc.Text()); m != nil {
				addrC <- m[1]
			}
		}
		_ = p.cmd.Wait()
	}()
	t.Cleanup(p.kill)
	select {
	case p.addr = <-addrC:
	case <-p.done:
		t.Fatalf("mqcontroller exited before listening:\n%s", p.logText())
	case <-time.After(patience):
		t.Fatal("mqcontroller did not log its address")
	}
	return p
}

func (p *proc) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// kill is kill -9, then waiting for the exit.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLUICE_") {
			env = append(env, kv)
		}
	}
	return env
}

// beating is a broker's heartbeats to every controller until stop.
type beating struct {
	cl   *controller.Client
	stop chan struct{}
	done chan struct{}
}

// beat heartbeats h every 100 ms. NB: while it runs, each heartbeat asks
// for a 30 s timeout, so that a loaded machine starving this goroutine
// does not kill the broker; halt sends a last one with none, from which
// the controllers' master timeout runs.
func beat(cl *controller.Client, h controller.Heartbeat) *beating {
	b := &beating{cl: cl, stop: make(chan struct{}), done: make(chan struct{})}
	send := func(h controller.Heartbeat) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _ = cl.Heartbeat(ctx, h)
		cancel()
	}
	go func() {
		defer close(b.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		alive := h
		alive.Timeout = 30 * time.Second
		for {
			send(alive)
			select {
			case <-b.stop:
				send(h)
				return
			case <-t.C:
			}
		}
	}()
	return b
}

// halt stops the heartbeats but keeps the connections open: the broker
// falls silent (SIGSTOP, a partition), so only the master timeout tells.
func (b *beating) halt() {
	select {
	case <-b.stop:
		return
	default:
	}
	close(b.stop)
	<-b.done
}

// TestProcesses_KillLeader runs 3 mqcontroller processes and a broker
// group of 3 (simulated by controller clients). Three times it kills the
// controller leader with SIGKILL, checks that the other two answer with
// the same state, and restarts the killed node from its directory; then,
// with one node down, it checks that the two left still replace a master
// that falls silent. It REPORTS the times it sees.
func TestProcesses_KillLeader(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	ports := freePorts(t, 6)
	addrs := ports[3:]
	var peers []string
	for i, p := range ports[:3] {
		peers = append(peers, fmt.Sprintf("n%d=%s", i, p))
	}
	env := []string{"SLUICE_CONTROLLER_MASTER_TIMEOUT=1s"}
	args := func(i int) []string {
		return []string{"--listen", addrs[i], "--controller-id", fmt.Sprintf("n%d", i),
			"--controller-peers", strings.Join(peers, ";"), "--controller-dir", filepath.Join(dir, fmt.Sprintf("n%d", i))}
	}
	procs := make([]*proc, 3)
	for i := range 3 {
		procs[i] = start(t, bin, env, args(i)...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*patience)
	defer cancel()

	brokers := map[int64]*beating{}
	for _, port := range []string{"10911", "10921", "10931"} {
		cl, err := controller.NewClient(controller.ClientConfig{Addrs: addrs, Timeout: time.Second})
		require.NoError(t, err)
		role, err := cl.Register(ctx, controller.Registration{Cluster: "c", Name: "b", ID: controller.NoMaster,
			Addr: "127.0.0.1:" + port})
		require.NoError(t, err)
		brokers[role.BrokerID] = beat(cl, controller.Heartbeat{Cluster: "c", Name: "b", ID: role.BrokerID})
		t.Cleanup(func() { cl.Close() })
		t.Cleanup(brokers[role.BrokerID].halt)
	}
	require.Len(t, brokers, 3)
	admin, err := controller.NewClient(controller.ClientConfig{Addrs: addrs, Timeout: time.Second})
	require.NoError(t, err)
	defer admin.Close()
	_, err = admin.AlterSyncStateSet(ctx, "b", 1, 1, []int64{1, 2}, 1)
	require.NoError(t, err)

	leader := func() int {
		l := -1
		require.Eventually(t, func() bool {
			for i, a := range addrs {
				if md, err := admin.Metadata(ctx, a); err == nil && md.IsLeader {
					l = i
					return true
				}
			}
			return false
		}, patience, 50*time.Millisecond)
		return l
	}
	// follows waits until node i, restarted, knows a leader other than
	// itself.
	follows := func(i int) {
		require.Eventually(t, func() bool {
			md, err := admin.Metadata(ctx, addrs[i])
			return err == nil && md.ControllerLeaderAddress != "" && md.ControllerLeaderAddress != addrs[i]
		}, patience, 50*time.Millisecond, "the restarted node never learnt the leader:\n%s", procs[i].logText())
	}
	var firstAnswer []time.Duration
	var down int
	for round := range 3 {
		down = leader()
		killed := time.Now()
		procs[down].kill()
		role, err := admin.ReplicaInfo(ctx, "b")
		require.NoError(t, err, "round %d", round)
		firstAnswer = append(firstAnswer, time.Since(killed))
		require.Equal(t, int64(1), role.MasterID)
		require.Equal(t, int32(1), role.MasterEpoch)
		require.Equal(t, []int64{1, 2}, role.SyncStateSet)
		if round < 2 {
			procs[down] = start(t, bin, env, args(down)...)
			follows(down)
		}
	}

	// The two left still replace a silent master with the in-sync replica.
	stopped := time.Now()
	brokers[1].halt()
	var role controller.Role
	require.Eventually(t, func() bool {
		role, err = admin.ReplicaInfo(ctx, "b")
		return err == nil && role.MasterID != 1
	}, patience, 20*time.Millisecond)
	elected := time.Since(stopped)
	require.Equal(t, int64(2), role.MasterID)
	require.Equal(t, int32(2), role.MasterEpoch)

	procs[down] = start(t, bin, env, args(down)...)
	follows(down)
	slices.Sort(firstAnswer)
	t.Logf("kill -9 of the controller leader, 3 rounds (Raft's default timeouts, client retries included): first "+
		"answer from the new leader after p50 %v, max %v; then a master that fell silent (connection open) was "+
		"replaced after %v (master timeout 1s)", firstAnswer[1].Round(time.Millisecond),
		firstAnswer[2].Round(time.Millisecond), elected.Round(time.Millisecond))
}

func TestBinary_BadCommandLine(t *testing.T) {
	bin := buildBinary(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown flag", []string{"--nope"}, 2, "-nope"},
		{"bad peers", []string{"--controller-peers", "n0"}, 2, "controller.peers"},
		{"self not a peer", []string{"--controller-id", "n7"}, 2, "n7"},
		{"bad listen", []string{"--listen", "nowhere"}, 2, "listen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = cleanEnv()
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "%s", out)
			require.Equal(t, tc.code, exit.ExitCode(), "%s", out)
			require.Contains(t, string(out), tc.want)
			require.True(t, strings.HasPrefix(string(out), "mqcontroller: "), "%s", out)
		})
	}
}

// TestBinary_ACLAndTLS: mqcontroller --acl --tls-mode enforcing
// --raft-tls-* serves
// TLS only, refuses every unsigned controller request NO_PERMISSION, and
// answers an admin's signed one. Before, it had neither flag: anyone who
// reached the port could register, elect and so make brokers cut logs.
func TestBinary_ACLAndTLS(t *testing.T) {
	bin := buildBinary(t)
	ports := freePorts(t, 2)
	dir := t.TempDir()
	caPEM, _, ca, err := tlscert.Issue([]string{"ca"}, nil, true)
	require.NoError(t, err)
	certPEM, keyPEM, _, err := tlscert.Issue([]string{"127.0.0.1"}, ca, false)
	require.NoError(t, err)
	for name, b := range map[string][]byte{"ca.crt": caPEM, "n0.crt": certPEM, "n0.key": keyPEM} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o600))
	}
	p := start(t, bin, nil, "--listen", ports[1], "--controller-peers", "n0="+ports[0],
		"--controller-dir", filepath.Join(dir, "n0"), "--acl", testutil.WriteACL(t, testutil.ACLRules), "--tls-mode", "enforcing",
		"--raft-tls-cert", filepath.Join(dir, "n0.crt"), "--raft-tls-key", filepath.Join(dir, "n0.key"),
		"--raft-tls-ca", filepath.Join(dir, "ca.crt"))
	require.Contains(t, p.logText(), "raft_tls=true")
	insecure := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the controller's self-signed certificate
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()

	rc := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON, TLS: insecure})
	defer rc.Close()
	resp, err := rc.Invoke(ctx, p.addr, remoting.NewRequest(protocol.ControllerGetMetadataInfo, nil, nil))
	require.NoError(t, err)
	require.Equal(t, int16(protocol.NoPermission), resp.Code, resp.Remark)

	plain := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON, DialTimeout: time.Second})
	defer plain.Close()
	pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
	defer pcancel()
	resp, err = plain.Invoke(pctx, p.addr, remoting.NewRequest(protocol.ControllerGetMetadataInfo, nil, nil))
	require.NoError(t, err)
	require.Equal(t, int16(protocol.SystemError), resp.Code, "enforcing TLS served plaintext")
	require.Equal(t, remoting.PlaintextRefusedRemark, resp.Remark, "and said why it did not")

	admin, err := controller.NewClient(controller.ClientConfig{Addrs: []string{p.addr}, Timeout: time.Second, TLS: insecure,
		Sign: sig.Signer("rootroot", "root-secret-1", "")})
	require.NoError(t, err)
	defer admin.Close()
	require.Eventually(t, func() bool {
		md, err := admin.Metadata(ctx, p.addr)
		return err == nil && md.IsLeader
	}, patience, 50*time.Millisecond, "%s", p.logText())
	role, err := admin.Register(ctx, controller.Registration{Cluster: "c", Name: "b", ID: controller.NoMaster, Addr: "127.0.0.1:10911"})
	require.NoError(t, err)
	require.True(t, role.IsMaster())
}

func TestBinary_RaftTLSNeedsAllThree(t *testing.T) {
	bin := buildBinary(t)
	cmd := exec.Command(bin, "--raft-tls-cert", "x.crt")
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	require.Equal(t, 2, exit.ExitCode(), "%s", out)
	require.Contains(t, string(out), "raft_tls.ca together")
}
