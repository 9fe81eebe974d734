// Package failover is the fault-injection harness of controller mode:
// three mqcontroller processes, a broker group of three mqbroker processes
// and an mqnamesrv, a producer recording every acknowledgement (and
// reading acknowledged messages back from the broker that acknowledged
// them), and faults injected one at a time at random moments.
//
// TestFailover_Faults, on loopback: kill -9 of the master; kill -9 of the
// controller leader; SIGSTOP of the master past the controllers' timeout;
// a graceful stop (SIGTERM) of the master and its restart; a rolling
// restart (SIGTERM, restart, rejoin in sync) of the three brokers in a
// random order; kill -9 or SIGSTOP of the controller leader the moment
// the master asks it to change the SyncStateSet (a slave stopped, then
// restarted);
// SIGSTOP of a controller that is not the leader, then of the leader; the
// master's HA link alone cut (a proxy before its HA port, silent or
// resetting). TestFailover_Partitions (root: each broker on a network
// namespace of its own): a partition of the master, of a slave; the
// master cut from the controllers alone (its slaves and clients still
// reach it), every broker cut from the controllers, the brokers cut from
// each other (their controller links up), one master–slave link cut.
//
// After each fault heals: every replica's log is a byte-for-byte copy of
// the master's, every acknowledged message is in it where its answer
// said, and a cut a broker refused (below its confirmed offset) is let
// through as an operator would (mqadmin allowLogCut) and then must have
// lost nothing acknowledged. Two masters acknowledging in one epoch would
// show as acknowledged messages missing or misplaced. Each test ends with
// a table: by fault kind, the count, the failover time (from the fault to
// the first acknowledgement of a send made after it) p50 and max, the
// sends acknowledged, those lost (0), and the cuts refused.
//
// RocketMQ 5 consumers (v5consumer_test.go: POP over the brokers' gRPC
// ports, the official Go SDK's protocol) receive and ack the producer's
// messages throughout, and an orderly group's the FIFO messages of 8
// message groups sent over gRPC: each round logs their deliveries,
// duplicates (the messages in flight at a failover come again), acked
// messages delivered again and FIFO messages delivered before their
// predecessor (both must be 0: the POP state is replicated with the log);
// at the end every acknowledged send must have been received (lost 0).
//
//	go test ./scripts/failover/                       # each kind once (CI)
//	SLUICE_FAILOVER_ROUNDS=200 go test -timeout 3h -v ./scripts/failover/
//	SLUICE_FAILOVER_FAULT="SIGTERM master"            # one kind only
//	SLUICE_FAILOVER_SEED=N                            # replay the random moments
//	scripts/failover.sh 300                           # many rounds, the summary
//
// The master's lease and the controllers' margin make a failover after a
// crash take at least about 2.5 s; a graceful stop hands over at once.
// The in-process TestClockSteps steps the brokers' and controllers'
// clocks (broker.Options.Clock, controller.Config.Now), which a real
// process's cannot be.
package failover

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/nameserver/controller"
)

const (
	patience = 90 * time.Second
	segSize  = 4 << 20
)

// proc is one server process, restartable with the same arguments.
type proc struct {
	name, bin string
	args      []string
	env       []string
	logPath   string
	readyRE   *regexp.Regexp

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *proc) start(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(cleanEnv(), p.env...)
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = pw, pw
	require.NoError(t, cmd.Start())
	pw.Close()
	done := make(chan struct{})
	ready := make(chan struct{})
	go func() {
		defer close(done)
		defer f.Close()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			fmt.Fprintln(f, sc.Text())
			if p.readyRE.MatchString(sc.Text()) {
				once.Do(func() { close(ready) })
			}
		}
		_ = cmd.Wait()
	}()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	select {
	case <-ready:
	case <-done:
		t.Fatalf("%s exited before it was ready; log %s:\n%s", p.name, p.logPath, tail(p.logPath))
	case <-time.After(patience):
		t.Fatalf("%s not ready after %v; log %s", p.name, patience, p.logPath)
	}
}

func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// kill is kill -9, waiting for the exit.
func (p *proc) kill() {
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGKILL)
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done != nil {
		<-done
	}
}

// stop is a graceful stop (SIGTERM), waiting for the exit; after patience
// it is kill -9 and the test fails.
func (p *proc) stop(t *testing.T) {
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGTERM)
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-time.After(patience):
		p.kill()
		t.Fatalf("%s did not stop within %v of SIGTERM; log %s", p.name, patience, p.logPath)
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(string(b), "\n")
	return strings.Join(lines[max(len(lines)-40, 0):], "\n")
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLUICE_") && !strings.HasPrefix(kv, "NAMESRV_ADDR=") {
			env = append(env, kv)
		}
	}
	return env
}

// freeAddrOn returns an address of host whose port was free a moment ago
// and that was not handed out before (testutil.FreeAddrsOn).
func freeAddrOn(t *testing.T, host string) string { return testutil.FreeAddrsOn(t, host, 1)[0] }

// freeAddr is freeAddrOn of loopback (the processes restart on the same
// addresses; a port taken in between fails the test loudly).
func freeAddr(t *testing.T) string { return freeAddrOn(t, "127.0.0.1") }

func build(t *testing.T, dir string) {
	out, err := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
		"github.com/sluicemq/sluice/cmd/mqbroker", "github.com/sluicemq/sluice/cmd/mqcontroller",
		"github.com/sluicemq/sluice/cmd/mqnamesrv").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
}

// cluster is the processes under test.
type cluster struct {
	t           *testing.T
	controllers []*proc
	ctlAddrs    []string
	brokers     []*proc
	brokerAddrs []string
	grpcAddrs   []string // each broker's gRPC port (RocketMQ 5 clients: the v5 consumer)
	storeDirs   []string
	nsAddr      string
	rc          *remoting.Client
	ctl         *controller.Client
	haProxies   []*linkProxy // loopback only: each broker's HA port, as its slaves reach it
	refused     atomic.Int64 // cuts the brokers refused (an operator allowed each)
}

// hosts places the brokers: on loopback (nil), or each on its own network
// namespace (partitions: its link can be cut).
type hosts struct {
	hub     string   // the root namespace's address on the bridge: nameserver, clients
	ctl     string   // the root namespace's second address: the controllers
	net     string   // the bridge's /24 (three bytes)
	ns      []string // each broker's namespace
	addr    []string // each broker's address in it
	devices []string // each broker's link (inside its namespace)
}

// netHosts makes a bridge in the root namespace and three namespaces on
// it, each a broker's "machine" with one address; the cleanup deletes them.
func netHosts(t *testing.T) *hosts {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("partition faults make network namespaces: CI runs as root")
		}
		t.Skip("needs root to make network namespaces (CI runs it)")
	}
	tag := fmt.Sprintf("%d", os.Getpid()%100000)
	net := fmt.Sprintf("10.215.%d", rand.IntN(250)+1)
	br := "slfb" + tag
	ipc := func(args ...string) {
		out, err := exec.Command("ip", args...).CombinedOutput()
		require.NoError(t, err, "ip %s: %s", strings.Join(args, " "), out)
	}
	ipc("link", "add", br, "type", "bridge")
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", br).Run() })
	ipc("addr", "add", net+".254/24", "dev", br)
	// NB: a secondary address: the clients' connections still come
	// from .254, so a broker can be cut from the controllers alone.
	ipc("addr", "add", net+".253/24", "dev", br)
	ipc("link", "set", br, "up")
	h := &hosts{hub: net + ".254", ctl: net + ".253", net: net}
	for i := range 3 {
		ns := fmt.Sprintf("slf%s-%d", tag, i)
		host := fmt.Sprintf("slfv%s%d", tag, i)
		ipc("netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		ipc("link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", ns)
		ipc("link", "set", host, "master", br, "up")
		ipc("-n", ns, "addr", "add", fmt.Sprintf("%s.%d/24", net, i+1), "dev", "eth0")
		ipc("-n", ns, "link", "set", "eth0", "up")
		ipc("-n", ns, "link", "set", "lo", "up")
		h.ns = append(h.ns, ns)
		h.addr = append(h.addr, fmt.Sprintf("%s.%d", net, i+1))
		h.devices = append(h.devices, "eth0")
	}
	return h
}

// partition cuts (or heals) broker i's link: it reaches nothing, and
// nothing reaches it, until healed.
func (h *hosts) partition(t *testing.T, i int, cut bool) {
	state := "up"
	if cut {
		state = "down"
	}
	out, err := exec.Command("ip", "-n", h.ns[i], "link", "set", h.devices[i], state).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// blackhole cuts (or heals) broker i's packets to addr (an address of
// the bridge): they are dropped silently, as in a partition, while its
// other links stay up. A TCP connection needs both ways, so cutting one
// way cuts the link.
func (h *hosts) blackhole(t *testing.T, i int, addr string, cut bool) {
	op := "add"
	if !cut {
		op = "del"
	}
	out, err := exec.Command("ip", "-n", h.ns[i], "route", op, "blackhole", addr+"/32").CombinedOutput()
	require.NoError(t, err, "ip -n %s route %s blackhole %s: %s", h.ns[i], op, addr, out)
}

func startCluster(t *testing.T, h *hosts) *cluster {
	work := t.TempDir()
	bin := filepath.Join(work, "bin")
	build(t, bin)
	c := &cluster{t: t, rc: remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON})}
	t.Cleanup(func() { c.rc.Close() })
	hub, ctlHost := "127.0.0.1", "127.0.0.1"
	if h != nil {
		hub, ctlHost = h.hub, h.ctl
	}
	var peers []string
	for i := range 3 {
		peers = append(peers, fmt.Sprintf("n%d=%s", i, freeAddrOn(t, ctlHost)))
		c.ctlAddrs = append(c.ctlAddrs, freeAddrOn(t, ctlHost))
	}
	for i := range 3 {
		p := &proc{name: fmt.Sprintf("controller-n%d", i), bin: filepath.Join(bin, "mqcontroller"),
			args: []string{"--listen", c.ctlAddrs[i], "--controller-id", fmt.Sprintf("n%d", i),
				"--controller-peers", strings.Join(peers, ";"), "--controller-dir", filepath.Join(work, fmt.Sprintf("ctl%d", i))},
			logPath: filepath.Join(work, fmt.Sprintf("ctl%d.log", i)), readyRE: regexp.MustCompile(`mqcontroller: listening`)}
		p.start(t)
		t.Cleanup(p.kill)
		c.controllers = append(c.controllers, p)
	}
	ns := &proc{name: "mqnamesrv", bin: filepath.Join(bin, "mqnamesrv"), args: []string{"--listen", freeAddrOn(t, hub)},
		logPath: filepath.Join(work, "ns.log"), readyRE: regexp.MustCompile(`mqnamesrv: listening`)}
	ns.start(t)
	t.Cleanup(ns.kill)
	nsAddr := ns.args[1]
	c.nsAddr = nsAddr
	for i := range 3 {
		addr, haAddr, grpcAddr := freeAddr(t), freeAddr(t), freeAddr(t)
		haAdvertise := haAddr
		if h != nil {
			addr, haAddr, grpcAddr = h.addr[i]+":10911", h.addr[i]+":10912", h.addr[i]+":8081" // NB: the namespace is the broker's own
			haAdvertise = haAddr
		} else {
			px := newLinkProxy(t, haAddr)
			c.haProxies = append(c.haProxies, px)
			haAdvertise = px.addr()
		}
		dir := filepath.Join(work, fmt.Sprintf("broker%d", i))
		p := &proc{name: fmt.Sprintf("broker%d", i), bin: filepath.Join(bin, "mqbroker"),
			args: []string{"-n", nsAddr, "--listen", addr, "--ha-listen", haAddr, "--ha-advertise", haAdvertise, "--store-dir", dir,
				"--broker-name", "g", "--controller", strings.Join(c.ctlAddrs, ";"), "--grpc-listen", grpcAddr},
			env: []string{"SLUICE_STORE_SEGMENT_SIZE=" + strconv.Itoa(segSize), "SLUICE_STORE_MAX_MESSAGE_SIZE=65536",
				"SLUICE_STORE_PREALLOCATE=false", "SLUICE_REGISTER_INTERVAL=500ms", "SLUICE_HA_SYNC_TIMEOUT=2s",
				"SLUICE_HA_MAX_CATCHUP_LAG=3s"},
			logPath: filepath.Join(work, fmt.Sprintf("broker%d.log", i)), readyRE: regexp.MustCompile(`serving on`)}
		if h != nil {
			p.args = append([]string{"netns", "exec", h.ns[i], p.bin}, p.args...)
			p.bin = "ip"
		}
		p.start(t)
		t.Cleanup(p.kill)
		c.brokers = append(c.brokers, p)
		c.brokerAddrs = append(c.brokerAddrs, addr)
		c.grpcAddrs = append(c.grpcAddrs, grpcAddr)
		c.storeDirs = append(c.storeDirs, dir)
	}
	var err error
	c.ctl, err = controller.NewClient(controller.ClientConfig{Addrs: c.ctlAddrs, Timeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { c.ctl.Close() })
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range append(c.controllers, c.brokers...) {
				t.Logf("---- %s (%s)\n%s", p.name, p.logPath, tail(p.logPath))
			}
		}
	})
	return c
}

// runtime is a broker's GET_BROKER_RUNTIME_INFO (nil if unreachable).
func (c *cluster) runtime(i int) map[string]string {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	resp, err := c.rc.Invoke(ctx, c.brokerAddrs[i], remoting.NewRequest(protocol.GetBrokerRuntimeInfo, nil, nil))
	if err != nil || resp.Code != protocol.Success {
		return nil
	}
	var kv protocol.KVTable
	if remoting.DecodeBody(resp.SerializeType, resp.Body, &kv) != nil {
		return nil
	}
	return kv.Table
}

// healthy waits until one broker is master and the two others follow its
// epoch, and returns the master's index and epoch.
func (c *cluster) healthy() (int, int) {
	master, epoch := -1, -1
	seen := make([]string, len(c.brokers)) // each broker's last state, for a failure
	defer func() {
		if c.t.Failed() {
			c.t.Logf("the brokers as last seen:\n%s", strings.Join(seen, "\n"))
		}
	}()
	require.Eventually(c.t, func() bool {
		master, epoch = -1, -1
		var slaves []int
		for i := range c.brokers {
			rt := c.runtime(i)
			if rt == nil {
				seen[i] = fmt.Sprintf("broker%d: unreachable", i)
				return false
			}
			seen[i] = fmt.Sprintf("broker%d: %s epoch %s syncStateSet %s haState %s maxOffset %s confirmed %s refusedCutTo %q",
				i, rt["brokerRole"], rt["controllerEpoch"], rt["syncStateSet"], rt["haState"],
				rt["commitLogMaxOffset"], rt["confirmedOffset"], rt["refusedCutTo"])
			if to := rt["refusedCutTo"]; to != "" {
				c.allowCut(i, to)
				return false
			}
			e, _ := strconv.Atoi(rt["controllerEpoch"])
			switch rt["brokerRole"] {
			case "MASTER":
				// NB: every replica in sync, so that any can take over.
				if master >= 0 || len(strings.Fields(strings.Trim(rt["syncStateSet"], "[]"))) != 3 {
					return false
				}
				master, epoch = i, e
			case "SLAVE":
				if rt["haState"] != "replicating" {
					return false
				}
				slaves = append(slaves, e)
			default:
				return false
			}
		}
		return master >= 0 && len(slaves) == 2 && slaves[0] == epoch && slaves[1] == epoch
	}, patience, 20*time.Millisecond, "a master and two slaves of its epoch, all three in sync")
	return master, epoch
}

// allowCut answers a broker's refused cut as an operator would, with
// mqadmin allowLogCut: the harness then checks that nothing acknowledged
// was lost (the cut is refused on a lower bound of what was acknowledged,
// so it may be refused when the cut part held nothing acknowledged).
func (c *cluster) allowCut(i int, to string) {
	c.refused.Add(1)
	c.t.Logf("broker%d refused a cut of its log to %s (confirmed %s): allowing it, then checking every acknowledgement",
		i, to, c.runtime(i)["confirmedOffset"])
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := c.rc.Invoke(ctx, c.brokerAddrs[i], remoting.NewRequest(protocol.AllowLogCut, nil, nil))
	if err != nil || resp.Code != protocol.Success {
		c.t.Logf("allowLogCut of broker%d: %v %v", i, err, resp)
	}
}

// newMaster waits until a broker other than old is master of an epoch past
// oldEpoch.
func (c *cluster) newMaster(old, oldEpoch int) int {
	idx := -1
	require.Eventually(c.t, func() bool {
		for i := range c.brokers {
			if i == old {
				continue
			}
			if rt := c.runtime(i); rt != nil && rt["brokerRole"] == "MASTER" {
				if e, _ := strconv.Atoi(rt["controllerEpoch"]); e > oldEpoch {
					idx = i
					return true
				}
			}
		}
		return false
	}, patience, 10*time.Millisecond, "a new master")
	return idx
}

// ctlLeader returns the index of the controller leader.
func (c *cluster) ctlLeader() int {
	idx := -1
	require.Eventually(c.t, func() bool {
		for i, a := range c.ctlAddrs {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			md, err := c.ctl.Metadata(ctx, a)
			cancel()
			if err == nil && md.IsLeader {
				idx = i
				return true
			}
		}
		return false
	}, patience, 20*time.Millisecond, "a controller leader")
	return idx
}

// readLog reads a broker's commitlog bytes in [0, end) from its files.
func readLog(t *testing.T, dir string, end int64) []byte {
	out := make([]byte, end)
	files, err := filepath.Glob(filepath.Join(dir, "commitlog", "[0-9]*"))
	require.NoError(t, err)
	for _, f := range files {
		base, err := strconv.ParseInt(filepath.Base(f), 10, 64)
		require.NoError(t, err)
		if base >= end {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		copy(out[base:end], b)
	}
	return out
}

// producer sends without pause, recording what is acknowledged.
type producer struct {
	p       *client.Producer
	mu      sync.Mutex
	acks    []ack
	last    atomic.Int64 // unix nanos of the last acknowledgement
	paused  atomic.Bool
	flying  atomic.Int64 // sends in progress
	seq     atomic.Int64
	lastErr atomic.Value // string: the last send error, for reports
	reads   atomic.Int64 // acknowledged messages read back from the broker that acknowledged them
	misread atomic.Int64 // reads that found another message where one was acknowledged
	stop    chan struct{}
	done    chan struct{}
}

type ack struct {
	id   string
	pos  int64
	host string    // the broker that acknowledged
	sent time.Time // when the send began
	at   time.Time // when it was acknowledged
}

func startProducer(t *testing.T, nsAddr string) *producer {
	p, err := client.NewProducer(client.WithNameServers(nsAddr), client.WithGroup("failover"),
		client.WithSendTimeout(3*time.Second))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	pr := &producer{p: p, stop: make(chan struct{}), done: make(chan struct{})}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-pr.stop:
					return
				default:
				}
				if pr.paused.Load() {
					time.Sleep(5 * time.Millisecond) // NB: a pause, not a wait for a condition
					continue
				}
				if err := pr.sendOne(p); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	rc := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON})
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
		for {
			select {
			case <-pr.stop:
				return
			default:
			}
			if err := pr.readOne(rc, r); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() { wg.Wait(); rc.Close(); close(pr.done) }()
	t.Cleanup(func() { close(pr.stop); <-pr.done; p.Close() })
	return pr
}

// sendOne sends one message and records its acknowledgement. A pause
// that starts meanwhile waits for it (flying).
func (pr *producer) sendOne(p *client.Producer) error {
	pr.flying.Add(1)
	defer pr.flying.Add(-1)
	if pr.paused.Load() { // NB: check() waits for flying == 0 after pausing
		return nil
	}
	id := fmt.Sprintf("m-%d", pr.seq.Add(1))
	sent := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	res, err := p.Send(ctx, &client.Message{Topic: "orders", Body: []byte(id)})
	if err != nil || res.Status != client.SendOK {
		if err != nil {
			pr.lastErr.Store(fmt.Sprintf("%v: %v", time.Now().Format("15:04:05.000"), err))
		}
		return nil
	}
	host, pos, err := message.ParseOffsetMsgID(res.OffsetMsgID)
	if err != nil {
		return fmt.Errorf("offset msg id %q: %w", res.OffsetMsgID, err)
	}
	pr.mu.Lock()
	pr.acks = append(pr.acks, ack{id, pos, host.String(), sent, time.Now()})
	pr.mu.Unlock()
	pr.last.Store(time.Now().UnixNano())
	return nil
}

// readOne reads back a recent acknowledged message from the broker that
// acknowledged it (VIEW_MESSAGE_BY_ID at the offset its answer gave): a
// broker that answers must hold that message there (a broker that cut
// acknowledged data or took another's place would not). An unreachable
// broker or a position it lacks is no error: it may be down or replaced.
func (pr *producer) readOne(rc *remoting.Client, r *rand.Rand) error {
	pr.mu.Lock()
	n := len(pr.acks)
	var a ack
	if n > 0 {
		a = pr.acks[n-1-r.IntN(min(n, 500))]
	}
	pr.mu.Unlock()
	if n == 0 {
		time.Sleep(5 * time.Millisecond) // NB: a pause, not a wait for a condition
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	resp, err := rc.Invoke(ctx, a.host, remoting.NewRequest(protocol.ViewMessageByID, protocol.Ext(&protocol.ViewMessageByIDRequestHeader{Offset: a.pos}), nil))
	if err != nil || resp.Code != protocol.Success {
		time.Sleep(5 * time.Millisecond) // NB: a pause, not a wait for a condition
		return nil
	}
	pr.reads.Add(1)
	m, err := message.Decode(resp.Body)
	if err != nil {
		return fmt.Errorf("reading acknowledged %s at %d from %s: %w", a.id, a.pos, a.host, err)
	}
	if string(m.Body) != a.id {
		pr.misread.Add(1)
		return fmt.Errorf("reading acknowledged %s at %d from %s found %q", a.id, a.pos, a.host, m.Body)
	}
	return nil
}

// ackedBy waits for the acknowledgement, by the broker at addr ("" for
// any), of a send made after at (not one in flight at it) and returns how
// long after at the first came.
func (pr *producer) ackedBy(t *testing.T, addr string, at time.Time) time.Duration {
	var d time.Duration
	require.Eventually(t, func() bool {
		pr.mu.Lock()
		defer pr.mu.Unlock()
		found := false
		for i := len(pr.acks) - 1; i >= 0 && pr.acks[i].at.After(at); i-- {
			if a := pr.acks[i]; a.sent.After(at) && (addr == "" || a.host == addr) {
				d, found = a.at.Sub(at), true
			}
		}
		return found
	}, patience, time.Millisecond, "an acknowledged send after the fault")
	if d > 5*time.Second {
		t.Logf("slow: the last send error was %v", pr.lastErr.Load())
	}
	return d
}

// check pauses the producer, waits for the replicas to equal the master
// (answering a refused cut as an operator), verifies them byte for byte
// and every acknowledgement against the master's log. It returns how many
// acknowledged messages are not where their answer said (the test has
// failed then, naming the first of them).
func (c *cluster) check(pr *producer) (lost int) {
	t := c.t
	pr.paused.Store(true)
	defer pr.paused.Store(false)
	require.Eventually(t, func() bool { return pr.flying.Load() == 0 }, patience, time.Millisecond, "the sends in flight")
	master, _ := c.healthy()
	var end int64
	require.Eventually(t, func() bool {
		rt := c.runtime(master)
		if rt == nil {
			return false
		}
		end, _ = strconv.ParseInt(rt["commitLogMaxOffset"], 10, 64)
		for i := range c.brokers {
			if i == master {
				continue
			}
			r := c.runtime(i)
			if r == nil || r["commitLogMaxOffset"] != rt["commitLogMaxOffset"] {
				return false
			}
		}
		return true
	}, patience, 20*time.Millisecond, "replicas equal to the master")
	mlog := readLog(t, c.storeDirs[master], end)
	for i := range c.brokers {
		if i != master {
			require.True(t, bytes.Equal(mlog, readLog(t, c.storeDirs[i], end)), "broker%d's log differs from the master's (broker%d)", i, master)
		}
	}
	pr.mu.Lock()
	acks := slices.Clone(pr.acks)
	pr.mu.Unlock()
	var first string
	for _, a := range acks {
		what := ""
		if a.pos >= end {
			what = fmt.Sprintf("acknowledged %s by %s at %d, past the log's end %d", a.id, a.host, a.pos, end)
		} else if r, err := message.Decode(mlog[a.pos:]); err != nil {
			what = fmt.Sprintf("acknowledged %s by %s at %d: %v", a.id, a.host, a.pos, err)
		} else if string(r.Body) != a.id {
			what = fmt.Sprintf("acknowledged %s by %s at %d: the record there is %q", a.id, a.host, a.pos, r.Body)
		}
		if what != "" {
			lost++
			if first == "" {
				first = what
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged messages lost; the first: %s", lost, len(acks), first)
	}
	c.oneMasterAnEpoch(master, acks)
	require.Zero(t, pr.misread.Load(), "reads that returned another message at an acknowledged position")
	return lost
}

// oneMasterAnEpoch checks that the acknowledged messages of each epoch
// of the master's history (GET_BROKER_EPOCH_CACHE: each epoch's start
// offset) were all acknowledged by one broker: two masters acknowledging
// in one epoch would show as two.
func (c *cluster) oneMasterAnEpoch(master int, acks []ack) {
	t := c.t
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.rc.Invoke(ctx, c.brokerAddrs[master], remoting.NewRequest(protocol.GetBrokerEpochCache, nil, nil))
	require.NoError(t, err)
	require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
	var cache struct {
		Epochs []struct {
			Epoch int32 `json:"epoch"`
			Start int64 `json:"startOffset"`
		} `json:"epochList"`
	}
	require.NoError(t, remoting.DecodeBody(resp.SerializeType, resp.Body, &cache))
	require.NotEmpty(t, cache.Epochs, "the master's epochs")
	by := map[int32]string{}
	for _, a := range acks {
		e := int32(-1)
		for _, en := range cache.Epochs {
			if en.Start <= a.pos {
				e = en.Epoch
			}
		}
		if h, ok := by[e]; ok && h != a.host {
			t.Errorf("epoch %d acknowledged by two masters: %s and %s (%s at %d)", e, h, a.host, a.id, a.pos)
			return
		}
		by[e] = a.host
	}
}

// rounds is SLUICE_FAILOVER_ROUNDS, else def.
func rounds(t *testing.T, def int) int {
	if v := os.Getenv("SLUICE_FAILOVER_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		require.Positive(t, n, "SLUICE_FAILOVER_ROUNDS")
		return n
	}
	return def
}
