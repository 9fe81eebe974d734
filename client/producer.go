package client

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/internal/message"
)

// clientState is the lifecycle of a client: new → started → closed.
type clientState int

const (
	stateNew clientState = iota
	stateStarted
	stateClosed
)

// Producer sends messages. Create it with NewProducer, Start it, and Close
// it when done; all methods are safe for concurrent use.
type Producer struct {
	cfg    *config
	core   *core
	sel    QueueSelector
	faults *faultTracker
	sem    chan struct{} // SendAsync slots

	mu      sync.RWMutex
	state   clientState    // guarded by mu
	async   sync.WaitGroup // SendAsync goroutines; Add under mu.RLock while started
	workers *workers       // run the SendAsync calls
	// completions runs the callbacks of SendAsync calls answered on a
	// connection's reader.
	completions completions
	inlineFirst atomic.Int64 // SendAsync calls whose first attempt went inline (for tests)
	derived     sync.Map     // topic → derivedRoute: new topics sent through the template
	batcher     *batcher     // WithAutoBatch; nil when off
	autoBatches atomic.Int64 // batch requests the batcher sent (for tests)
}

// NewProducer returns a producer configured by opts. WithNameServers is
// required; the group defaults to "DEFAULT_PRODUCER".
func NewProducer(opts ...Option) (*Producer, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.group == "" {
		cfg.group = "DEFAULT_PRODUCER"
	}
	if cfg.asyncInflight < 1 || cfg.maxBodySize < 1 || cfg.defaultQueueNums < 1 {
		return nil, invalidOption("async inflight, max body size and default queue count must be at least 1")
	}
	sel := cfg.selector
	if sel == nil {
		sel = RoundRobinSelector()
	}
	p := &Producer{cfg: cfg, core: newCore(cfg), sel: sel, faults: newFaultTracker(cfg.faultIsolation),
		sem: make(chan struct{}, cfg.asyncInflight), workers: newWorkers()}
	if cfg.autoBatchMessages != 0 {
		if cfg.autoBatchMessages < 2 || cfg.autoBatchBytes < 1024 || cfg.autoBatchBytes > cfg.maxBodySize {
			return nil, invalidOption("auto batch: at least 2 messages, and 1 KiB to the max body size (%d bytes)", cfg.maxBodySize)
		}
		p.batcher = newBatcher(cfg.autoBatchMessages, cfg.autoBatchBytes)
	}
	return p, nil
}

// ClientID returns the id the producer heartbeats with (ip@instance).
func (p *Producer) ClientID() string { return p.core.id }

// Start starts the route refresh and heartbeat loops. Routes are fetched
// on the first send to each topic.
func (p *Producer) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.state {
	case stateStarted:
		return ErrStarted
	case stateClosed:
		return ErrClosed
	}
	p.core.addProducer(p.cfg.group)
	if p.cfg.txListener != nil {
		p.core.mu.Lock()
		p.core.txListener, p.core.txGroup = p.cfg.txListener, p.cfg.group
		p.core.mu.Unlock()
		// NB: a transactional producer heartbeats every broker of the
		// auto-create template's route (as Java's, whose publish table
		// starts with it), so that a broker holding undecided half
		// messages of its group can ask it after a restart, before it
		// sends again.
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.callTimeout)
		if _, err := p.core.routes.get(ctx, p.cfg.createTopicKey); err != nil {
			p.core.log.Warn("client: transactional producer: no route of "+p.cfg.createTopicKey+
				"; it is known to the brokers of the topics it sends to only", "err", err)
		}
		cancel()
		kick(p.core.hbKick) // NB: buffered: the heartbeat loop takes it once started
	}
	p.core.start()
	p.state = stateStarted
	return nil
}

// Close waits for the SendAsync calls in flight (each bounded by its own
// context and the send timeout), tells the brokers the producer is gone
// and closes every connection. Later sends fail with ErrClosed. Close is
// idempotent.
func (p *Producer) Close() error {
	p.mu.Lock()
	was := p.state
	p.state = stateClosed
	p.mu.Unlock()
	if was == stateClosed {
		return nil
	}
	p.async.Wait()
	p.workers.stop()
	if was == stateStarted {
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.callTimeout)
		p.core.unregister(ctx, p.cfg.group, "", p.core.routes.topicNames())
		cancel()
	}
	p.core.stop()
	return nil
}

func (p *Producer) checkStarted() error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	switch p.state {
	case stateNew:
		return ErrNotStarted
	case stateClosed:
		return ErrClosed
	}
	return nil
}

// Send sends m and waits for the broker's answer. ctx bounds the whole
// send, retries included; each attempt is also bounded by the send timeout.
// A failed attempt is retried (WithRetries) on another queue, preferably of
// another broker; SYSTEM_BUSY is retried with backoff until ctx ends.
// FLUSH_DISK_TIMEOUT and the slave codes count as sent: see
// SendResult.Status.
func (p *Producer) Send(ctx context.Context, m *Message) (SendResult, error) {
	if err := p.checkStarted(); err != nil {
		return SendResult{}, err
	}
	o, err := p.prepare(m)
	if err != nil {
		return SendResult{}, err
	}
	return p.send(ctx, o, false)
}

// SendAsync sends m and calls cb with the outcome of Send. At most
// WithAsyncInflight sends wait for their answer; SendAsync blocks while
// that many do. If m is invalid, or ctx ends or the producer closes before
// the send could start, cb runs on the calling goroutine with the error.
// Otherwise cb runs on a goroutine of the producer; callbacks of sends
// answered together run one after another on one goroutine, so a slow cb
// delays the others (hand long work off). Close waits for the callbacks.
func (p *Producer) SendAsync(ctx context.Context, m *Message, cb func(SendResult, error)) {
	if cb == nil {
		cb = func(SendResult, error) {}
	}
	o, err := p.prepare(m)
	if err != nil {
		cb(SendResult{}, err)
		return
	}
	p.sendAsync(ctx, o, cb)
}

// SendBatchAsync is SendBatch on a goroutine of the producer, as SendAsync
// is Send: a batch counts as one send against WithAsyncInflight.
func (p *Producer) SendBatchAsync(ctx context.Context, msgs []*Message, cb func(SendResult, error)) {
	if cb == nil {
		cb = func(SendResult, error) {}
	}
	o, err := p.prepareBatch(msgs)
	if err != nil {
		cb(SendResult{}, err)
		return
	}
	p.sendAsync(ctx, o, cb)
}

func (p *Producer) sendAsync(ctx context.Context, o *outgoing, cb func(SendResult, error)) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		cb(SendResult{}, ctx.Err())
		return
	}
	p.mu.RLock()
	state := p.state
	if state == stateStarted {
		p.async.Add(1)
	}
	p.mu.RUnlock()
	if state != stateStarted {
		<-p.sem
		if state == stateNew {
			cb(SendResult{}, ErrNotStarted)
		} else {
			cb(SendResult{}, ErrClosed)
		}
		return
	}
	// NB: the in-flight slot is freed before cb runs, so that a callback
	// may send again without waiting for the callbacks queued behind it.
	done := func(res SendResult, err error) {
		o.recycle()
		<-p.sem
		defer p.async.Done()
		cb(res, err)
	}
	if p.batcher != nil && p.batcher.batchable(o) && p.sendAutoBatched(ctx, o, done) {
		return
	}
	p.launch(ctx, o, done)
}

// launch runs the attempts of o and calls done with the outcome: the first
// attempt inline when it can, the rest on a worker.
func (p *Producer) launch(ctx context.Context, o *outgoing, done func(SendResult, error)) {
	o.async = true
	if p.tryAsyncFirst(ctx, o, done) {
		p.inlineFirst.Add(1)
		return
	}
	p.workers.run(func() { done(p.send(ctx, o, false)) })
}

// SendOneway sends m without waiting for the broker's answer: it returns
// once the request is written. Only connection failures are retried.
func (p *Producer) SendOneway(ctx context.Context, m *Message) error {
	if err := p.checkStarted(); err != nil {
		return err
	}
	o, err := p.prepare(m)
	if err != nil {
		return err
	}
	_, err = p.send(ctx, o, true)
	return err
}

// SendBatch sends msgs as one SEND_BATCH_MESSAGE to one queue: they are
// stored consecutively in that queue. All must have the same topic and no
// delay level; batches are not compressed. The queue is picked for
// msgs[0]. The result's MsgID and OffsetMsgID are comma-joined lists in
// message order.
func (p *Producer) SendBatch(ctx context.Context, msgs []*Message) (SendResult, error) {
	if err := p.checkStarted(); err != nil {
		return SendResult{}, err
	}
	o, err := p.prepareBatch(msgs)
	if err != nil {
		return SendResult{}, err
	}
	defer o.recycle()
	return p.send(ctx, o, false)
}

// outgoing is a message (or batch) encoded for the wire, ready for any
// number of attempts.
type outgoing struct {
	m        *Message // for the selector
	topic    string
	body     []byte
	sysFlag  int32
	flag     int32
	props    string
	ids      []string
	id1      [1]string // ids' array for a single message (no allocation of its own)
	batch    bool
	reply    bool   // a request-reply reply (MSG_TYPE reply): SEND_REPLY_MESSAGE_V2
	async    bool   // sent by launch (SendAsync, SendBatchAsync, auto-batched): over the queue's lane (request.lane)
	group    string // producer group in the header
	reconsum int32
	maxRecon *int32
	first    *MessageQueue // the queue of the first attempt, when chosen already
	pooled   bool          // body is from batchBufs: recycle it once the send has ended
	// refs counts who may still read a pooled body: its outcome (1, from
	// the start) and writes in progress (hold); the last to let go
	// (recycle, drop) recycles it.
	refs atomic.Int32
	// noReuse: an attempt failed on its connection, whose buffers may
	// still reference the body; the garbage collector takes it.
	noReuse atomic.Bool
}

// batchBufs holds batch bodies for reuse: a batch body is as large as its
// members together, and allocating (and zeroing) one per batch was a
// tenth of a batch sender's CPU.
var batchBufs sync.Pool

// maxPooledBatch bounds the bodies batchBufs keeps.
const maxPooledBatch = 4 << 20

// pooledBody gives o the pooled body b: its outcome holds it.
func (o *outgoing) pooledBody(b []byte) {
	o.body, o.pooled = b, true
	o.refs.Store(1)
}

// hold marks a write of o's body in progress: an inline first attempt
// writes on the caller's goroutine, and its call can be completed (timed
// out, canceled) while the write still blocks.
func (o *outgoing) hold() {
	if o.pooled {
		o.refs.Add(1)
	}
}

// recycle lets go of o's body once its final outcome is known; drop, once
// a write that held it has returned. The last one returns the body to
// batchBufs.
func (o *outgoing) recycle() { o.drop() }

func (o *outgoing) drop() {
	if !o.pooled || o.refs.Add(-1) != 0 {
		return
	}
	if cap(o.body) <= maxPooledBatch && !o.noReuse.Load() {
		b := o.body[:0]
		batchBufs.Put(&b)
	}
	o.body = nil
}

// batchItem is o (a single message) as a member of a batch body.
func (o *outgoing) batchItem() message.BatchItem {
	return message.BatchItem{Flag: o.flag, Body: o.body, Properties: o.props}
}

// batchBody encodes items as a SEND_BATCH_MESSAGE body, in a buffer from
// batchBufs (or one allocation): the caller recycles it (outgoing.pooled).
func batchBody(items []message.BatchItem) ([]byte, error) {
	size := 0
	for _, it := range items {
		size += message.BatchItemSize(it)
	}
	var buf []byte
	if bp, ok := batchBufs.Get().(*[]byte); ok && cap(*bp) >= size {
		buf = (*bp)[:0]
	} else {
		buf = make([]byte, 0, size)
	}
	return message.AppendBatch(buf, items)
}

func checkTopic(topic string) error {
	if topic == "" {
		return invalidMessage("empty topic")
	}
	if len(topic) > message.MaxTopicLen {
		return invalidMessage("topic %q is %d bytes, the limit is %d", topic, len(topic), message.MaxTopicLen)
	}
	for _, r := range topic {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("%|_-", r)) {
			return invalidMessage("topic %q has a character outside [%%|a-zA-Z0-9_-]", topic)
		}
	}
	return nil
}

// prepare validates m, gives it an id, and encodes properties and body.
func (p *Producer) prepare(m *Message) (*outgoing, error) {
	if m == nil {
		return nil, invalidMessage("nil message")
	}
	if err := checkTopic(m.Topic); err != nil {
		return nil, err
	}
	if len(m.Body) == 0 {
		return nil, invalidMessage("empty body")
	}
	if len(m.Body) > p.cfg.maxBodySize {
		return nil, invalidMessage("body is %d bytes, the limit is %d", len(m.Body), p.cfg.maxBodySize)
	}
	if m.DelayLevel > 0 && !m.DeliverAt.IsZero() {
		return nil, invalidMessage("set a delay level or a delivery time, not both")
	}
	props, id, err := m.sendProperties(m.MsgID, p.core.ids)
	if err != nil {
		return nil, err
	}
	o := &outgoing{m: m, topic: m.Topic, body: m.Body, flag: m.Flag, props: props, id1: [1]string{id}, group: p.cfg.group,
		reply: m.Properties[message.PropMsgType] == replyMsgType}
	o.ids = o.id1[:]
	if p.cfg.compressOver > 0 && len(m.Body) >= p.cfg.compressOver {
		if c, err := message.Compress(m.Body, p.cfg.compressLevel); err == nil && len(c) < len(m.Body) {
			o.body, o.sysFlag = c, message.FlagCompressed
		}
	}
	return o, nil
}

// prepareBatch validates and encodes a batch body; every member gets an id.
func (p *Producer) prepareBatch(msgs []*Message) (*outgoing, error) {
	if len(msgs) == 0 {
		return nil, invalidMessage("empty batch")
	}
	topic := msgs[0].Topic
	if err := checkTopic(topic); err != nil {
		return nil, err
	}
	if strings.HasPrefix(topic, retryPrefix) {
		return nil, invalidMessage("a batch cannot go to the retry topic %s", topic)
	}
	items := make([]message.BatchItem, len(msgs))
	ids := make([]string, len(msgs))
	var all strings.Builder
	// NB: sized for the UNIQ_KEY pairs; more properties grow it.
	all.Grow(len(msgs) * (len(message.PropUniqKey) + message.UniqIDLen + 2))
	// Member i's properties start at at[2*i], its fresh id at at[2*i+1]
	// (or -1).
	at := make([]int, 2*len(msgs)+1)
	for i, m := range msgs {
		switch {
		case m == nil:
			return nil, invalidMessage("batch member %d is nil", i)
		case m.Topic != topic:
			return nil, invalidMessage("batch member %d has topic %q, the batch is for %q", i, m.Topic, topic)
		case m.DelayLevel > 0 || !m.DeliverAt.IsZero():
			return nil, invalidMessage("batch member %d has a delay level or a delivery time; batches cannot be delayed", i)
		case len(m.Body) == 0:
			return nil, invalidMessage("batch member %d has an empty body", i)
		}
		var err error
		at[2*i] = all.Len()
		ids[i], at[2*i+1], err = m.appendSendProperties(&all, m.MsgID, p.core.ids)
		if err != nil {
			return nil, fmt.Errorf("batch member %d: %w", i, err)
		}
		items[i] = message.BatchItem{Flag: m.Flag, Body: m.Body}
	}
	// NB: the members' properties and fresh ids are cut from one string:
	// one allocation for the batch, not two per member.
	at[2*len(msgs)] = all.Len()
	props := all.String()
	for i := range items {
		items[i].Properties = props[at[2*i]:at[2*i+2]]
		if idAt := at[2*i+1]; idAt >= 0 {
			ids[i] = props[idAt : idAt+message.UniqIDLen]
		}
	}
	body, err := batchBody(items)
	if err != nil {
		return nil, invalidMessage("%v", err)
	}
	if len(body) > p.cfg.maxBodySize {
		return nil, invalidMessage("batch body is %d bytes, the limit is %d", len(body), p.cfg.maxBodySize)
	}
	o := &outgoing{m: msgs[0], topic: topic, ids: ids, batch: true, group: p.cfg.group}
	o.pooledBody(body)
	return o, nil
}

// sleepCtx waits d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
