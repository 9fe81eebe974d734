package client

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
)

// PullConsumer reads queues at offsets the caller chooses. It either pulls
// queues it picks itself (Queues) or subscribes and pulls the share of the
// group's queues rebalance gives it (Assignment). Offsets are committed
// only when the caller says so. Methods are safe for concurrent use.
type PullConsumer struct {
	cfg   *config
	core  *core
	group string

	mu        sync.Mutex
	startedAt time.Time               // guarded by mu
	state     clientState             // guarded by mu
	subs      map[string]subscription // guarded by mu: by topic; fixed after Start
}

// NewPullConsumer returns a pull consumer of group. WithNameServers is
// required.
func NewPullConsumer(group string, opts ...Option) (*PullConsumer, error) {
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
	return &PullConsumer{cfg: cfg, core: newCore(cfg), group: group, subs: make(map[string]subscription)}, nil
}

// ClientID returns the id the consumer is known by in its group.
func (c *PullConsumer) ClientID() string { return c.core.id }

// Subscribe makes the consumer a member of its group for topic, filtering
// by expr ("*" or tags joined by "||"); Pull on topic's queues then uses
// expr. Call it before Start.
func (c *PullConsumer) Subscribe(topic, expr string) error {
	return c.SubscribeSelector(topic, Tag(expr))
}

// SubscribeSelector is Subscribe with a selector, Tag or SQL92. An
// expression that does not compile is ErrInvalidOption.
func (c *PullConsumer) SubscribeSelector(topic string, sel MessageSelector) error {
	s, err := newSubscription(topic, sel, nil)
	if err != nil {
		return err
	}
	return addSubscription(&c.mu, &c.state, c.subs, s)
}

// Start fetches the routes of subscribed topics, registers with their
// brokers and starts the heartbeat and route loops.
func (c *PullConsumer) Start() error {
	c.mu.Lock()
	switch c.state {
	case stateStarted:
		c.mu.Unlock()
		return ErrStarted
	case stateClosed:
		c.mu.Unlock()
		return ErrClosed
	}
	if len(c.subs) > 0 {
		if err := claimGroup(c.group, c.core.id); err != nil {
			c.mu.Unlock()
			return err
		}
		c.core.addConsumer(c.group, c)
	}
	c.state = stateStarted
	c.startedAt = time.Now()
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.callTimeout)
	defer cancel()
	for _, t := range c.topics() {
		_, _ = c.core.routes.get(ctx, t)
	}
	c.core.start()
	if err := c.core.heartbeat(ctx); err != nil {
		c.core.log.Warn("client: first heartbeat", "group", c.group, "err", err)
	}
	return nil
}

// Close leaves the group and closes every connection. Idempotent.
func (c *PullConsumer) Close() error {
	c.mu.Lock()
	was := c.state
	c.state = stateClosed
	subs := len(c.subs)
	c.mu.Unlock()
	if was == stateClosed {
		return nil
	}
	if was == stateStarted && subs > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.callTimeout)
		c.core.unregister(ctx, "", c.group, c.topics())
		cancel()
		releaseGroup(c.group, c.core.id)
	}
	c.core.stop()
	return nil
}

func (c *PullConsumer) check() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case stateNew:
		return ErrNotStarted
	case stateClosed:
		return ErrClosed
	}
	return nil
}

func (c *PullConsumer) topics() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return sortedKeys(c.subs)
}

// consumerData implements member.
func (c *PullConsumer) consumerData() protocol.ConsumerData {
	d := protocol.ConsumerData{GroupName: c.group, ConsumeType: "CONSUME_ACTIVELY", MessageModel: "CLUSTERING",
		ConsumeFromWhere: ConsumeFromLast.String(), SubscriptionDataSet: []protocol.SubscriptionData{}}
	c.mu.Lock()
	for _, t := range sortedKeys(c.subs) {
		d.SubscriptionDataSet = append(d.SubscriptionDataSet, c.subs[t].data())
	}
	c.mu.Unlock()
	return d
}

// groupChanged implements member; a pull consumer asks for its assignment.
func (c *PullConsumer) groupChanged() {}

// resetOffsets implements member: a pull consumer pulls from the offsets
// its caller gives; the broker already moved the committed ones.
func (c *PullConsumer) resetOffsets(string, map[MessageQueue]int64) {}

// Queues returns every readable queue of topic, sorted.
func (c *PullConsumer) Queues(ctx context.Context, topic string) ([]MessageQueue, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	r, err := c.core.routes.get(ctx, topic)
	if err != nil {
		return nil, err
	}
	return append([]MessageQueue(nil), r.read...), nil
}

// Assignment returns the queues of a subscribed topic this consumer gets
// when the group's current members share them by the allocate strategy
// (WithAllocateStrategy; averagely by default, spec §8.2).
func (c *PullConsumer) Assignment(ctx context.Context, topic string) ([]MessageQueue, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	r, err := c.core.routes.refresh(ctx, topic)
	if err != nil {
		return nil, err
	}
	cids, err := groupMembers(ctx, c.core, c.group, r)
	if err != nil {
		return nil, err
	}
	return allocate(c.cfg.allocate, c.core.id, r.read, cids), nil
}

// Pull reads up to maxMsgs messages of q from offset on; it does not wait
// for new messages. A subscribed topic is filtered by its expression.
func (c *PullConsumer) Pull(ctx context.Context, q MessageQueue, offset int64, maxMsgs int) (PullResult, error) {
	if err := c.check(); err != nil {
		return PullResult{}, err
	}
	return c.pull(ctx, q, c.subscription(q.Topic), offset, maxMsgs)
}

// PullSelector is Pull filtered by sel instead of the subscription, for
// reading a topic without subscribing to it (the group's registered
// subscription is left alone). An expression that does not compile is
// ErrInvalidOption.
func (c *PullConsumer) PullSelector(ctx context.Context, q MessageQueue, sel MessageSelector, offset int64, maxMsgs int) (PullResult, error) {
	if err := c.check(); err != nil {
		return PullResult{}, err
	}
	sub, err := newSubscription(q.Topic, sel, nil)
	if err != nil {
		return PullResult{}, err
	}
	return c.pull(ctx, q, sub, offset, maxMsgs)
}

func (c *PullConsumer) pull(ctx context.Context, q MessageQueue, sub subscription, offset int64, maxMsgs int) (PullResult, error) {
	return pull(ctx, c.core, pullRequest{group: c.group, q: q, offset: offset, max: max(maxMsgs, 1), sub: sub,
		commit: -1, timeout: c.cfg.callTimeout})
}

// PullWait is Pull that waits when q has nothing at offset yet (long
// polling, as RocketMQ's pullBlockIfNotFound): the broker holds the pull
// until a message arrives, the suspend time of WithLongPolling (20 s by
// default) passes, or ctx is about to end; then it answers PullNoNewMsg.
func (c *PullConsumer) PullWait(ctx context.Context, q MessageQueue, offset int64, maxMsgs int) (PullResult, error) {
	if err := c.check(); err != nil {
		return PullResult{}, err
	}
	suspend := c.cfg.suspendTimeout
	if dl, ok := ctx.Deadline(); ok {
		// NB: the broker answers at the end of the suspension; leave the
		// answer time to come back before ctx ends.
		left := time.Until(dl)
		suspend = min(suspend, left-max(pullAnswerMargin, left/3))
	}
	if suspend < time.Millisecond { // NB: the header carries milliseconds; 0 asks for no suspension
		return c.Pull(ctx, q, offset, maxMsgs)
	}
	sub := c.subscription(q.Topic)
	return pull(ctx, c.core, pullRequest{group: c.group, q: q, offset: offset, max: max(maxMsgs, 1), sub: sub,
		commit: -1, suspend: suspend, timeout: suspend + c.cfg.callTimeout})
}

// subscription is the expression Pull filters topic with: the subscribed
// one, or every tag.
func (c *PullConsumer) subscription(topic string) subscription {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sub, ok := c.subs[topic]; ok {
		return sub
	}
	return parseExpr(topic, "*", nil)
}

// pullAnswerMargin is the least time PullWait leaves for the broker's
// answer before the caller's deadline; it leaves a third of the time left
// when that is more (Java's pullBlockIfNotFound suspends 20 s of a 30 s
// call). NB: 100 ms alone was not enough under load: in CI a 250 ms
// PullWait failed with a timeout, its answer more than 100 ms late.
const pullAnswerMargin = 100 * time.Millisecond

func (c *PullConsumer) addr(ctx context.Context, q MessageQueue) (string, error) {
	return (&remoteOffsets{core: c.core, group: c.group}).addr(ctx, q)
}

// CommitOffset stores offset (the next message to read) as the group's
// position in q.
func (c *PullConsumer) CommitOffset(ctx context.Context, q MessageQueue, offset int64) error {
	if err := c.check(); err != nil {
		return err
	}
	return (&remoteOffsets{core: c.core, group: c.group}).commit(ctx, map[MessageQueue]int64{q: offset})
}

// CommittedOffset returns the group's committed position in q, or -1 when
// it has none.
func (c *PullConsumer) CommittedOffset(ctx context.Context, q MessageQueue) (int64, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	return (&remoteOffsets{core: c.core, group: c.group}).read(ctx, q)
}

// MaxOffset returns the offset the next message stored in q will get.
func (c *PullConsumer) MaxOffset(ctx context.Context, q MessageQueue) (int64, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	addr, err := c.addr(ctx, q)
	if err != nil {
		return 0, err
	}
	return maxOffset(ctx, c.core, addr, q)
}

// OffsetAt returns the offset of the first message of q stored at or after
// t.
func (c *PullConsumer) OffsetAt(ctx context.Context, q MessageQueue, t time.Time) (int64, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	addr, err := c.addr(ctx, q)
	if err != nil {
		return 0, err
	}
	return searchOffset(ctx, c.core, addr, q, t)
}
