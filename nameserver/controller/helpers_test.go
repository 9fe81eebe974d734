package controller

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Test timings: Raft's and the master timeout under a third of
// production's, so elections take a fraction of a second, yet long enough
// that a loaded machine (-race, 2 shared cores) neither deposes leaders
// nor kills brokers that are alive: a leader change gives every broker a
// new grace period, which would change what a test sees.
const (
	testRaftTimeout   = 300 * time.Millisecond
	testMasterTimeout = 600 * time.Millisecond
	testBeatEvery     = 50 * time.Millisecond
	waitFor           = 15 * time.Second
)

// cluster is n controller nodes in this process on loopback ports.
type cluster struct {
	t     *testing.T
	mu    sync.Mutex // guards nodes' slots against beaters
	peers []Peer
	dirs  []string
	nodes []*Node // nil when closed
	tune  func(*Config)
}

func newCluster(t *testing.T, n int, tune func(*Config)) *cluster {
	t.Helper()
	c, lns := newPeers(t, n, tune)
	for i := range n {
		c.open(i, lns[i])
	}
	t.Cleanup(c.closeAll)
	return c
}

// newPeers binds n Raft listeners and returns a cluster of no open nodes
// yet, with their peers and directories.
func newPeers(t *testing.T, n int, tune func(*Config)) (*cluster, []net.Listener) {
	c := &cluster{t: t, tune: tune, nodes: make([]*Node, n)}
	lns := make([]net.Listener, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lns[i] = ln
		c.peers = append(c.peers, Peer{ID: fmt.Sprintf("n%d", i), Addr: ln.Addr().String()})
		c.dirs = append(c.dirs, filepath.Join(t.TempDir(), c.peers[i].ID))
	}
	return c, lns
}

func quietLogger() *slog.Logger {
	if os.Getenv("CTL_DEBUG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func (c *cluster) config(i int, ln net.Listener) Config {
	cfg := Config{ID: c.peers[i].ID, Peers: c.peers, Dir: c.dirs[i], Advertise: fmt.Sprintf("remoting-%d:1", i),
		MasterTimeout: testMasterTimeout, CheckInterval: 20 * time.Millisecond, Listener: ln,
		HeartbeatTimeout: testRaftTimeout, ElectionTimeout: testRaftTimeout,
		LeaderLeaseTimeout: testRaftTimeout / 2, Logger: quietLogger()}
	if c.tune != nil {
		c.tune(&cfg)
	}
	return cfg
}

// open starts node i, on ln or (nil) on its peer address again.
func (c *cluster) open(i int, ln net.Listener) {
	c.t.Helper()
	if ln == nil {
		var err error
		// NB: the port was this node's before; another process could
		// take it in between, which fails the test loudly.
		ln, err = net.Listen("tcp", c.peers[i].Addr)
		require.NoError(c.t, err)
	}
	n, err := Open(c.config(i, ln))
	require.NoError(c.t, err)
	c.mu.Lock()
	c.nodes[i] = n
	c.mu.Unlock()
}

func (c *cluster) close(i int) {
	c.mu.Lock()
	n := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if n != nil {
		require.NoError(c.t, n.Close())
	}
}

func (c *cluster) closeAll() {
	for i := range c.nodes {
		c.close(i)
	}
}

// leader waits until exactly one open node leads and serves, and returns
// its index.
func (c *cluster) leader() int {
	c.t.Helper()
	idx := -1
	require.Eventually(c.t, func() bool {
		idx = -1
		for i, n := range c.nodes {
			if n != nil && n.IsLeader() {
				if idx >= 0 {
					return false
				}
				idx = i
			}
		}
		return idx >= 0
	}, waitFor, 10*time.Millisecond, "no single leader")
	return idx
}

// eventually retries op while the node it went to is not (or no longer)
// the leader, e.g. right after an election.
func (c *cluster) eventually(op func(n *Node) error) {
	c.t.Helper()
	var err error
	require.Eventually(c.t, func() bool {
		err = op(c.nodes[c.leader()])
		return !errors.Is(err, ErrNotLeader)
	}, waitFor, 10*time.Millisecond)
	require.NoError(c.t, err)
}

// beater heartbeats one broker to every open node until stopped.
type beater struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// NB: while it runs, each heartbeat asks for a long timeout (aliveFor), so
// that a loaded machine starving this goroutine does not kill the broker;
// halt sends a last heartbeat with none, so that the node's master timeout
// counts from it: the broker falls silent then.
func (c *cluster) beat(name string, id int64, maxOffset int64) *beater {
	b := &beater{stop: make(chan struct{}), done: make(chan struct{})}
	hb := Heartbeat{Cluster: "c", Name: name, ID: id, MaxOffset: maxOffset, Timeout: aliveFor}
	send := func(hb Heartbeat) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, n := range c.nodes {
			if n != nil {
				n.Heartbeat(hb, nil, 0)
			}
		}
	}
	send(hb)
	go func() {
		defer close(b.done)
		t := time.NewTicker(testBeatEvery)
		defer t.Stop()
		for {
			select {
			case <-b.stop:
				last := hb
				last.Timeout = 0
				send(last)
				return
			case <-t.C:
				send(hb)
			}
		}
	}()
	c.t.Cleanup(b.halt)
	return b
}

// aliveFor is the heartbeat timeout of a test broker while its beater runs.
const aliveFor = time.Minute

// halt stops the heartbeats after a last one that leaves the node's master
// timeout to run, and waits until none is being sent.
func (b *beater) halt() {
	b.once.Do(func() { close(b.stop) })
	<-b.done
}

// register registers broker addr of group name through the leader.
func (c *cluster) register(name, addr string) Role {
	c.t.Helper()
	var role Role
	c.eventually(func(n *Node) error {
		var err error
		role, err = n.Register(Registration{Cluster: "c", Name: name, ID: NoMaster, Addr: addr}, nil, 0)
		return err
	})
	return role
}

// group waits until the leader's group name satisfies ok and returns it.
func (c *cluster) group(name string, ok func(g *Group) bool) *Group {
	c.t.Helper()
	var g *Group
	require.Eventually(c.t, func() bool {
		g = c.nodes[c.leader()].Group(name)
		return g != nil && ok(g)
	}, waitFor, 5*time.Millisecond, "group %s never reached the state", name)
	return g
}
