package v5

import (
	"context"
	"sync"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicemq/sluice/internal/acl"
)

// Settings the server gives its clients (the Java proxy's defaults).
const (
	producerMaxAttempts   = 3
	receiveBatchSize      = 32
	longPollingTimeout    = 20 * time.Second
	clientExpiry          = 2 * time.Minute
	maxClients            = 100_000
	consumerBackoffInit   = time.Second
	consumerBackoffMax    = 60 * time.Second
	producerBackoffInit   = 10 * time.Millisecond
	producerBackoffMax    = time.Second
	backoffMultiplier     = 2
	defaultConsumerRetrys = 16
)

// client is what the server remembers of a v5 client.
type client struct {
	kind     v2.ClientType
	group    string
	lastSeen time.Time
	info     clientInfo // address, SDK, topics or subscriptions (clients.go)
}

// clientTable holds the clients seen (Telemetry settings, heartbeats),
// until they terminate or go quiet for clientExpiry.
type clientTable struct {
	mu        sync.Mutex
	m         map[string]*client // guarded by mu
	lastSweep time.Time          // guarded by mu

	// The open Telemetry streams, guarded by mu, made on first use:
	// by client id, and by producer group (a v5 producer's group is a
	// topic it publishes: its settings' topics and those of its
	// transactional sends), for the transaction checker.
	streams   map[string]map[*telemetryStream]struct{}
	producers map[string]map[*telemetryStream]struct{}
}

// Bounds of the stream registry.
const (
	streamQueue     = 16   // commands waiting for a stream's sender
	maxStreamGroups = 1024 // producer groups one stream is listed under
)

// telemetryStream is one open Telemetry stream. Commands for its client
// go through out: the stream's own goroutine sends them (a gRPC stream
// takes one sender at a time).
type telemetryStream struct {
	client string
	out    chan *v2.TelemetryCommand
	groups map[string]struct{} // guarded by clientTable.mu
}

// openStream lists st under its client.
func (t *clientTable) openStream(st *telemetryStream) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.streams == nil {
		t.streams = map[string]map[*telemetryStream]struct{}{}
		t.producers = map[string]map[*telemetryStream]struct{}{}
	}
	set := t.streams[st.client]
	if set == nil {
		set = map[*telemetryStream]struct{}{}
		t.streams[st.client] = set
	}
	set[st] = struct{}{}
}

// closeStream forgets st.
func (t *clientTable) closeStream(st *telemetryStream) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if set := t.streams[st.client]; set != nil {
		delete(set, st)
		if len(set) == 0 {
			delete(t.streams, st.client)
		}
	}
	for g := range st.groups {
		if set := t.producers[g]; set != nil {
			delete(set, st)
			if len(set) == 0 {
				delete(t.producers, g)
			}
		}
	}
	st.groups = nil
}

// streaming reports whether client has a Telemetry stream open.
func (t *clientTable) streaming(client string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.streams[client]) > 0
}

// live reports whether a client was heard from (a heartbeat, its
// settings) within clientLiveness.
func (t *clientTable) live(id string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.m[id]
	return c != nil && now.Sub(c.lastSeen) <= clientLiveness
}

// addGroupLocked lists st as a producer of group. REQUIRES: t.mu held.
func (t *clientTable) addGroupLocked(st *telemetryStream, group string) {
	if _, ok := st.groups[group]; ok || len(st.groups) >= maxStreamGroups {
		return
	}
	if st.groups == nil {
		st.groups = map[string]struct{}{}
	}
	st.groups[group] = struct{}{}
	set := t.producers[group]
	if set == nil {
		set = map[*telemetryStream]struct{}{}
		t.producers[group] = set
	}
	set[st] = struct{}{}
}

// publishes lists st as a producer of the topics its settings name.
func (t *clientTable) publishes(st *telemetryStream, pub *v2.Publishing) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, open := t.streams[st.client][st]; !open {
		return
	}
	for _, r := range pub.GetTopics() {
		if n := r.GetName(); n != "" {
			t.addGroupLocked(st, n)
		}
	}
}

// producesFor lists every open stream of client as a producer of group
// (a transactional send or an EndTransaction names it).
func (t *clientTable) producesFor(client, group string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for st := range t.streams[client] {
		t.addGroupLocked(st, group)
	}
}

// tellProducer queues cmd for one open stream of a producer of group
// (any one: map order spreads the checks) and reports whether one took
// it; a stream whose queue is full is passed over.
func (t *clientTable) tellProducer(group string, cmd *v2.TelemetryCommand) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for st := range t.producers[group] {
		select {
		case st.out <- cmd:
			return true
		default:
		}
	}
	return false
}

// tellLiveProducer is tellProducer preferring the streams of clients
// heard from within clientLiveness: a stream whose client vanished stays
// open until its connection is found dead, and a check it takes is
// counted against the half message's checks but never answered.
func (t *clientTable) tellLiveProducer(group string, cmd *v2.TelemetryCommand, now time.Time) bool {
	t.mu.Lock()
	for st := range t.producers[group] {
		if c := t.m[st.client]; c == nil || now.Sub(c.lastSeen) > clientLiveness {
			continue
		}
		select {
		case st.out <- cmd:
			t.mu.Unlock()
			return true
		default:
		}
	}
	t.mu.Unlock()
	return t.tellProducer(group, cmd) // NB: none live: any open stream
}

// seen records a client; kind and group are kept when unspecified.
func (t *clientTable) seen(id string, kind v2.ClientType, group string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now.Sub(t.lastSweep) > clientExpiry/4 || len(t.m) >= maxClients {
		t.lastSweep = now
		for k, c := range t.m {
			if now.Sub(c.lastSeen) > clientExpiry {
				delete(t.m, k)
			}
		}
	}
	c := t.m[id]
	if c == nil {
		if len(t.m) >= maxClients {
			return
		}
		c = &client{}
		t.m[id] = c
	}
	c.lastSeen = now
	if kind != v2.ClientType_CLIENT_TYPE_UNSPECIFIED {
		c.kind = kind
	}
	if group != "" {
		c.group = group
	}
}

func (t *clientTable) drop(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, id)
}

// Len is the number of clients known.
func (s *Server) Clients() int {
	s.clients.mu.Lock()
	defer s.clients.mu.Unlock()
	return len(s.clients.m)
}

// Heartbeat keeps a client known.
func (s *Server) Heartbeat(ctx context.Context, req *v2.HeartbeatRequest) (*v2.HeartbeatResponse, error) {
	var res []acl.Resource
	if g := req.GetGroup().GetName(); g != "" {
		res = append(res, acl.Resource{Name: acl.RetryPrefix + g, Need: acl.Sub})
	}
	c, st := s.check(ctx, "Heartbeat", res...)
	if st != nil {
		return &v2.HeartbeatResponse{Status: st}, nil
	}
	s.clients.seen(c.clientID, req.GetClientType(), req.GetGroup().GetName(), s.opts.Now())
	s.clients.describe(ctx, c.clientID, nil)
	if g := req.GetGroup().GetName(); g != "" && (Client{Type: req.GetClientType()}).IsConsumer() {
		s.backend.ConsumerSeen(g)
	}
	return &v2.HeartbeatResponse{Status: okStatus()}, nil
}

// NotifyClientTermination forgets a client.
func (s *Server) NotifyClientTermination(ctx context.Context, req *v2.NotifyClientTerminationRequest) (*v2.NotifyClientTerminationResponse, error) {
	c, st := s.check(ctx, "NotifyClientTermination")
	if st != nil {
		return &v2.NotifyClientTerminationResponse{Status: st}, nil
	}
	s.clients.drop(c.clientID)
	s.releaseClient(c.clientID)
	return &v2.NotifyClientTerminationResponse{Status: okStatus()}, nil
}

// Telemetry answers each Settings the client sends with the settings it
// is to use, and sends the client the server's commands (transaction
// checks: RecoverOrphaned). Other client commands are ignored. The stream
// ends when the client closes it or the server closes.
func (s *Server) Telemetry(stream v2.MessagingService_TelemetryServer) error {
	ctx := stream.Context()
	c, st := s.check(ctx, "Telemetry")
	if st != nil {
		return stream.Send(&v2.TelemetryCommand{Status: st})
	}
	ts := &telemetryStream{client: c.clientID, out: make(chan *v2.TelemetryCommand, streamQueue)}
	s.clients.openStream(ts)
	defer s.streamEnded(ts) // NB: its client's last stream releases what auto_renew holds for it
	cmds := make(chan *v2.TelemetryCommand)
	recvErr := make(chan error, 1)
	go func() {
		for {
			cmd, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case cmds <- cmd:
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case <-s.quit:
			return nil
		case <-ctx.Done():
			return nil
		case <-recvErr:
			return nil // NB: the client closed its side, or the connection went
		case out := <-ts.out:
			if err := stream.Send(out); err != nil {
				return nil
			}
		case cmd := <-cmds:
			set := cmd.GetSettings()
			if set == nil {
				continue
			}
			reply, st := s.settingsFor(set)
			s.clients.seen(c.clientID, set.GetClientType(), groupOf(set), s.opts.Now())
			if pub := set.GetPublishing(); pub != nil {
				s.clients.publishes(ts, s.publishable(ctx, pub))
			}
			s.clients.describe(ctx, c.clientID, set)
			out := &v2.TelemetryCommand{Status: st}
			if reply != nil {
				out.Command = &v2.TelemetryCommand_Settings{Settings: reply}
			}
			if err := stream.Send(out); err != nil {
				return nil
			}
		}
	}
}

// publishable is what of pub's topics the stream's caller may publish
// to (ACL): a stream is a producer, and gets the transaction checks
// (whole messages), of those only. At most maxStreamGroups are looked at.
func (s *Server) publishable(ctx context.Context, pub *v2.Publishing) *v2.Publishing {
	if s.opts.ACL == nil {
		return pub
	}
	out := &v2.Publishing{}
	for i, r := range pub.GetTopics() {
		if i >= maxStreamGroups {
			break
		}
		if _, st := s.check(ctx, "Telemetry", acl.Resource{Name: r.GetName(), Need: acl.Pub}); st == nil {
			out.Topics = append(out.Topics, r)
		}
	}
	return out
}

// groupOf is a consumer's group in its settings.
func groupOf(set *v2.Settings) string {
	return set.GetSubscription().GetGroup().GetName()
}

// settingsFor is the server's answer to a client's settings: what it sent,
// with what the SDKs require (RocketMQ's GrpcClientSettingsManager).
func (s *Server) settingsFor(set *v2.Settings) (*v2.Settings, *v2.Status) {
	out := proto.Clone(set).(*v2.Settings)
	kind := set.GetClientType()
	switch {
	case set.GetPublishing() != nil || kind == v2.ClientType_PRODUCER:
		pub := out.GetPublishing()
		if pub == nil {
			pub = &v2.Publishing{}
			out.PubSub = &v2.Settings_Publishing{Publishing: pub}
		}
		pub.MaxBodySize = s.backend.MaxBodySize()
		pub.ValidateMessageType = true
		out.BackoffPolicy = exponential(producerMaxAttempts, producerBackoffInit, producerBackoffMax)
	case set.GetSubscription() != nil || kind == v2.ClientType_SIMPLE_CONSUMER || kind == v2.ClientType_PUSH_CONSUMER:
		sub := out.GetSubscription()
		if sub == nil {
			sub = &v2.Subscription{}
			out.PubSub = &v2.Settings_Subscription{Subscription: sub}
		}
		g := s.backend.Group(groupOf(set))
		fifo, batch := g.Orderly, int32(receiveBatchSize)
		sub.Fifo, sub.ReceiveBatchSize = &fifo, &batch
		sub.LongPollingTimeout = durationpb.New(longPollingTimeout)
		attempts := g.MaxAttempts
		if attempts <= 0 {
			attempts = defaultConsumerRetrys + 1
		}
		out.BackoffPolicy = exponential(attempts, consumerBackoffInit, consumerBackoffMax)
	default:
		return nil, status(v2.Code_UNRECOGNIZED_CLIENT_TYPE,
			"the settings name no publishing or subscription and client type "+kind.String()+" is not served")
	}
	out.Metric = &v2.Metric{On: false}
	return out, okStatus()
}

// exponential is an exponential backoff policy.
func exponential(attempts int32, initial, maxWait time.Duration) *v2.RetryPolicy {
	return &v2.RetryPolicy{MaxAttempts: attempts, Strategy: &v2.RetryPolicy_ExponentialBackoff{
		ExponentialBackoff: &v2.ExponentialBackoff{Initial: durationpb.New(initial), Max: durationpb.New(maxWait),
			Multiplier: backoffMultiplier}}}
}
