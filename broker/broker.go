package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/broker/group"
	"github.com/sluicemq/sluice/broker/longpoll"
	"github.com/sluicemq/sluice/broker/offset"
	"github.com/sluicemq/sluice/broker/pop"
	"github.com/sluicemq/sluice/broker/store"
	"github.com/sluicemq/sluice/broker/topic"
	v5 "github.com/sluicemq/sluice/broker/v5"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/acl"
	"github.com/sluicemq/sluice/internal/acl/sig"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/tlscert"
)

// Options are the broker's settings beyond conf.Broker.
type Options struct {
	Logger *slog.Logger
	// Store carries test seams for the store (file faults, disk usage).
	Store store.Options
	// HousekeepingInterval is how often dead consumers are expired
	// (default 10 s); ClientExpiry how long a client may go without a
	// heartbeat (default 120 s).
	HousekeepingInterval time.Duration
	ClientExpiry         time.Duration
	// TransactionCheckInterval is how often undecided half messages are
	// checked; TransactionTimeout how old one must be before its producer
	// is asked (default: the config's transaction_check_interval and
	// transaction_timeout, or 60 s and 6 s).
	TransactionCheckInterval time.Duration
	TransactionTimeout       time.Duration
	// MetaSyncInterval is how often a slave copies its master's topics,
	// groups and offsets (default 10 s, as Java's SlaveSynchronize).
	MetaSyncInterval time.Duration
	// ColdReadBytes is how far behind the log's end a pull must read for a
	// master with slave_read_enable to suggest a slave (default 40% of the
	// machine's memory).
	ColdReadBytes int64
	// LoseSendAnswer, when set, is asked before a stored send is answered;
	// true drops the answer as a lost network reply would (the message
	// stays stored): tests of resends. It must not block.
	LoseSendAnswer func(req *remoting.Command) bool
	// Clock, in controller mode, is what the master's lease is measured on
	// (default: time.Now, its monotonic reading). Tests step it.
	Clock Clock
	// PopClock is what POP invisible times are measured on (default
	// time.Now). Tests step it.
	PopClock func() time.Time
}

// Broker serves RocketMQ's broker protocol over a Store.
type Broker struct {
	cfg    conf.Broker
	opts   Options
	logger *slog.Logger

	store   *store.Store
	topics  *topic.Table
	offsets *offset.Table
	groups  *group.Registry
	// groupCfgs holds subscription group settings (retry max times, ...).
	groupCfgs   *group.ConfigTable
	hold        *longpoll.Hold
	server      *remoting.Server
	nsc         *remoting.Client    // to the nameservers
	peerc       *remoting.Client    // to the group's other brokers (hapeer.go); nsc when the broker has no TLS
	acl         *acl.Watcher        // nil when ACL is off
	serverTLS   *remoting.ServerTLS // nil when TLS is off; the HA port's too
	sched       *scheduler
	tx          *transactions
	notify      *notifier
	repl        replication
	ctl         *ctlMode      // controller mode; nil otherwise
	v5          *v5.Server    // RocketMQ 5 clients (gRPC); nil when off
	grpcAddr    string        // its advertised address
	pop         *pop.Table    // POP consumption (v5 SimpleConsumers)
	popArrivals arrivals      // wakes their long polls
	popCounts   popCounts     // their counts (popmetrics.go)
	popApplyMu  sync.Mutex    // one popApplyLog at a time
	popKick     chan struct{} // a slave's POP state record arrived (popjournal.go)
	popReady    atomic.Bool   // the POP state has the log's records (popInit); POP calls wait until then
	restartCh   chan string   // see Restart
	sendSem     chan struct{} // bounds sends waiting for the store
	bursts      sync.Map      // *remoting.Conn → *sendBurst: inline sends of the reader's burst
	v5Puts      v5Puts        // v5 sends gathered for one store submission (grpc.go)
	regMu       sync.Mutex    // serialises nameserver (un)registrations
	// started is set once Start has set nsc and addr, which registering
	// needs; requests can arrive before that.
	started atomic.Bool

	addr      string         // advertised ip:port
	storeHost netip.AddrPort // in every stored record
	// clusterProp is the CLUSTER property every batch member gets.
	clusterProp string

	connMu sync.RWMutex
	conns  map[uint64]*remoting.Conn // guarded by connMu

	stats   stats
	metrics *metrics

	quit      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// New opens the broker's store and tables; Start begins serving.
func New(cfg conf.Broker, opts Options) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.HousekeepingInterval <= 0 {
		opts.HousekeepingInterval = 10 * time.Second
	}
	if opts.ClientExpiry <= 0 {
		opts.ClientExpiry = 120 * time.Second
	}
	if opts.TransactionCheckInterval <= 0 {
		opts.TransactionCheckInterval = cmp.Or(cfg.TransactionCheckInterval, 60*time.Second)
	}
	if opts.TransactionTimeout <= 0 {
		opts.TransactionTimeout = cmp.Or(cfg.TransactionTimeout, 6*time.Second)
	}
	if opts.MetaSyncInterval <= 0 {
		opts.MetaSyncInterval = 10 * time.Second
	}
	if opts.ColdReadBytes <= 0 {
		opts.ColdReadBytes = coldReadDefault()
	}
	b := &Broker{cfg: cfg, opts: opts, logger: opts.Logger, groups: group.New(), notify: newNotifier(),
		conns: map[uint64]*remoting.Conn{}, quit: make(chan struct{}), restartCh: make(chan string, 1),
		sendSem:     make(chan struct{}, max(cfg.Store.SendQueueSize, 1)),
		clusterProp: string(message.AppendProperties(nil, map[string]string{message.PropCluster: cfg.ClusterName}))}
	b.metrics = newMetrics()
	so := opts.Store
	so.Logger = opts.Logger
	so.Dedup = store.DedupOptions{Window: cfg.Dedup.Window, MaxKeys: cfg.Dedup.MaxKeys}
	if so.OnSync == nil {
		so.OnSync = func(d time.Duration, _ int64) { b.metrics.flush.Observe(d.Seconds()) }
	}
	cutAt, cutting, err := pendingCut(cfg.Store.Dir)
	if err != nil {
		return nil, fmt.Errorf("broker: cut request: %w", err)
	}
	so.Cut, so.CutAt = cutting, cutAt
	if b.store, err = store.Open(cfg.Store, so); err != nil {
		return nil, err
	}
	cfgDir := filepath.Join(cfg.Store.Dir, "config")
	if b.topics, err = openTopics(cfgDir); err != nil {
		b.store.Close()
		return nil, err
	}
	if b.offsets, err = offset.Open(filepath.Join(cfgDir, "offsets"), opts.Logger); err != nil {
		b.store.Close()
		return nil, err
	}
	b.store.SetUnconsumedCounter(b.unconsumed)
	if err := b.store.SetReplica(cfg.IsSlave()); err != nil {
		b.closeStores()
		return nil, err
	}
	if cfg.ControllerMode() || cfg.Role == conf.RoleSyncMaster {
		// NB: a replicated master acknowledges through its gate only: its
		// store takes no send while it has none (before Start sets it,
		// once Close or a handover removed it).
		b.store.RequireReplicaGate()
	}
	if cfg.ControllerMode() {
		if err := b.openController(cutAt, cutting); err != nil {
			b.closeStores()
			return nil, err
		}
	}
	if b.groupCfgs, err = group.OpenConfigTable(filepath.Join(cfgDir, "groups")); err != nil {
		b.closeStores()
		return nil, err
	}
	b.hold = longpoll.New()
	b.store.Subscribe(b.hold.Notify)
	if b.pop, err = pop.Open(filepath.Join(cfgDir, "pop"), opts.Logger); err != nil {
		b.closeStores()
		return nil, err
	}
	b.store.Subscribe(b.popArrivals.notify)
	b.popKick = make(chan struct{}, 1)
	b.openPopLog()
	if err := b.createSystemTopics(); err != nil {
		b.closeStores()
		return nil, err
	}
	return b, nil
}

// Start binds the listener, registers with the nameservers and starts the
// background loops.
func (b *Broker) Start() error {
	sopts := remoting.ServerOptions{
		MaxFrameSize:    int(b.cfg.Remoting.MaxFrameSize),
		FrameTimeout:    b.cfg.Remoting.FrameTimeout,
		IdleTimeout:     b.cfg.Remoting.IdleTimeout,
		MaxConnsPerAddr: b.cfg.Remoting.MaxConnsPerAddr,
		Logger:          b.logger,
		OnConnect:       b.onConnect,
		OnDisconnect:    b.onDisconnect,
	}
	ts, err := tlscert.Server(b.cfg.TLS, b.cfg.Store.Dir, b.logger)
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	sopts.TLS = ts
	b.serverTLS = ts
	if b.cfg.ACL.File != "" {
		w, err := acl.NewWatcher(b.cfg.ACL.File, acl.LoadFile, b.logger)
		if err != nil {
			return fmt.Errorf("broker: %w", err)
		}
		b.acl = w
		sopts.Authorize = w.Guard().Authorize
	}
	b.server = remoting.NewServer(b.cfg.Listen, sopts)
	b.routes()
	// NB: with a fixed port the store host is set before the server
	// accepts: clients that know the address (a restart) send at once, and
	// the send handlers read it. A port picked at Start is known to no
	// client before Start returns.
	if a, err := net.ResolveTCPAddr("tcp", b.cfg.Listen); err == nil && a.Port != 0 {
		addr := b.cfg.Advertise
		if addr == "" {
			addr = advertised(a, slog.New(slog.DiscardHandler), "advertise") // NB: Start logs it below
		}
		if ap, err := netip.ParseAddrPort(addr); err == nil {
			b.storeHost = ap
		}
	}
	if err := b.server.Start(); err != nil {
		return fmt.Errorf("broker: listen %s: %w", b.cfg.Listen, err)
	}
	b.addr = b.cfg.Advertise
	if b.addr == "" {
		b.addr = advertised(b.server.Addr(), b.logger, "advertise")
	}
	ap, err := netip.ParseAddrPort(b.addr)
	if err != nil {
		return fmt.Errorf("broker: advertised address %s: %w", b.addr, err)
	}
	if b.storeHost != ap {
		b.storeHost = ap
	}
	if b.cfg.MetricsListen != "" {
		b.metrics.reg.MustRegister(brokerCollector{b})
		if b.acl != nil {
			b.metrics.reg.MustRegister(acl.Collector{W: b.acl})
		}
		if err := b.metrics.serve(b.cfg.MetricsListen, b.cfg.Pprof, b.acl); err != nil {
			b.server.Shutdown(context.Background())
			return fmt.Errorf("broker: metrics listen %s: %w", b.cfg.MetricsListen, err)
		}
	}
	nsOpts := remoting.ClientOptions{SerializeType: remoting.SerializeJSON, Logger: b.logger}
	if b.cfg.ACL.AccessKey != "" {
		nsOpts.Sign = sig.Signer(b.cfg.ACL.AccessKey, b.cfg.ACL.SecretKey, "")
	}
	if nt := b.cfg.NamesrvTLS; nt.Enabled {
		if nsOpts.TLS, err = tlscert.Client(nt.CAFile, nt.Insecure, "", ""); err != nil {
			b.server.Shutdown(context.Background())
			return fmt.Errorf("broker: namesrv_tls: %w", err)
		}
	}
	b.nsc = remoting.NewClient(nsOpts)
	if err := b.openPeerClient(nsOpts); err != nil {
		b.server.Shutdown(context.Background())
		return err
	}
	b.sched = newScheduler(b)
	b.tx = newTransactions(b)
	start := b.startReplication
	if b.ctl != nil {
		start = b.startController
	}
	err = b.startGRPC()
	if err == nil {
		if err = start(); err != nil {
			b.stopGRPC()
		}
	}
	if err != nil {
		b.server.Shutdown(context.Background())
		b.metrics.close()
		b.sched.offsets.Close() // NB: its loop, which closes it, never started
		return err
	}
	b.started.Store(true)
	// Register before Start returns (and mqbroker announces it serves), as
	// Java does: a client started right after finds the broker's routes,
	// TBW102 included for auto-create. A broker every nameserver refuses
	// for a reason a restart does not fix (credentials, TLS) stops here:
	// it served, unfindable, saying only a warning.
	regErr := b.registerAll()
	b.wg.Add(5)
	go b.notifyLoop()
	go b.registerLoop()
	go b.housekeepingLoop()
	go b.sched.loop()
	go b.tx.checkLoop(b.opts.TransactionCheckInterval, b.opts.TransactionTimeout)
	b.wg.Add(1)
	go b.popApplyLoop()
	if regErr != nil {
		b.Close() // NB: after the loops started: Close stops them
		return fmt.Errorf("broker: %w", regErr)
	}
	id, role := any(b.cfg.BrokerID), b.cfg.Role
	if b.ctl != nil {
		// NB: not the config's id and role, which controller mode ignores.
		id, role = "elected by the controllers", "elected by the controllers"
	}
	b.logger.Info("broker: serving", "addr", b.addr, "name", b.cfg.BrokerName, "id", id, "role", role,
		"ha", b.repl.haAddr, "cluster", b.cfg.ClusterName,
		"store", b.cfg.Store.Dir, "flush", b.cfg.Store.Flush, "namesrv", b.cfg.NamesrvAddr)
	return nil
}

// Addr returns the address clients reach the broker at.
func (b *Broker) Addr() string { return b.addr }

// Store returns the broker's store.
func (b *Broker) Store() *store.Store { return b.store }

// Close stops the broker in order: answer parked pulls; hand over (a
// replicated master's store refuses sends, its held sends are answered,
// then, in controller mode, the controllers are told); stop the server and
// the loops, unregister from the nameservers, close the store and tables.
// NB: a replicated master refuses sends from the handover on, while its
// server still answers them: a send it acknowledged is on its replicas.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		b.hold.Close()
		close(b.quit)
		if b.ctl != nil {
			b.stopController()
		} else {
			b.stopReplication()
		}
		b.wg.Wait()
		b.stopGRPC()
		var errs []error
		if b.server != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if b.started.Load() { // NB: a Start that failed registered nowhere, and may have no nsc
				b.unregisterAll(ctx)
			}
			errs = append(errs, b.server.Shutdown(ctx))
			cancel()
		}
		if b.nsc != nil {
			errs = append(errs, b.nsc.Close())
		}
		if b.peerc != nil && b.peerc != b.nsc {
			errs = append(errs, b.peerc.Close())
		}
		b.metrics.close()
		if b.acl != nil {
			errs = append(errs, b.acl.Close())
		}
		errs = append(errs, b.closeStores())
		b.closeErr = errors.Join(errs...)
	})
	return b.closeErr
}

func (b *Broker) closeStores() error {
	return errors.Join(b.pop.Close(), b.offsets.Close(), b.store.Close())
}

func (b *Broker) onConnect(c *remoting.Conn) {
	b.connMu.Lock()
	b.conns[c.ID()] = c
	b.connMu.Unlock()
}

func (b *Broker) onDisconnect(c *remoting.Conn) {
	b.bursts.Delete(c)
	b.connMu.Lock()
	delete(b.conns, c.ID())
	b.connMu.Unlock()
	for _, g := range b.groups.DropConn(c.ID()) {
		b.consumersChanged(g)
	}
}

func (b *Broker) conn(id uint64) *remoting.Conn {
	b.connMu.RLock()
	defer b.connMu.RUnlock()
	return b.conns[id]
}

// housekeepingLoop expires clients that stopped heartbeating and queue
// locks nobody refreshed.
func (b *Broker) housekeepingLoop() {
	defer b.wg.Done()
	t := time.NewTicker(b.opts.HousekeepingInterval)
	defer t.Stop()
	for {
		select {
		case <-b.quit:
			return
		case now := <-t.C:
			for _, g := range b.groups.Expire(now.Add(-b.opts.ClientExpiry)) {
				b.logger.Info("broker: consumer expired", "group", g)
				b.consumersChanged(g)
			}
			b.groups.ExpireLocks(now)
		}
	}
}

// tellGroup sends every live member of group a oneway request, as Java's
// broker does (language JAVA); failures are logged.
func (b *Broker) tellGroup(group string, code int16, h protocol.ExtHeader, body []byte) {
	for _, id := range b.groups.ConnIDs(group) {
		c := b.conn(id)
		if c == nil {
			continue
		}
		if err := tellClient(c, code, protocol.Ext(h), body); err != nil {
			b.logger.Debug("broker: request to a consumer", "request", protocol.CodeName(code), "group", group, "conn", c, "err", err)
		}
	}
}
