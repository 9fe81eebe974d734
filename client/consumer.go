package client

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/internal/filter"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
)

// ConsumeResult is what a Handler says about the messages it was given.
type ConsumeResult int

const (
	// ConsumeSuccess acknowledges the messages.
	ConsumeSuccess ConsumeResult = iota
	// ConsumeRetryLater asks for redelivery. A concurrent clustering
	// consumer sends the messages back to the broker, which redelivers
	// them through %RETRY%<group> after a delay (10 s, 30 s, 1 min, …)
	// and moves them to %DLQ%<group> after the maximum reconsume count.
	// An orderly consumer suspends the queue and retries in place.
	// Broadcasting consumers drop the messages.
	ConsumeRetryLater
)

// Handler handles delivered messages: at most WithConsumeBatchSize at a
// time, all from one queue, in queue order. ctx is cancelled when the
// consumer closes. A panic counts as ConsumeRetryLater.
type Handler func(ctx context.Context, msgs []*Message) ConsumeResult

// Expression types of a MessageSelector, as RocketMQ names them.
const (
	ExpressionTag   = "TAG"
	ExpressionSQL92 = "SQL92"
)

// MessageSelector chooses the messages of a topic a consumer receives: by
// tag (Tag) or by a SQL92 expression over the message's properties (SQL92).
type MessageSelector struct {
	Type       string // ExpressionTag or ExpressionSQL92
	Expression string
}

// Tag selects messages by tag: "*" (or "") for all, or tags joined by "||".
func Tag(expr string) MessageSelector { return MessageSelector{Type: ExpressionTag, Expression: expr} }

// SQL92 selects messages whose properties (user properties and system ones
// such as TAGS and KEYS) match expr, a RocketMQ SQL92 selector such as
// "amount BETWEEN 50 AND 99 AND region IN ('eu','us')". A message lacking
// a property the expression compares never matches. The broker filters
// (it needs filter.property_enabled, on by default in Sluice); the
// expression is checked when subscribing.
func SQL92(expr string) MessageSelector {
	return MessageSelector{Type: ExpressionSQL92, Expression: expr}
}

// subscription is one subscribed topic.
type subscription struct {
	topic   string
	typ     string // ExpressionTag or ExpressionSQL92
	expr    string
	tags    []string // nil: every tag
	handler Handler
	version int64
}

// newSubscription checks topic and sel and returns the subscription of
// topic with sel.
func newSubscription(topic string, sel MessageSelector, h Handler) (subscription, error) {
	if err := checkTopic(topic); err != nil {
		return subscription{}, err
	}
	switch strings.ToUpper(sel.Type) {
	case "", ExpressionTag:
		return parseExpr(topic, sel.Expression, h), nil
	case ExpressionSQL92:
		expr := strings.TrimSpace(sel.Expression)
		if _, err := filter.Compile(expr); err != nil {
			return subscription{}, invalidOption("SQL92 selector of topic %s: %v", topic, err)
		}
		return subscription{topic: topic, typ: ExpressionSQL92, expr: expr, handler: h, version: time.Now().UnixNano()}, nil
	}
	return subscription{}, invalidOption("selector type %q of topic %s: TAG or SQL92", sel.Type, topic)
}

// addSubscription adds s to the subscriptions of a consumer that is not
// started yet; mu guards state and subs.
func addSubscription(mu *sync.Mutex, state *clientState, subs map[string]subscription, s subscription) error {
	mu.Lock()
	defer mu.Unlock()
	if *state != stateNew {
		return ErrStarted
	}
	subs[s.topic] = s
	return nil
}

func parseExpr(topic, expr string, h Handler) subscription {
	s := subscription{topic: topic, typ: ExpressionTag, expr: strings.TrimSpace(expr), handler: h, version: time.Now().UnixNano()}
	if s.expr == "" {
		s.expr = "*"
	}
	if s.expr != "*" {
		for _, t := range strings.Split(s.expr, "||") {
			if t = strings.TrimSpace(t); t != "" && !slices.Contains(s.tags, t) {
				s.tags = append(s.tags, t)
			}
		}
	}
	return s
}

// matches is the client's own check of a pulled message: its tag. SQL92
// subscriptions are filtered by the broker only.
func (s subscription) matches(m *Message) bool {
	return s.tags == nil || slices.Contains(s.tags, m.Tags)
}

func (s subscription) data() protocol.SubscriptionData {
	d := protocol.SubscriptionData{Topic: s.topic, SubString: s.expr, TagsSet: []string{}, CodeSet: []any{},
		SubVersion: s.version, ExpressionType: s.typ}
	for _, t := range s.tags {
		d.TagsSet = append(d.TagsSet, t)
		d.CodeSet = append(d.CodeSet, strconv.FormatInt(message.TagsHashCode(t), 10))
	}
	return d
}

// PushConsumer delivers messages to handlers: it rebalances the group's
// queues among its members, long-polls each queue it owns, hands messages
// to handlers, retries failed ones and commits offsets. Create it with
// NewPushConsumer, Subscribe, Start, and Close it when done.
type PushConsumer struct {
	cfg     *config
	core    *core
	group   string
	offsets offsetStore
	inner   *Producer // sends messages back when CONSUMER_SEND_MSG_BACK fails

	tasks       chan consumeTask
	rebalanceCh chan struct{}
	quit        chan struct{}
	wg          sync.WaitGroup
	// NB: a lifetime context, not a request one: handlers receive it and
	// see it cancelled when Close starts.
	handlerCtx  context.Context
	stopHandler context.CancelFunc

	stats *consumeStats // set by Start
	// lockMisses counts the queues allocated to an orderly consumer that a
	// rebalance could not lock (another member still held them).
	lockMisses atomic.Int64

	// commitMu serialises offset commits, each from reading the offsets
	// to its answer, so that a periodic commit read before a rebalance
	// dropped a queue cannot land after, and below, the dropped queue's
	// final commit (the next owner would start from the older offset).
	// Held across the commit's remote calls, one per queue, each bounded by
	// the call timeout (a hung broker holds it that long per queue of its);
	// no other consumer lock is taken under it. commitWaits counts callers
	// waiting for it (tests).
	commitMu    sync.Mutex
	commitWaits atomic.Int64

	mu        sync.Mutex
	startedAt time.Time                      // guarded by mu
	state     clientState                    // guarded by mu
	subs      map[string]subscription        // guarded by mu: by topic (retry topic included); fixed after Start
	queues    map[MessageQueue]*processQueue // guarded by mu
}

// NewPushConsumer returns a push consumer of group. WithNameServers is
// required.
func NewPushConsumer(group string, opts ...Option) (*PushConsumer, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := checkTopic(group); err != nil || strings.ContainsAny(group, "%|") {
		return nil, invalidOption("group %q: letters, digits, '-' and '_' only", group)
	}
	if cfg.maxReconsume < -1 {
		return nil, invalidOption("max reconsume times %d", cfg.maxReconsume)
	}
	if cfg.maxReconsume == -1 && !cfg.orderly {
		cfg.maxReconsume = 16
	}
	if cfg.fromTime.IsZero() {
		cfg.fromTime = time.Now().Add(-30 * time.Minute)
	}
	c := &PushConsumer{cfg: cfg, core: newCore(cfg), group: group, rebalanceCh: make(chan struct{}, 1),
		quit: make(chan struct{}), subs: make(map[string]subscription), queues: make(map[MessageQueue]*processQueue),
		tasks: make(chan consumeTask, cfg.consumeGoroutines)}
	c.handlerCtx, c.stopHandler = context.WithCancel(context.Background())
	if cfg.model == Broadcasting {
		c.offsets = newLocalOffsets(cfg.offsetDir, group, cfg.instance)
	} else {
		c.offsets = &remoteOffsets{core: c.core, group: group}
	}
	c.inner = &Producer{cfg: cfg, core: c.core, sel: RoundRobinSelector(), faults: newFaultTracker(cfg.faultIsolation),
		state: stateStarted}
	return c, nil
}

// ClientID returns the id the consumer is known by in its group.
func (c *PushConsumer) ClientID() string { return c.core.id }

// Subscribe registers handler for the messages of topic whose tag matches
// expr: "*" (or "") for all, or tags joined by "||". Call it before Start.
func (c *PushConsumer) Subscribe(topic, expr string, handler Handler) error {
	return c.SubscribeSelector(topic, Tag(expr), handler)
}

// SubscribeSelector registers handler for the messages of topic sel
// selects (Tag or SQL92). An expression that does not compile is
// ErrInvalidOption. Call it before Start.
func (c *PushConsumer) SubscribeSelector(topic string, sel MessageSelector, handler Handler) error {
	if handler == nil {
		return invalidOption("nil handler for topic %s", topic)
	}
	s, err := newSubscription(topic, sel, handler)
	if err != nil {
		return err
	}
	return addSubscription(&c.mu, &c.state, c.subs, s)
}

// Start registers the consumer with the brokers and starts consuming. Topics
// without a route yet are picked up when they get one.
func (c *PushConsumer) Start() error {
	c.mu.Lock()
	switch {
	case c.state == stateStarted:
		c.mu.Unlock()
		return ErrStarted
	case c.state == stateClosed:
		c.mu.Unlock()
		return ErrClosed
	case len(c.subs) == 0:
		c.mu.Unlock()
		return invalidOption("no subscription: call Subscribe before Start")
	}
	if err := claimGroup(c.group, c.core.id); err != nil {
		c.mu.Unlock()
		return err
	}
	if c.cfg.model == Clustering {
		c.subs[RetryTopic(c.group)] = parseExpr(RetryTopic(c.group), "*", nil)
	}
	c.state = stateStarted
	c.startedAt = time.Now()
	c.stats = newConsumeStats(c.startedAt)
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.callTimeout)
	defer cancel()
	for _, t := range c.topics() {
		if _, err := c.core.routes.get(ctx, t); err != nil && !strings.HasPrefix(t, retryPrefix) {
			c.core.log.Warn("client: no route yet; consuming once there is one", "topic", t, "err", err)
		}
	}
	c.core.addConsumer(c.group, c)
	c.core.start()
	if err := c.core.heartbeat(ctx); err != nil {
		c.core.log.Warn("client: first heartbeat", "group", c.group, "err", err)
	}
	for range c.cfg.consumeGoroutines {
		c.goLoop(c.consumeLoop)
	}
	c.goLoop(c.rebalanceLoop)
	c.goLoop(c.commitLoop)
	if c.cfg.orderly && c.cfg.model == Clustering {
		c.goLoop(c.lockLoop)
	}
	return nil
}

func (c *PushConsumer) goLoop(fn func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
}

// Close stops consuming: handlers see their context cancelled, pulls end,
// offsets are committed (the lowest unacknowledged offset of each queue),
// orderly locks are released and the brokers are told the consumer left,
// so the rest of the group takes its queues at once. Idempotent.
func (c *PushConsumer) Close() error {
	c.mu.Lock()
	was := c.state
	c.state = stateClosed
	c.mu.Unlock()
	if was != stateStarted {
		if was == stateNew {
			c.core.stop()
		}
		return nil
	}
	close(c.quit)
	c.stopHandler()
	c.mu.Lock()
	pqs := make([]*processQueue, 0, len(c.queues))
	for _, pq := range c.queues {
		pqs = append(pqs, pq)
		pq.drop()
	}
	c.mu.Unlock()
	c.wg.Wait()

	ctx, cancel := context.WithTimeout(context.Background(), 2*c.cfg.callTimeout)
	defer cancel()
	if err := c.persist(ctx, pqs, false); err != nil {
		c.core.log.Warn("client: commit offsets at close", "group", c.group, "err", err)
	}
	if c.cfg.orderly && c.cfg.model == Clustering {
		c.unlock(ctx, pqs)
	}
	c.core.unregister(ctx, "", c.group, c.topics())
	c.core.stop()
	releaseGroup(c.group, c.core.id)
	return nil
}

// topics returns the subscribed topics, the retry topic included.
func (c *PushConsumer) topics() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return sortedKeys(c.subs)
}

func (c *PushConsumer) subscription(topic string) (subscription, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.subs[topic]
	return s, ok
}

// consumerData implements member.
func (c *PushConsumer) consumerData() protocol.ConsumerData {
	d := protocol.ConsumerData{GroupName: c.group, ConsumeType: "CONSUME_PASSIVELY", MessageModel: c.cfg.model.String(),
		ConsumeFromWhere: c.cfg.from.String(), SubscriptionDataSet: []protocol.SubscriptionData{}}
	c.mu.Lock()
	for _, t := range sortedKeys(c.subs) {
		d.SubscriptionDataSet = append(d.SubscriptionDataSet, c.subs[t].data())
	}
	c.mu.Unlock()
	return d
}

// groupChanged implements member: rebalance now.
func (c *PushConsumer) groupChanged() { kick(c.rebalanceCh) }

// resetOffsets implements member (RESET_CONSUMER_CLIENT_OFFSET, after an
// admin rewound or skipped the group): the queues of topic in offsets are
// dropped without committing their progress, their loops stop, the new
// offsets are committed (over any older commit still in flight), and a
// rebalance takes the queues up again from there. Batches that were being
// handled are not acknowledged.
func (c *PushConsumer) resetOffsets(topic string, offsets map[MessageQueue]int64) {
	c.mu.Lock()
	if c.state != stateStarted {
		c.mu.Unlock()
		return
	}
	var gone []*processQueue
	mine := make(map[MessageQueue]int64)
	for mq, off := range offsets {
		if mq.Topic != topic {
			continue
		}
		mine[mq] = off
		if pq := c.queues[mq]; pq != nil {
			delete(c.queues, mq)
			pq.drop()
			gone = append(gone, pq)
		}
	}
	c.mu.Unlock()
	for _, pq := range gone {
		pq.loops.Wait()
	}
	ctx, cancel := c.core.callCtx(context.Background())
	defer cancel()
	c.commitMu.Lock()
	err := c.offsets.commit(ctx, mine)
	c.commitMu.Unlock()
	if err != nil {
		c.core.log.Warn("client: commit reset offsets", "group", c.group, "topic", topic, "err", err)
	}
	kick(c.rebalanceCh)
}

// commitLoop commits offsets every commit interval.
func (c *PushConsumer) commitLoop() {
	t := time.NewTicker(c.cfg.commitInterval)
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-t.C:
		}
		c.mu.Lock()
		pqs := make([]*processQueue, 0, len(c.queues))
		for _, pq := range c.queues {
			pqs = append(pqs, pq)
		}
		c.mu.Unlock()
		ctx, cancel := untilClosed(c.quit)
		if err := c.persist(ctx, pqs, true); err != nil && ctx.Err() == nil {
			c.core.log.Warn("client: commit offsets", "group", c.group, "err", err)
		}
		cancel()
	}
}

// persist commits the offsets of pqs that changed since their last commit,
// skipping dropped queues when live is set (the periodic commit: a dropped
// queue's last commit is its release's, or a reset's).
func (c *PushConsumer) persist(ctx context.Context, pqs []*processQueue, live bool) error {
	c.commitWaits.Add(1)
	c.commitMu.Lock()
	c.commitWaits.Add(-1)
	defer c.commitMu.Unlock()
	offs := make(map[MessageQueue]int64)
	for _, pq := range pqs {
		if live && pq.dropped() {
			continue
		}
		if off := pq.offset.Load(); off >= 0 && off != pq.persisted.Load() {
			offs[pq.mq] = off
		}
	}
	if len(offs) == 0 {
		return nil
	}
	err := c.offsets.commit(ctx, offs)
	if err == nil {
		for _, pq := range pqs {
			if off, ok := offs[pq.mq]; ok {
				pq.persisted.Store(off)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("client: group %s: %w", c.group, err)
	}
	return nil
}
