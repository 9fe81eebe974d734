package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// member is a consumer registered with a core: it describes itself for
// heartbeats and is told when the broker says its group changed.
type member interface {
	consumerData() protocol.ConsumerData
	topics() []string // route topics whose brokers it talks to
	groupChanged()
	// resetOffsets restarts the queues of topic in offsets from there
	// (RESET_CONSUMER_CLIENT_OFFSET).
	resetOffsets(topic string, offsets map[MessageQueue]int64)
	// runningInfo describes it (GET_CONSUMER_RUNNING_INFO).
	runningInfo(jstack bool) protocol.ConsumerRunningInfo
	// consumeDirectly hands m to its handler (CONSUME_MESSAGE_DIRECTLY).
	consumeDirectly(m *Message) (protocol.ConsumeMessageDirectlyResult, error)
	// queueOffsets returns the offsets it holds for topic's queues
	// (GET_CONSUMER_STATUS_FROM_CLIENT).
	queueOffsets(topic string) map[protocol.MessageQueue]int64
}

// core is what every client kind shares: the transport, the route cache,
// the client id, and the heartbeat and route loops. Each Producer,
// PushConsumer, PullConsumer and Admin owns one core.
type core struct {
	cfg    *config
	id     string
	log    *slog.Logger
	tr     *transport
	routes *routeCache
	ids    *message.UniqIDGenerator

	wg        sync.WaitGroup
	quit      chan struct{}
	routeKick chan struct{}
	hbKick    chan struct{}
	stopOnce  sync.Once

	mu        sync.Mutex
	producers map[string]bool          // guarded by mu: producer groups
	consumers map[string]member        // guarded by mu: by group
	replies   map[string]chan *Message // guarded by mu: Requests waiting, by correlation id
	// replyReady holds the reply topics whose brokers know this client
	// (guarded by mu; see ensureReplyRoutes).
	replyReady map[string]bool
	// txListener answers the brokers' transaction checks for producer
	// group txGroup (guarded by mu; set by a transactional Producer).
	txListener TransactionListener
	txGroup    string
	txBusy     map[string]bool // guarded by mu: message ids with a local transaction or a check running
	// txDecided and txDecidedOrder are the decisions this producer sent
	// lately (guarded by mu; see txRemember).
	txDecided      map[string]txDecision
	txDecidedOrder []txDecided
}

// processIDs is the one message id generator of the process: ids are
// unique through its sequence, and two generators of one process (same
// address and pid) would make the same ids in the same millisecond.
var processIDs = sync.OnceValue(func() *message.UniqIDGenerator {
	return message.NewUniqIDGenerator(localIPv4(), os.Getpid())
})

func newCore(cfg *config) *core {
	ip := localIPv4()
	instance := cfg.instance
	if instance == "" {
		instance = strconv.Itoa(os.Getpid())
	}
	c := &core{
		cfg:        cfg,
		id:         ip.String() + "@" + instance,
		ids:        processIDs(),
		quit:       make(chan struct{}),
		routeKick:  make(chan struct{}, 1),
		hbKick:     make(chan struct{}, 1),
		producers:  make(map[string]bool),
		txBusy:     make(map[string]bool),
		txDecided:  make(map[string]txDecision),
		replies:    make(map[string]chan *Message),
		replyReady: make(map[string]bool),
		consumers:  make(map[string]member),
	}
	c.log = cfg.logger.With(slog.String("client_id", c.id))
	c.tr = newTransport(cfg, c.onRequest)
	c.routes = newRouteCache(c.tr, cfg.nameServers, c.callCtx)
	c.routes.changed = c.routeChanged
	c.routes.onSlave = cfg.slaveNotice
	if c.routes.onSlave == nil {
		c.routes.onSlave = func(broker, addr string) {
			c.log.Warn("client: the routes list no master for broker "+broker+"; reading from its slave", "broker", broker, "slave", addr)
		}
	}
	return c
}

// localIPv4 returns the first non-loopback IPv4 address of the host, or
// 127.0.0.1.
func localIPv4() netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() {
				if ip, ok := netip.AddrFromSlice(n.IP.To4()); ok && n.IP.To4() != nil {
					return ip
				}
			}
		}
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1})
}

// callCtx bounds one admin-style call by the call timeout.
func (c *core) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.callTimeout)
}

// start launches the route and heartbeat loops.
func (c *core) start() {
	c.goLoop(c.routeLoop)
	c.goLoop(c.heartbeatLoop)
}

// goLoop runs fn on a goroutine the core waits for in stop.
func (c *core) goLoop(fn func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
}

// stop ends the loops and closes every connection. Idempotent.
func (c *core) stop() {
	c.stopOnce.Do(func() {
		close(c.quit)
		c.wg.Wait()
		c.tr.close()
	})
}

// quitCtx returns a context cancelled when the core stops.
func (c *core) quitCtx() (context.Context, context.CancelFunc) { return untilClosed(c.quit) }

// untilClosed returns a context cancelled when ch is closed or cancel is
// called. The caller must call cancel.
func untilClosed(ch <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-ch:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// readAddr returns where reads of q's broker go (routeCache.readAddr),
// fetching q's topic route once if the broker is unknown.
func (c *core) readAddr(ctx context.Context, q MessageQueue) (string, error) {
	if a, _, ok := c.routes.readAddr(q.BrokerName); ok {
		return a, nil
	}
	if _, err := c.routes.refresh(ctx, q.Topic); err != nil {
		return "", err
	}
	if a, _, ok := c.routes.readAddr(q.BrokerName); ok {
		return a, nil
	}
	return "", fmt.Errorf("%w: broker %s has no address in the route of %s", ErrNoRoute, q.BrokerName, q.Topic)
}

// connFailed is told about a transport failure to addr, or a broker that
// is not available (a master that became a slave): routes are refreshed
// at once, since the broker may be gone or replaced.
func (c *core) connFailed(addr string, err error) {
	var be *BrokerError
	if isConnError(err) || (errors.As(err, &be) && be.Code == CodeServiceNotAvailable) {
		c.log.Debug("client: connection failure, refreshing routes", "addr", addr, "err", err)
		kick(c.routeKick)
	}
}

// routeChanged is told that a topic's readable queues or brokers changed:
// brokers new to the client get a heartbeat, and the consumers of the
// topic rebalance now rather than at their next round.
func (c *core) routeChanged(topic string) {
	c.log.Debug("client: route changed", "topic", topic)
	kick(c.hbKick)
	c.mu.Lock()
	var ms []member
	for _, m := range c.consumers {
		if slices.Contains(m.topics(), topic) {
			ms = append(ms, m)
		}
	}
	c.mu.Unlock()
	for _, m := range ms {
		m.groupChanged()
	}
}

// After a failed send or connection, routes are refreshed every
// failRefresh for failRefreshFor.
const (
	failRefresh    = 500 * time.Millisecond
	failRefreshFor = 10 * time.Second
)

// routeLoop refreshes every cached route on a timer and on a kick, and
// the routes of the topics consumers subscribe to on a faster timer.
func (c *core) routeLoop() {
	t := time.NewTicker(c.cfg.routeRefresh)
	defer t.Stop()
	sub := time.NewTicker(c.cfg.subRefresh)
	defer sub.Stop()
	// NB: after a failure, routes are refreshed every failRefresh for a
	// while: a replacement master registers some seconds after its
	// predecessor stopped answering (a controller's timeout).
	fast := time.NewTicker(failRefresh)
	defer fast.Stop()
	var fastUntil time.Time
	for {
		all := true
		select {
		case <-c.quit:
			return
		case <-t.C:
		case <-c.routeKick:
			fastUntil = time.Now().Add(failRefreshFor)
		case now := <-fast.C:
			if now.After(fastUntil) {
				continue
			}
		case <-sub.C:
			all = false
		}
		ctx, cancel := c.quitCtx()
		if all {
			c.routes.refreshAll(ctx)
		} else {
			for _, topic := range c.subscribedTopics() {
				if c.routes.cached(topic) != nil {
					_, _ = c.routes.refresh(ctx, topic)
				}
			}
		}
		cancel()
	}
}

// subscribedTopics returns the topics this client's consumers subscribe
// to, each once.
func (c *core) subscribedTopics() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.consumers {
		for _, t := range m.topics() {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}

// heartbeatLoop heartbeats every broker on a timer and on a kick.
func (c *core) heartbeatLoop() {
	t := time.NewTicker(c.cfg.hbInterval)
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-t.C:
		case <-c.hbKick:
		}
		ctx, cancel := c.quitCtx()
		if err := c.heartbeat(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("client: heartbeat", "err", err)
		}
		cancel()
	}
}

func (c *core) addProducer(group string) {
	c.mu.Lock()
	c.producers[group] = true
	c.mu.Unlock()
}

func (c *core) addConsumer(group string, m member) {
	c.mu.Lock()
	c.consumers[group] = m
	c.mu.Unlock()
}

// heartbeat sends one heartbeat, describing every registered producer and
// consumer, to every broker of the topics in use: all addresses when there
// are consumers, masters only otherwise (spec §3.3).
func (c *core) heartbeat(ctx context.Context) error { return c.heartbeatTo(ctx, nil) }

// heartbeatTo is heartbeat to the brokers at addrs only (all those in use
// when nil).
func (c *core) heartbeatTo(ctx context.Context, only []string) error {
	hb := protocol.HeartbeatData{ClientID: c.id, ProducerDataSet: []protocol.ProducerData{}, ConsumerDataSet: []protocol.ConsumerData{}}
	c.mu.Lock()
	for g := range c.producers {
		hb.ProducerDataSet = append(hb.ProducerDataSet, protocol.ProducerData{GroupName: g})
	}
	var topics []string
	for _, m := range c.consumers {
		hb.ConsumerDataSet = append(hb.ConsumerDataSet, m.consumerData())
		topics = append(topics, m.topics()...)
	}
	c.mu.Unlock()
	if len(hb.ProducerDataSet) == 0 && len(hb.ConsumerDataSet) == 0 {
		return nil
	}
	var addrs []string
	switch {
	case only != nil:
		addrs = only
	case len(hb.ConsumerDataSet) > 0:
		addrs = c.routes.addrsOf(topics, true)
	default:
		addrs = c.routes.addrsOf(c.routes.topicNames(), false)
	}
	var errs []error
	for _, a := range addrs {
		cctx, cancel := c.callCtx(ctx)
		_, err := c.tr.call(cctx, a, request{code: protocol.HeartBeat, obj: hb})
		cancel()
		if err != nil {
			errs = append(errs, err)
			c.connFailed(a, err)
		}
	}
	return errors.Join(errs...)
}

// unregister tells every broker this client's group is gone
// (UNREGISTER_CLIENT), so the rest of the group rebalances at once.
func (c *core) unregister(ctx context.Context, producerGroup, consumerGroup string, topics []string) {
	h := &protocol.UnregisterClientRequestHeader{ClientID: c.id, ProducerGroup: producerGroup, ConsumerGroup: consumerGroup}
	for _, a := range c.routes.addrsOf(topics, true) {
		cctx, cancel := c.callCtx(ctx)
		_, _ = c.tr.call(cctx, a, request{code: protocol.UnregisterClient, ext: protocol.Ext(h)})
		cancel()
	}
}

// onRequest serves requests brokers send to the client (spec §4).
func (c *core) onRequest(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	switch req.Code {
	case protocol.NotifyConsumerIDsChanged:
		var h protocol.NotifyConsumerIDsChangedRequestHeader
		if err := h.FromExt(req.ExtFields); err == nil {
			c.mu.Lock()
			m := c.consumers[h.ConsumerGroup]
			c.mu.Unlock()
			if m != nil {
				m.groupChanged()
			}
		}
		_ = w.Write(remoting.NewResponse(req, protocol.Success, ""))
	case protocol.ResetConsumerClientOffset:
		var h protocol.ResetOffsetRequestHeader
		var body protocol.ResetOffsetBody
		err := h.FromExt(req.ExtFields)
		if err == nil {
			// NB: JSON whatever the header codec, as brokers send it.
			err = body.UnmarshalJSON(req.Body)
		}
		if err != nil {
			c.log.Warn("client: bad RESET_CONSUMER_CLIENT_OFFSET", "err", err)
			_ = w.Write(remoting.NewResponse(req, protocol.SystemError, "bad reset offset request: "+err.Error()))
			return
		}
		c.mu.Lock()
		m := c.consumers[h.Group]
		c.mu.Unlock()
		if m != nil {
			offsets := make(map[MessageQueue]int64, len(body.OffsetTable))
			for q, off := range body.OffsetTable {
				offsets[MessageQueue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: int(q.QueueID)}] = off
			}
			c.log.Info("client: offsets reset by the broker", "group", h.Group, "topic", h.Topic, "queues", len(offsets))
			m.resetOffsets(h.Topic, offsets)
		}
		_ = w.Write(remoting.NewResponse(req, protocol.Success, ""))
	case protocol.GetConsumerRunningInfo:
		var h protocol.GetConsumerRunningInfoRequestHeader
		m, resp := c.memberFor(req, &h, func() (string, string) { return h.ConsumerGroup, h.ClientID })
		if m != nil {
			body, err := m.runningInfo(h.JstackEnable).Encode()
			resp = bodyResponse(req, body, err, "running info")
		}
		_ = w.Write(resp)
	case protocol.ConsumeMessageDirectly:
		var h protocol.ConsumeMessageDirectlyRequestHeader
		m, resp := c.memberFor(req, &h, func() (string, string) { return h.ConsumerGroup, h.ClientID })
		if m != nil {
			resp = c.consumeDirectly(req, m, h.BrokerName)
		}
		_ = w.Write(resp)
	case protocol.CheckTransactionState:
		c.onCheckTransaction(req, w.Conn()) // NB: oneway: no answer but END_TRANSACTION
	case protocol.PushReplyMessageToClient:
		_ = w.Write(c.onReply(req))
	case protocol.GetConsumerStatusFromClient:
		var h protocol.GetConsumerStatusRequestHeader
		m, resp := c.memberFor(req, &h, func() (string, string) { return h.Group, "" })
		if m != nil {
			body, err := protocol.ConsumerStatusBody{MessageQueueTable: m.queueOffsets(h.Topic)}.Encode()
			resp = bodyResponse(req, body, err, "consumer status")
		}
		_ = w.Write(resp)
	default:
		_ = w.Write(remoting.NewResponse(req, protocol.RequestCodeNotSupported,
			fmt.Sprintf("the Sluice client does not serve %s", protocol.CodeName(req.Code))))
	}
}

// memberFor decodes the header of a request addressed to one consumer of
// this client and returns that consumer, or an error answer.
func (c *core) memberFor(req *remoting.Command, h protocol.ExtHeader, target func() (group, clientID string)) (member, *remoting.Command) {
	if err := h.FromExt(req.ExtFields); err != nil {
		return nil, remoting.NewResponse(req, protocol.SystemError,
			fmt.Sprintf("client: bad %s header: %v", protocol.CodeName(req.Code), err))
	}
	group, id := target()
	c.mu.Lock()
	m := c.consumers[group]
	c.mu.Unlock()
	if m == nil || id != "" && id != c.id {
		return nil, remoting.NewResponse(req, protocol.SystemError,
			fmt.Sprintf("client %s has no consumer of group %s", c.id, group))
	}
	return m, nil
}

// consumeDirectly serves CONSUME_MESSAGE_DIRECTLY: the body is the one
// stored record to hand to m's handler.
func (c *core) consumeDirectly(req *remoting.Command, m member, brokerName string) *remoting.Command {
	msgs, err := decodeRecords(req.Body, brokerName, c.cfg.maxBodySize)
	if err == nil && len(msgs) != 1 {
		err = fmt.Errorf("want one message, got %d", len(msgs))
	}
	if err != nil {
		return remoting.NewResponse(req, protocol.SystemError, "client: bad CONSUME_MESSAGE_DIRECTLY body: "+err.Error())
	}
	res, err := m.consumeDirectly(msgs[0])
	if err != nil {
		return remoting.NewResponse(req, protocol.SystemError, "client: "+err.Error())
	}
	body, err := json.Marshal(res)
	return bodyResponse(req, body, err, "consume result")
}

// bodyResponse answers req with body, or SYSTEM_ERROR when encoding what
// (err) failed.
func bodyResponse(req *remoting.Command, body []byte, err error, what string) *remoting.Command {
	if err != nil {
		return remoting.NewResponse(req, protocol.SystemError, "client: "+what+": "+err.Error())
	}
	resp := remoting.NewResponse(req, protocol.Success, "")
	resp.Body = body
	return resp
}

// activeGroups tracks the consumers running in this process, by group and
// client id: two of them would look like one member to the brokers.
var activeGroups = struct {
	sync.Mutex
	m map[string]bool
}{m: make(map[string]bool)}

func claimGroup(group, clientID string) error {
	activeGroups.Lock()
	defer activeGroups.Unlock()
	k := group + "\x00" + clientID
	if activeGroups.m[k] {
		return fmt.Errorf("%w: group %s, client id %s", ErrGroupInUse, group, clientID)
	}
	activeGroups.m[k] = true
	return nil
}

func releaseGroup(group, clientID string) {
	activeGroups.Lock()
	delete(activeGroups.m, group+"\x00"+clientID)
	activeGroups.Unlock()
}
