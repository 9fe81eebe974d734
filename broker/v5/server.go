package v5

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/sluicemq/sluice/internal/acl"
	"github.com/sluicemq/sluice/internal/message"
)

// ErrTopicNotFound is what Backend.Route returns for a topic no broker has.
var ErrTopicNotFound = errors.New("v5: topic not found")

// RouteBroker is one broker name's share of a topic's route: its master's
// gRPC address and the topic's queues there.
type RouteBroker struct {
	Name        string
	GrpcAddr    string // the master's "host:port"; "" when it serves no gRPC
	ReadQueues  int32
	WriteQueues int32
	Perm        int32 // RocketMQ's permission bits: 4 read, 2 write
}

// SendRequest is one message to store: Msg with QueueID -1 (the backend
// picks the queue: by ShardingKey when set, else any writable one).
type SendRequest struct {
	Msg         message.Message
	ShardingKey string // a FIFO message's group
}

// SendResult is one stored message's outcome.
type SendResult struct {
	Status      *v2.Status
	QueueOffset int64
	// TransactionID names a stored half message (TransactionID) for
	// EndTransaction; "" for other messages.
	TransactionID string
}

// GroupSettings are a consumer group's settings that its clients get.
type GroupSettings struct {
	Orderly     bool  // consumeMessageOrderly: FIFO consumption
	MaxAttempts int32 // the group's retryMaxTimes + 1
}

// Backend is what the service needs of its broker.
type Backend interface {
	// Route returns topic's route from the nameservers (or, with none,
	// from the broker's own table); ErrTopicNotFound when there is none.
	Route(ctx context.Context, topic string) ([]RouteBroker, error)
	// MessageType returns topic's message.type attribute (NORMAL, FIFO,
	// DELAY, TRANSACTION, MIXED); "" when unset (MIXED).
	MessageType(topic string) string
	// Send stores reqs through the broker's send path (the duplicate
	// window included) and returns one result each, in order.
	Send(ctx context.Context, reqs []SendRequest) []SendResult
	// Group returns a consumer group's settings (defaults when unknown).
	Group(group string) GroupSettings
	// ConsumerSeen is told of each consumer heartbeat of group: the
	// broker keeps a config for every group its clients use, as a 4.x
	// heartbeat makes it (the console and mqadmin list groups by it).
	ConsumerSeen(group string)
	// MaxBodySize is the largest body the store takes.
	MaxBodySize() int32
}

// Options configure a Server.
type Options struct {
	Logger *slog.Logger
	// TLS is the port's certificate; nil serves plaintext only.
	TLS *tls.Config
	// Enforcing refuses plaintext connections (tls.mode enforcing).
	Enforcing bool
	// ACL returns the current rules; nil when ACL is off.
	ACL func() *acl.Rules
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Keepalive is how long a connection may stay silent before the
	// server pings it (default 30 s); a ping unanswered for as long again
	// (at most 10 s) closes it, ending its streams.
	Keepalive time.Duration
}

// defaultKeepalive: a client that vanished without closing its connection
// (a kill, a cut cable) is found dead within 40 s, so its Telemetry stream
// ends (its auto-renewed messages are released, transaction checks stop
// going to it) instead of lasting until the kernel gives up on the socket.
const defaultKeepalive = 30 * time.Second

// Server is the MessagingService of one broker.
type Server struct {
	v2.UnimplementedMessagingServiceServer

	backend Backend
	opts    Options
	log     *slog.Logger
	grpc    *grpc.Server

	mu      sync.Mutex
	ln      net.Listener
	addr    string
	served  chan struct{}
	quit    chan struct{} // closed by Close: Telemetry streams end
	closing sync.Once
	clients clientTable
	renew   renewals // auto_renew and attempt ids (renew.go)
}

// streamWorkers is how many goroutines serve calls (grpc.NumStreamWorkers).
const streamWorkers = 256

// New returns a Server over backend; Serve starts it.
func New(backend Backend, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Keepalive <= 0 {
		opts.Keepalive = defaultKeepalive
	}
	s := &Server{backend: backend, opts: opts, log: opts.Logger, served: make(chan struct{}), quit: make(chan struct{})}
	s.clients.m = make(map[string]*client)
	creds := &sniffCreds{enforcing: opts.Enforcing}
	if opts.TLS != nil {
		creds.tls = opts.TLS.Clone()
		creds.tls.NextProtos = []string{"h2"} // NB: gRPC clients require the ALPN protocol
	}
	s.grpc = grpc.NewServer(grpc.Creds(creds),
		grpc.ConnectionTimeout(10*time.Second),
		grpc.MaxRecvMsgSize(int(backend.MaxBodySize())+1<<20),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: opts.Keepalive, Timeout: min(opts.Keepalive, 10*time.Second)}),
		// NB: calls run on reused goroutines, whose stacks have grown
		// already: a new goroutine per call grew its stack in protobuf's
		// unmarshalling (copystack, 13-17% of the broker's CPU with 256
		// calls in flight). Past 256 running calls a call gets a
		// goroutine of its own, as without workers.
		grpc.NumStreamWorkers(streamWorkers),
	)
	v2.RegisterMessagingServiceServer(s.grpc, s)
	return s
}

// Listen binds addr and serves on it until Close.
func (s *Server) Listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("v5: listen %s: %w", addr, err)
	}
	s.mu.Lock()
	s.ln, s.addr = ln, ln.Addr().String()
	s.mu.Unlock()
	go func() {
		defer close(s.served)
		if err := s.grpc.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.log.Warn("v5: gRPC server stopped", "addr", s.addr, "err", err)
		}
	}()
	return nil
}

// Addr is the bound address ("" before Listen).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Close stops the server: open streams (Telemetry) end, unary calls in
// flight get up to 2 s to finish.
func (s *Server) Close() {
	s.closing.Do(s.close)
}

func (s *Server) close() {
	close(s.quit)
	defer s.stopRenewing() // NB: the renewal loop ends with quit
	done := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		s.grpc.Stop()
		<-done
	}
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()
	if ln != nil {
		<-s.served
	}
}
