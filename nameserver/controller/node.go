package controller

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/sluicemq/sluice/internal/protocol"
)

// Peer is one controller node: its id and Raft transport address.
type Peer struct {
	ID   string
	Addr string
}

// ParsePeers reads "n0=ip:port;n1=ip:port;n2=ip:port" (the
// --controller-peers flag). Ids and addresses must be unique.
func ParsePeers(s string) ([]Peer, error) {
	var out []Peer
	for part := range strings.SplitSeq(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "=")
		id, addr = strings.TrimSpace(id), strings.TrimSpace(addr)
		if !ok || id == "" {
			return nil, fmt.Errorf("controller: peer %q is not id=ip:port", part)
		}
		if host, port, err := net.SplitHostPort(addr); err != nil || host == "" || port == "" || port == "0" {
			return nil, fmt.Errorf("controller: peer %s's address %q is not ip:port", id, addr)
		}
		for _, p := range out {
			if p.ID == id || p.Addr == addr {
				return nil, fmt.Errorf("controller: peers %s=%s and %s=%s repeat an id or address", p.ID, p.Addr, id, addr)
			}
		}
		out = append(out, Peer{ID: id, Addr: addr})
	}
	if len(out) == 0 {
		return nil, errors.New("controller: no peers; give at least this node as id=ip:port")
	}
	return out, nil
}

// FormatPeers is ParsePeers' inverse.
func FormatPeers(peers []Peer) string {
	parts := make([]string, len(peers))
	for i, p := range peers {
		parts[i] = p.ID + "=" + p.Addr
	}
	return strings.Join(parts, ";")
}

// Config configures a Node.
type Config struct {
	// ID is this node's id; it must be one of Peers.
	ID string
	// Peers are every node of the Raft group, this one included. They
	// bootstrap the group the first time a node starts with an empty Dir.
	Peers []Peer
	// Dir holds the Raft log and stable store (raft.db, BoltDB) and the
	// snapshots.
	Dir string
	// Advertise is this node's remoting address: what a follower tells
	// clients to call when this node leads.
	Advertise string
	// MasterTimeout: a master whose heartbeats stopped this long is replaced
	// (default 3 s).
	MasterTimeout time.Duration
	// LeaseMargin is how long past a master's lease (announced with its
	// heartbeats) the leader waits before it replaces a master whose
	// connection closed or that fell silent (default 500 ms: above Raft's
	// leader lease, the time a deposed leader may still answer).
	LeaseMargin time.Duration
	// ElectUnclean allows electing a replica outside the SyncStateSet when
	// none in it is alive (it may lack acknowledged messages).
	ElectUnclean bool
	// CheckInterval is how often the leader looks for dead masters (default
	// MasterTimeout/10).
	CheckInterval time.Duration
	// Listener, when set, is the Raft transport's listener (bound to this
	// node's peer address); otherwise Open binds that address.
	Listener net.Listener
	// RaftTLS, when set, runs the Raft transport over TLS with this
	// configuration both ways (RaftTLS builds it: mutual verification
	// against the peers' CA); nil: plain TCP.
	RaftTLS *tls.Config
	// Raft timings; zero takes hashicorp/raft's defaults (1 s heartbeat and
	// election timeouts, 500 ms lease). Tests shorten them.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// SnapshotThreshold is how many log entries since the last snapshot
	// start a new one (default 8192).
	SnapshotThreshold uint64
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Now, when set, is the clock liveness and leases are measured on
	// (default time.Now; only differences of its readings count, through
	// their monotonic reading). Tests step it.
	Now func() time.Time
}

func (c *Config) fill() error {
	if c.MasterTimeout <= 0 {
		c.MasterTimeout = 3 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.LeaseMargin <= 0 {
		c.LeaseMargin = 500 * time.Millisecond
	}
	if c.CheckInterval <= 0 {
		c.CheckInterval = max(c.MasterTimeout/10, 10*time.Millisecond)
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 8192
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Dir == "" {
		return errors.New("controller: no directory (--controller-dir)")
	}
	if !slices.ContainsFunc(c.Peers, func(p Peer) bool { return p.ID == c.ID }) {
		return fmt.Errorf("controller: node id %q is not one of the peers %q", c.ID, FormatPeers(c.Peers))
	}
	return nil
}

// applyTimeout bounds one Raft write.
const applyTimeout = 5 * time.Second

// Node is one controller: a Raft member holding the FSM, and, while it
// leads, the liveness table and the loop that elects masters.
//
// Lifecycle: Open, …, Close. Safe for concurrent use.
type Node struct {
	cfg    Config
	log    *slog.Logger
	fsm    *fsm
	raft   *raft.Raft
	stream *stream
	trans  *raft.NetworkTransport
	store  *raftboltdb.BoltStore

	live *liveness

	leaderReady atomic.Bool               // leads, and has applied everything before its term
	readyAt     atomic.Pointer[time.Time] // when it last became ready to lead (monotonic)
	opened      time.Time                 // when Open ran: liveness grace starts here
	notify      chan *Group               // changed groups to tell members about
	leaderCh    chan bool                 // raft's leadership notifications
	kick        chan struct{}             // wakes electLoop

	quit      chan struct{}
	wg        sync.WaitGroup // leaderLoop, electLoop, notifyLoop
	closeOnce sync.Once
	closeErr  error
}

// Open starts a node: it opens (or creates) Dir, joins the Raft group,
// bootstrapping it when Dir holds no state, and starts its loops.
func Open(cfg Config) (*Node, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	n := &Node{cfg: cfg, opened: cfg.Now(), log: cfg.Logger.With("controller", cfg.ID), fsm: newFSM(),
		notify: make(chan *Group, 256), leaderCh: make(chan bool, 8), kick: make(chan struct{}, 1), quit: make(chan struct{})}
	n.fsm.onChange = n.applied
	n.live = newLiveness()
	if err := n.openRaft(); err != nil {
		n.closeRaft()
		return nil, err
	}
	n.wg.Add(3)
	go n.leaderLoop()
	go n.electLoop()
	go n.notifyLoop()
	return n, nil
}

func (n *Node) openRaft() error {
	self := n.self()
	ln := n.cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", self.Addr); err != nil {
			return fmt.Errorf("controller: raft listen: %w", err)
		}
	}
	hl := raftLogger(n.log)
	n.stream = newStream(ln, n.cfg.RaftTLS)
	n.trans = raft.NewNetworkTransportWithLogger(n.stream, 3, 10*time.Second, hl)
	store, err := raftboltdb.NewBoltStore(filepath.Join(n.cfg.Dir, "raft.db"))
	if err != nil {
		return fmt.Errorf("controller: open raft.db: %w", err)
	}
	n.store = store
	snaps, err := raft.NewFileSnapshotStoreWithLogger(n.cfg.Dir, 3, hl)
	if err != nil {
		return fmt.Errorf("controller: snapshot store: %w", err)
	}
	logs, err := raft.NewLogCache(512, store)
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(self.ID)
	rc.Logger = hl
	rc.NotifyCh = n.leaderCh
	rc.SnapshotThreshold = n.cfg.SnapshotThreshold
	if n.cfg.HeartbeatTimeout > 0 {
		rc.HeartbeatTimeout = n.cfg.HeartbeatTimeout
	}
	if n.cfg.ElectionTimeout > 0 {
		rc.ElectionTimeout = n.cfg.ElectionTimeout
	}
	if n.cfg.LeaderLeaseTimeout > 0 {
		rc.LeaderLeaseTimeout = n.cfg.LeaderLeaseTimeout
	}
	existing, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	if !existing {
		var servers []raft.Server
		for _, p := range n.cfg.Peers {
			servers = append(servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
		}
		if err := raft.BootstrapCluster(rc, logs, store, snaps, n.trans, raft.Configuration{Servers: servers}); err != nil {
			return fmt.Errorf("controller: bootstrap: %w", err)
		}
	}
	r, err := raft.NewRaft(rc, n.fsm, logs, store, snaps, n.trans)
	if err != nil {
		return fmt.Errorf("controller: start raft: %w", err)
	}
	n.raft = r
	return nil
}

func (n *Node) self() Peer {
	i := slices.IndexFunc(n.cfg.Peers, func(p Peer) bool { return p.ID == n.cfg.ID })
	return n.cfg.Peers[i]
}

// Close leaves the Raft group's work to the others: it stops the loops,
// shuts Raft down and closes the stores. Idempotent.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		close(n.quit)
		n.wg.Wait()
		n.closeErr = n.closeRaft()
	})
	return n.closeErr
}

func (n *Node) closeRaft() error {
	var errs []error
	if n.raft != nil {
		errs = append(errs, n.raft.Shutdown().Error())
	}
	if n.trans != nil {
		errs = append(errs, n.trans.Close())
	}
	if n.stream != nil {
		errs = append(errs, n.stream.Close())
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("controller: close: %w", err)
	}
	return nil
}

// now reads the node's clock (Config.Now).
func (n *Node) now() time.Time { return n.cfg.Now() }

// ID returns the node's id.
func (n *Node) ID() string { return n.cfg.ID }

// Peers returns the Raft group's nodes.
func (n *Node) Peers() []Peer { return slices.Clone(n.cfg.Peers) }

// IsLeader reports whether this node leads and serves writes.
//
// NB: Raft's state too: a leader that lost its majority steps down within
// its leader lease, and leaderLoop learns it a moment later; heartbeat
// answers (a master's lease) must not say "leader" in between.
func (n *Node) IsLeader() bool { return n.leaderReady.Load() && n.raft.State() == raft.Leader }

// Leader returns the leader's id and remoting address as this node knows
// them ("" when unknown).
func (n *Node) Leader() (id, addr string) {
	_, lid := n.raft.LeaderWithID()
	if lid == "" {
		return "", ""
	}
	return string(lid), n.fsm.nodeAddr(string(lid))
}

// Group returns a copy of the named group as this node's FSM has it, or
// nil.
func (n *Node) Group(name string) *Group { return n.fsm.group(name) }

// Snapshot makes Raft take a snapshot now (tests, and an operator's
// compaction).
func (n *Node) Snapshot() error { return n.raft.Snapshot().Error() }

// propose applies cmd through Raft and returns its result. Only the leader
// may; a node that lost leadership returns ErrNotLeader.
func (n *Node) propose(cmd *command) (result, error) {
	b, err := json.Marshal(cmd)
	if err != nil {
		return result{}, fmt.Errorf("controller: encode command: %w", err)
	}
	f := n.raft.Apply(b, applyTimeout)
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			return result{}, ErrNotLeader
		}
		if errors.Is(err, raft.ErrRaftShutdown) {
			return result{}, ErrClosed
		}
		return result{}, fmt.Errorf("controller: apply: %w", err)
	}
	res, ok := f.Response().(result)
	if !ok {
		return result{}, fmt.Errorf("controller: apply returned %T", f.Response())
	}
	return res, nil
}

// leaderLoop follows leadership: on gaining it, the node waits until its
// FSM holds everything committed before (Barrier), announces its remoting
// address, and only then serves; on losing it, it stops at once.
func (n *Node) leaderLoop() {
	defer n.wg.Done()
	for {
		select {
		case <-n.quit:
			return
		case leader := <-n.leaderCh:
			if !leader {
				n.leaderReady.Store(false)
				n.log.Info("controller: lost leadership")
				continue
			}
			n.lead()
		}
	}
}

// lead readies a new leader: it waits until its FSM holds everything
// committed before its term (Barrier) and announces its remoting address,
// retrying while it still leads, then serves.
func (n *Node) lead() {
	for n.raft.State() == raft.Leader {
		err := n.raft.Barrier(applyTimeout).Error()
		if err == nil {
			_, err = n.propose(&command{Op: opAnnounce, Announce: &announceCmd{NodeID: n.cfg.ID, Addr: n.cfg.Advertise}})
		}
		if err == nil {
			now := n.now()
			n.readyAt.Store(&now)
			n.leaderReady.Store(n.raft.State() == raft.Leader)
			n.log.Info("controller: leading", "remoting", n.cfg.Advertise)
			// NB: changes applied before this node was ready (the previous
			// leader's, committed by the barrier) were told to no one.
			for _, g := range n.fsm.groups() {
				n.queueNotify(g)
			}
			return
		}
		n.log.Warn("controller: new leader not ready yet; retrying", "err", err)
		select {
		case <-n.quit:
			return
		case <-time.After(retryEvery):
		}
	}
}

// raftLogger is the hclog.Logger Raft logs through: each record goes to
// log as a record of its own, at its level, with Raft's fields as
// attributes ("component" is "raft"). Raft's own text output is discarded.
// NB: hclog's lines went to slog as one message each, its timestamp,
// level and fields inside another record's msg.
func raftLogger(log *slog.Logger) hclog.Logger {
	hl := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: "raft", Level: hclog.Debug, Output: io.Discard})
	hl.RegisterSink(slogSink{log})
	return hl
}

// slogSink hands hclog's records to slog.
type slogSink struct{ log *slog.Logger }

func (s slogSink) Accept(name string, level hclog.Level, msg string, args ...any) {
	var l slog.Level
	switch level {
	case hclog.Trace, hclog.Debug:
		l = slog.LevelDebug
	case hclog.Warn:
		l = slog.LevelWarn
	case hclog.Error:
		l = slog.LevelError
	default:
		l = slog.LevelInfo
	}
	ctx := context.Background()
	if !s.log.Enabled(ctx, l) {
		return
	}
	attrs := make([]slog.Attr, 0, 1+len(args)/2)
	attrs = append(attrs, slog.String("component", name))
	for i := 0; i+1 < len(args); i += 2 {
		key, ok := args[i].(string)
		if !ok {
			key = fmt.Sprint(args[i])
		}
		v := args[i+1]
		if err, ok := v.(error); ok {
			v = err.Error()
		}
		attrs = append(attrs, slog.Any(key, v))
	}
	if len(args)%2 == 1 {
		attrs = append(attrs, slog.Any("extra", args[len(args)-1]))
	}
	s.log.LogAttrs(ctx, l, msg, attrs...)
}

// refusal turns a non-success result into an *Error.
func (r result) err() error {
	if r.Code == protocol.Success {
		return nil
	}
	return &Error{Code: r.Code, Remark: r.Remark}
}
