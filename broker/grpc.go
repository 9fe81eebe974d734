package broker

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/sluicemq/sluice/broker/store"
	"github.com/sluicemq/sluice/broker/topic"
	v5 "github.com/sluicemq/sluice/broker/v5"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// startGRPC serves RocketMQ 5 clients on grpc.listen (see broker/v5).
// The default address (no grpc.listen) is given up with a warning when it
// is taken, as the HA port is: a second broker on a host serves 4.x
// clients all the same. REQUIRES: b.addr set (Start).
func (b *Broker) startGRPC() error {
	addr := b.cfg.GRPCAddr()
	if addr == "" {
		return nil
	}
	opts := v5.Options{Logger: b.logger}
	if ts := b.serverTLS; ts != nil {
		opts.TLS = ts.Config.Clone()
		opts.TLS.ClientAuth = tls.NoClientCert // NB: the v5 SDKs present no certificate
		if ts.Config.ClientAuth == tls.RequireAndVerifyClientCert {
			opts.TLS.ClientAuth = tls.RequireAndVerifyClientCert
		}
		opts.Enforcing = ts.Mode == remoting.TLSEnforcing
	}
	if w := b.acl; w != nil {
		opts.ACL = w.Rules
	}
	s := v5.New(grpcBackend{b}, opts)
	if err := s.Listen(addr); err != nil {
		s.Close() // NB: its gRPC server's stream workers run from New on
		if b.cfg.GRPC.Listen == "" {
			b.logger.Warn("broker: no gRPC port: RocketMQ 5 clients cannot connect (set grpc.listen)", "err", err)
			return nil
		}
		return fmt.Errorf("broker: grpc listen %s: %w", addr, err)
	}
	b.v5 = s
	_, port, _ := net.SplitHostPort(s.Addr())
	host, _, _ := net.SplitHostPort(b.addr)
	b.grpcAddr = net.JoinHostPort(host, port)
	b.logger.Info("broker: serving RocketMQ 5 clients (gRPC)", "grpc", b.grpcAddr, "listen", s.Addr())
	return nil
}

// GRPCAddr is the advertised address of the broker's gRPC service; ""
// when it serves none.
func (b *Broker) GRPCAddr() string { return b.grpcAddr }

// stopGRPC stops the gRPC service, if any.
func (b *Broker) stopGRPC() {
	if b.v5 != nil {
		b.v5.Close()
	}
}

// grpcBackend is the broker as the v5 service sees it.
type grpcBackend struct{ b *Broker }

// MaxBodySize implements v5.Backend.
func (g grpcBackend) MaxBodySize() int32 { return g.b.cfg.Store.MaxMessageSize }

// MessageType implements v5.Backend: the topic's message.type attribute
// (mqadmin updateTopic -a +message.type=FIFO).
func (g grpcBackend) MessageType(name string) string {
	c, _ := g.b.topics.Get(name)
	return c.Attributes[protocol.AttrMessageType]
}

// Group implements v5.Backend.
func (g grpcBackend) Group(name string) v5.GroupSettings {
	c, ok := g.b.groupCfgs.Get(name)
	if !ok {
		c = protocol.DefaultSubscriptionGroupConfig(name)
	}
	return v5.GroupSettings{Orderly: c.ConsumeMessageOrderly, MaxAttempts: c.RetryMaxTimes + 1}
}

// ConsumerSeen implements v5.Backend: the group gets a config, as a 4.x
// consumer's heartbeat gives it (Java's autoCreateSubscriptionGroup).
func (g grpcBackend) ConsumerSeen(name string) {
	if _, err := g.b.groupCfgs.Ensure(name); err != nil {
		g.b.logger.Warn("broker: create subscription group", "group", name, "err", err)
	}
}

// Route implements v5.Backend: the nameservers' route (the first that
// answers), with each broker's gRPC address; with no nameserver, this
// broker's own topic.
func (g grpcBackend) Route(ctx context.Context, name string) ([]v5.RouteBroker, error) {
	b := g.b
	addrs := b.namesrvAddrs()
	if len(addrs) == 0 {
		c, ok := b.topics.Get(name)
		if !ok {
			return nil, v5.ErrTopicNotFound
		}
		return []v5.RouteBroker{{Name: b.cfg.BrokerName, GrpcAddr: b.grpcAddr, ReadQueues: c.ReadQueueNums,
			WriteQueues: c.WriteQueueNums, Perm: c.Perm}}, nil
	}
	h := protocol.GetRouteInfoRequestHeader{Topic: name, WithGrpc: true}
	var lastErr error
	for _, a := range addrs {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		resp, err := b.nsc.Invoke(cctx, a, remoting.NewRequest(protocol.GetRouteInfoByTopic, protocol.Ext(&h), nil))
		cancel()
		switch {
		case err != nil:
			lastErr = err
			continue
		case resp.Code == protocol.TopicNotExist:
			return nil, v5.ErrTopicNotFound
		case resp.Code != protocol.Success:
			lastErr = fmt.Errorf("nameserver %s: %s (code %d)", a, resp.Remark, resp.Code)
			continue
		}
		var rd protocol.TopicRouteData
		if err := remoting.DecodeBody(resp.SerializeType, resp.Body, &rd); err != nil {
			lastErr = fmt.Errorf("nameserver %s: route body: %w", a, err)
			continue
		}
		masters := map[string]string{}
		for _, bd := range rd.BrokerDatas {
			masters[bd.BrokerName] = bd.GrpcAddrs[0]
		}
		out := make([]v5.RouteBroker, 0, len(rd.QueueDatas))
		for _, qd := range rd.QueueDatas {
			out = append(out, v5.RouteBroker{Name: qd.BrokerName, GrpcAddr: masters[qd.BrokerName],
				ReadQueues: qd.ReadQueueNums, WriteQueues: qd.WriteQueueNums, Perm: qd.Perm})
		}
		return out, nil
	}
	return nil, fmt.Errorf("no nameserver answered: %w", lastErr)
}

// Send implements v5.Backend: each message takes the 4.x send path's
// steps (send.go): a master only, no system topic, an existing writable
// topic, the send slots, the delay and timer rules (redirect), the
// stored properties, then one store.Submit for all, the duplicate window
// included (UNIQ_KEY is the client's message id). A transactional
// message becomes a half message (redirect) and its result names it
// (v5.TransactionID).
func (g grpcBackend) Send(ctx context.Context, reqs []v5.SendRequest) []v5.SendResult {
	b := g.b
	out := make([]v5.SendResult, len(reqs))
	type answer struct {
		i   int
		res store.PutResult
	}
	// NB: buffered for every put, so an answer never waits for a caller
	// that gave up.
	answers := make(chan answer, len(reqs))
	var puts []store.PutRequest
	waiting := map[int]bool{}
	for i := range reqs {
		r := &reqs[i]
		if st := b.prepareV5(r); st != nil {
			out[i].Status = st
			continue
		}
		select {
		case b.sendSem <- struct{}{}:
		default:
			b.stats.busy.Add(1)
			out[i].Status = &v2.Status{Code: v2.Code_TOO_MANY_REQUESTS, Message: fmt.Sprintf(
				"broker %s busy: %d sends already waiting for the store (send_queue_size); retry after a short backoff",
				b.cfg.BrokerName, cap(b.sendSem))}
			continue
		}
		waiting[i] = true
		puts = append(puts, store.PutRequest{Msg: &r.Msg, Dedup: true, Done: store.AnswerFunc(func(res store.PutResult) {
			<-b.sendSem
			answers <- answer{i, res}
		})})
	}
	if len(puts) > 0 {
		b.v5Puts.submit(b.store, puts)
	}
	for len(waiting) > 0 {
		select {
		case a := <-answers:
			delete(waiting, a.i)
			out[a.i] = v5.SendResult{Status: v5PutStatus(a.res), QueueOffset: a.res.QueueOffset}
			if reqs[a.i].Msg.Topic == transHalfTopic && a.res.Stored() {
				out[a.i].TransactionID = v5.TransactionID(a.res.Pos, a.res.QueueOffset)
			}
			if a.res.Duplicates == 0 && a.res.Stored() {
				b.stats.recordPut(reqs[a.i].Msg.Topic, 1, len(reqs[a.i].Msg.Body))
			}
		case <-ctx.Done():
			for i := range waiting {
				out[i].Status = &v2.Status{Code: v2.Code_PROXY_TIMEOUT,
					Message: "the call ended before the store answered: the message may be stored"}
			}
			return out
		}
	}
	return out
}

// v5Puts merges the store submissions of concurrent v5 sends, as a
// remoting connection's burst is stored with one Submit: a call that
// finds no submission under way submits what is pending, then again
// what arrived meanwhile; the others only add theirs. One Submit per
// call (its own store.putMu turn and inline dispatch) was ~20% of the
// broker's CPU with 256 single-message calls in flight.
type v5Puts struct {
	mu      sync.Mutex
	pending []store.PutRequest // guarded by mu
	spare   []store.PutRequest // guarded by mu: the submitter's, when idle
	busy    bool               // guarded by mu: a submitter runs
	sc      store.PutScratch   // the submitter's
}

// v5PutRounds bounds the submissions a caller makes for others before it
// hands the rest to a goroutine of its own.
const v5PutRounds = 8

// submit stores puts, with those of concurrent callers; their Done
// answer each.
func (v *v5Puts) submit(s *store.Store, puts []store.PutRequest) {
	v.mu.Lock()
	v.pending = append(v.pending, puts...)
	if v.busy {
		v.mu.Unlock()
		return
	}
	v.busy = true
	v.mu.Unlock()
	if !v.drain(s, v5PutRounds) {
		go v.drain(s, -1)
	}
}

// drain submits the pending puts until none are left (true) or after
// rounds submissions (false: still busy, pending left). REQUIRES: busy,
// set by this submitter.
func (v *v5Puts) drain(s *store.Store, rounds int) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for ; rounds != 0; rounds-- {
		if len(v.pending) == 0 {
			v.busy = false
			return true
		}
		batch := v.pending
		v.pending, v.spare = v.spare[:0], nil
		v.mu.Unlock()
		s.SubmitWith(batch, &v.sc)
		clear(batch)
		v.mu.Lock()
		v.spare = batch[:0]
	}
	if len(v.pending) == 0 {
		v.busy = false
		return true
	}
	return false
}

// EndTransaction implements v5.Transactor: END_TRANSACTION's code
// (transaction.go), the half message checked against the request's topic
// and message id (a v5 producer's group is its topic: not checked).
func (g grpcBackend) EndTransaction(ctx context.Context, r v5.EndRequest) *v2.Status {
	b := g.b
	if b.isSlave() {
		return &v2.Status{Code: v2.Code_FORBIDDEN, Message: fmt.Sprintf(
			"broker %s is a slave, not its group's master now: end the transaction at the master", b.cfg.BrokerName)}
	}
	res := b.endTransaction(ctx, txEnd{pos: r.Pos, halfOffset: r.HalfOffset, commit: r.Commit, topic: r.Topic, msgID: r.MessageID})
	switch res.fault {
	case endNoHalf:
		if res.readErr != nil && storeErrCode(res.readErr) == protocol.ServiceNotAvailable {
			return &v2.Status{Code: v2.Code_INTERNAL_SERVER_ERROR, Message: res.remark}
		}
		return &v2.Status{Code: v2.Code_INVALID_TRANSACTION_ID, Message: "transaction_id names no open transaction of this message: " + res.remark}
	case endNotStored:
		return v5PutStatus(res.put)
	case endNotRecorded:
		return &v2.Status{Code: v2.Code_INTERNAL_SERVER_ERROR, Message: res.remark}
	}
	return &v2.Status{Code: v2.Code_OK, Message: "OK"}
}

// askV5Producer sends the half message r (as stored in the half topic)
// to a RocketMQ 5 producer of grp with an open Telemetry stream, its real
// topic and queue restored, and reports whether one got it.
func (b *Broker) askV5Producer(grp string, r *message.Record) bool {
	if b.v5 == nil {
		return false
	}
	m := *r
	m.Topic = []byte(propOf(r.Properties, message.PropRealTopic))
	qid, _ := strconv.Atoi(propOf(r.Properties, message.PropRealQueueID))
	m.QueueID = int32(qid)
	return b.v5.RecoverOrphaned(grp, &m, v5.TransactionID(r.PhysicalOffset, r.QueueOffset))
}

// prepareV5 readies one v5 message for the store, as send does a 4.x
// one; a refusal is its status.
func (b *Broker) prepareV5(r *v5.SendRequest) *v2.Status {
	m := &r.Msg
	if b.isSlave() {
		return &v2.Status{Code: v2.Code_FORBIDDEN, Message: fmt.Sprintf(
			"broker %s is a slave, not its group's master now: send to the master", b.cfg.BrokerName)}
	}
	if systemTopics[m.Topic] || strings.HasPrefix(m.Topic, topic.RetryPrefix) || strings.HasPrefix(m.Topic, "%DLQ%") {
		return &v2.Status{Code: v2.Code_FORBIDDEN, Message: fmt.Sprintf("sending to the system topic %s is not allowed", m.Topic)}
	}
	cfg, ok := b.topics.Get(m.Topic)
	if !ok {
		return &v2.Status{Code: v2.Code_TOPIC_NOT_FOUND, Message: fmt.Sprintf(
			"topic %s does not exist on broker %s: create it with mqadmin updateTopic", m.Topic, b.cfg.BrokerName)}
	}
	if !cfg.Writable() || cfg.WriteQueueNums <= 0 {
		return &v2.Status{Code: v2.Code_FORBIDDEN, Message: fmt.Sprintf("topic %s is not writable on broker %s (perm %d)",
			m.Topic, b.cfg.BrokerName, cfg.Perm)}
	}
	if r.ShardingKey != "" {
		m.QueueID = v5.QueueFor(r.ShardingKey, cfg.WriteQueueNums)
	} else {
		m.QueueID = rand.Int32N(cfg.WriteQueueNums)
	}
	m.StoreHost = b.storeHost
	sp := message.ReadSendProperties(m.Properties)
	if code, remark := b.redirect(m, protocol.SendMessageRequestHeader{}, sp); code != protocol.Success {
		return &v2.Status{Code: v2.Code_BAD_REQUEST, Message: remark}
	}
	m.Properties = sp.StoreProperties(m.Properties, b.cfg.ClusterName)
	return nil
}

// v5PutStatus maps a put's result to a v5 status (RocketMQ's proxy
// ResponseBuilder): stored but not yet durable or replicated are the
// persistence timeouts, which clients retry (the duplicate window keeps
// one copy).
func v5PutStatus(res store.PutResult) *v2.Status {
	switch res.Status {
	case store.PutOK:
		return &v2.Status{Code: v2.Code_OK, Message: "OK"}
	case store.PutFlushDiskTimeout:
		return &v2.Status{Code: v2.Code_MASTER_PERSISTENCE_TIMEOUT, Message: res.Remark}
	case store.PutFlushSlaveTimeout:
		return &v2.Status{Code: v2.Code_SLAVE_PERSISTENCE_TIMEOUT, Message: res.Remark}
	case store.PutSlaveNotAvailable, store.PutInSyncReplicasNotEnough:
		return &v2.Status{Code: v2.Code_HA_NOT_AVAILABLE, Message: res.Remark}
	case store.PutMessageIllegal:
		return &v2.Status{Code: v2.Code_BAD_REQUEST, Message: res.Remark}
	}
	return &v2.Status{Code: v2.Code_INTERNAL_SERVER_ERROR, Message: res.Status.String() + ": " + res.Remark}
}
