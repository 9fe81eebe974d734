package nameserver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/acl"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/tlscert"
)

// closeTimeout bounds how long Close waits for running handlers and
// disconnect hooks. Nameserver handlers only touch memory, so this is a
// safety net, not a wait anyone should see.
const closeTimeout = 10 * time.Second

// Server is a nameserver: the route table, the KV config store, the
// remoting server that answers brokers and clients, and the liveness loop
// that expires silent brokers.
//
// Lifecycle: New, Start, …, Close. All methods are safe for concurrent use.
type Server struct {
	cfg    conf.Nameserver
	log    *slog.Logger
	routes *routeTable
	kv     *kvStore
	rs     *remoting.Server
	acl    *acl.Watcher     // nil when ACL is off
	now    func() time.Time // time source of liveness stamps

	quit      chan struct{}  // closed by Close: stops livenessLoop
	wg        sync.WaitGroup // livenessLoop
	closeOnce sync.Once
	closeErr  error // set inside closeOnce

	mu    sync.Mutex
	state serverState // guarded by mu

	metricsSrv  *http.Server // nil when metrics_listen is empty
	metricsAddr string

	disconnectHooks []func(*remoting.Conn) // set before Start (extend.go)
}

type serverState int

const (
	stateNew serverState = iota
	stateRunning
	stateClosed
)

// New returns a nameserver configured by cfg, which must pass
// cfg.Validate. It binds nothing until Start. A nil logger means
// slog.Default().
func New(cfg conf.Nameserver, logger *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("nameserver: invalid configuration: %w", err)
	}
	if logger == nil {
		logger = slog.Default()
	}
	s := &Server{
		cfg:    cfg,
		log:    logger,
		routes: newRouteTable(),
		kv:     newKVStore(),
		now:    time.Now,
		quit:   make(chan struct{}),
	}
	sopts := remoting.ServerOptions{
		MaxFrameSize:    int(cfg.Remoting.MaxFrameSize),
		FrameTimeout:    cfg.Remoting.FrameTimeout,
		IdleTimeout:     remotingTimeout(cfg.Remoting.IdleTimeout),
		MaxConnsPerAddr: cfg.Remoting.MaxConnsPerAddr,
		Logger:          logger,
		OnDisconnect:    s.onDisconnect,
	}
	tlsDir := cfg.TLSDir
	if tlsDir == "" && cfg.Controller.Enable {
		tlsDir = cfg.Controller.Dir
	}
	ts, err := tlscert.Server(cfg.TLS, tlsDir, logger)
	if err != nil {
		return nil, fmt.Errorf("nameserver: %w", err)
	}
	sopts.TLS = ts
	if cfg.ACL.File != "" {
		w, err := acl.NewWatcher(cfg.ACL.File, acl.LoadFile, logger)
		if err != nil {
			return nil, fmt.Errorf("nameserver: %w", err)
		}
		s.acl = w
		sopts.Authorize = w.Guard().Authorize
	}
	s.rs = remoting.NewServer(cfg.Listen, sopts)
	s.registerHandlers()
	return s, nil
}

// remotingTimeout maps conf's "0 = no limit" onto remoting's "negative =
// disabled, 0 = default".
func remotingTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// Start binds cfg.Listen and starts serving and the liveness loop. It
// fails if the address cannot be bound, or if the server was already
// started or closed.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case stateRunning:
		return ErrStarted
	case stateClosed:
		return ErrClosed
	}
	if err := s.rs.Start(); err != nil {
		return fmt.Errorf("nameserver: %w", err)
	}
	if s.cfg.MetricsListen != "" {
		if err := s.serveMetrics(); err != nil {
			_ = s.rs.Shutdown(context.Background())
			return fmt.Errorf("nameserver: metrics listen %s: %w", s.cfg.MetricsListen, err)
		}
	}
	s.state = stateRunning
	s.wg.Add(1)
	go s.livenessLoop()
	s.log.Info("nameserver: serving", "addr", s.rs.Addr().String(),
		"broker_expiry", s.cfg.BrokerExpiry, "scan_interval", s.cfg.ScanInterval)
	if s.cfg.OrderMessageEnable {
		s.log.Warn("nameserver: order_message_enable is on, and ORDER_TOPIC_CONFIG lives in memory only: after a " +
			"restart, give this nameserver its ordered topics' configs again (mqadmin updateTopic -o true, or " +
			"updateKvConfig), or clients asking it route by the brokers' queues")
	}
	return nil
}

// Addr returns the address the server listens on ("ip:port", the real
// port when cfg.Listen asked for port 0), or "" before Start.
func (s *Server) Addr() string {
	if a := s.rs.Addr(); a != nil {
		return a.String()
	}
	return ""
}

// Close stops the liveness loop and shuts the remoting server down: new
// requests are refused, running handlers finish, every connection closes.
// It returns the first shutdown error; later calls return the same.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.state = stateClosed
		s.mu.Unlock()
		close(s.quit)
		s.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		if err := s.rs.Shutdown(ctx); err != nil {
			s.closeErr = fmt.Errorf("nameserver: shutdown: %w", err)
		}
		if s.metricsSrv != nil {
			s.metricsSrv.Close()
		}
		if s.acl != nil {
			_ = s.acl.Close()
		}
	})
	return s.closeErr
}

// livenessLoop drops brokers that have not registered for BrokerExpiry,
// looking every ScanInterval (RocketMQ's scanNotActiveBroker).
func (s *Server) livenessLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.ScanInterval)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			for _, rb := range s.routes.expire(s.now(), s.cfg.BrokerExpiry) {
				s.log.Warn("nameserver: broker expired; removed from routes",
					"broker", rb.brokerName, "addr", rb.addr,
					"silent_for", rb.idle.Round(time.Millisecond), "broker_expiry", s.cfg.BrokerExpiry)
			}
		}
	}
}

// onDisconnect drops the brokers registered over a connection that closed
// (RocketMQ's BrokerHousekeepingService): a broker that went away leaves
// the routes at once instead of after BrokerExpiry.
func (s *Server) onDisconnect(c *remoting.Conn) {
	for _, hook := range s.disconnectHooks {
		hook(c)
	}
	for _, rb := range s.routes.dropConn(c.ID()) {
		s.log.Info("nameserver: broker connection closed; removed from routes",
			"broker", rb.brokerName, "addr", rb.addr, "remote", c.RemoteAddr())
	}
}
