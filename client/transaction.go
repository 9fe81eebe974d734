package client

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// Transactional messages (RocketMQ's): SendInTransaction stores the
// message as a half message, invisible to consumers, runs the local
// transaction, and tells the broker to commit (deliver) or roll back
// (drop) it (END_TRANSACTION). A half message left undecided (the local
// transaction's state unknown, the producer gone before it decided) makes
// the broker ask a producer of the group later (CHECK_TRANSACTION_STATE),
// which answers with its listener's CheckLocal.

// TransactionState is a local transaction's outcome.
type TransactionState int

const (
	// TransactionCommit delivers the half message.
	TransactionCommit TransactionState = iota
	// TransactionRollback drops it.
	TransactionRollback
	// TransactionUnknown leaves it undecided: the broker asks CheckLocal
	// later.
	TransactionUnknown
)

func (s TransactionState) String() string {
	switch s {
	case TransactionCommit:
		return "COMMIT"
	case TransactionRollback:
		return "ROLLBACK"
	}
	return "UNKNOWN"
}

// TransactionListener runs and checks the local transactions of a
// transactional producer (WithTransactionListener). A panic in either
// counts as TransactionUnknown.
type TransactionListener interface {
	// ExecuteLocal runs the local transaction of m, which the broker holds
	// as a half message.
	ExecuteLocal(ctx context.Context, m *Message) TransactionState
	// CheckLocal returns the state of m's local transaction when the
	// broker asks about an undecided half message. m is the message as
	// stored (its MsgID is the one SendInTransaction returned). It is not
	// called while this producer's ExecuteLocal of m runs, and is bounded
	// by the call timeout (WithCallTimeout), nor for a message this
	// producer decided in the last minute (by ExecuteLocal or an earlier
	// CheckLocal): the broker can ask before the decision reached it, and
	// is answered with that decision.
	CheckLocal(ctx context.Context, m *Message) TransactionState
}

// WithTransactionListener makes a producer transactional: it can
// SendInTransaction, and it answers the brokers' checks of its group's
// undecided half messages. Give the producers of one group the same
// listener logic, with WithGroup: a check goes to any of them.
func WithTransactionListener(l TransactionListener) Option {
	return func(c *config) { c.txListener = l }
}

// TransactionResult is what SendInTransaction did.
type TransactionResult struct {
	SendResult
	// State is the local transaction's outcome, told to the broker. A half
	// message whose store was not confirmed as the producer asked
	// (SendResult.Status not SendOK: a flush or replication timeout) is
	// rolled back without running the local transaction, as the official
	// clients do.
	State TransactionState
}

// SendInTransaction sends m as a half message, runs the listener's
// ExecuteLocal with it (MsgID set to the half message's id; m itself is not
// changed) once the broker stored it, and commits or rolls back m
// accordingly, waiting for the broker's answer to a commit or a rollback:
// a committed message is in its queue when SendInTransaction returns, so
// transactional messages sent one after another to a queue keep their
// order. An error means ExecuteLocal did not run. Delay levels and
// delivery times are refused, as RocketMQ does. The decision goes out
// within the send timeout, whatever ctx does meanwhile; if it cannot reach
// the broker, the broker asks CheckLocal later. While ExecuteLocal runs,
// the broker's checks of that message are not answered: CheckLocal never
// overlaps its own transaction.
func (p *Producer) SendInTransaction(ctx context.Context, m *Message) (TransactionResult, error) {
	if err := p.checkStarted(); err != nil {
		return TransactionResult{}, err
	}
	l := p.cfg.txListener
	if l == nil {
		return TransactionResult{}, invalidOption("SendInTransaction needs a producer made with WithTransactionListener")
	}
	if m == nil {
		return TransactionResult{}, invalidMessage("nil message")
	}
	if m.DelayLevel > 0 || !m.DeliverAt.IsZero() {
		return TransactionResult{}, invalidMessage("a transactional message cannot be delayed")
	}
	half := m.cloneWith(message.PropTranMsg, "true", message.PropProducerGroup, p.cfg.group)
	o, err := p.prepare(half)
	if err != nil {
		return TransactionResult{}, err
	}
	o.sysFlag |= message.TxPrepared
	// NB: marked before the send: a check of this message that comes
	// before the decision is not answered (see onCheckTransaction).
	id := o.ids[0]
	p.core.txClaim(id) // NB: a fresh id: always claimed
	defer p.core.txRelease(id)
	res, err := p.send(ctx, o, false)
	if err != nil {
		return TransactionResult{}, err
	}
	_, off, err := message.ParseOffsetMsgID(res.OffsetMsgID)
	if err != nil {
		return TransactionResult{}, fmt.Errorf("client: half message stored with a bad offset id %q: %w", res.OffsetMsgID, err)
	}
	out := TransactionResult{SendResult: res, State: TransactionRollback}
	if res.Status == SendOK {
		local := *m
		local.MsgID = res.MsgID
		out.State = runListener(func() TransactionState { return l.ExecuteLocal(ctx, &local) })
	}
	if out.State != TransactionUnknown {
		p.core.txRemember(id, out.State) // NB: before the claim ends: a check from now on gets this answer
	}
	h := &protocol.EndTransactionRequestHeader{ProducerGroup: p.cfg.group, TranStateTableOffset: res.QueueOffset,
		CommitLogOffset: off, CommitOrRollback: txType(out.State), MsgID: res.MsgID, TransactionID: res.MsgID,
		BrokerName: res.Queue.BrokerName}
	if addr, ok := p.core.routes.brokerAddr(res.Queue.BrokerName); ok {
		// NB: not ctx: a local transaction that outlived the caller's
		// deadline still gets its decision to the broker.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.sendTimeout)
		r := request{code: protocol.EndTransaction, ext: protocol.Ext(h)}
		if out.State == TransactionUnknown {
			err = p.core.tr.oneway(cctx, addr, r) // NB: RocketMQ's brokers do not answer "no decision"
		} else {
			// NB: a commit is awaited, as RocketMQ 5's clients do, so
			// that the producer's next message of the queue cannot be
			// stored before this one (a one-way decision could be).
			_, err = p.core.tr.call(cctx, addr, r)
		}
		cancel()
	} else {
		err = fmt.Errorf("%w: no address for broker %s", ErrNoRoute, res.Queue.BrokerName)
	}
	if err != nil {
		// NB: the half message stays undecided: the broker checks back.
		p.core.log.Warn("client: END_TRANSACTION not delivered; the broker will ask CheckLocal",
			"msg_id", res.MsgID, "state", out.State, "err", err)
	}
	return out, nil
}

// txType is the END_TRANSACTION commitOrRollback of a state.
func txType(s TransactionState) int32 {
	switch s {
	case TransactionCommit:
		return message.TxCommit
	case TransactionRollback:
		return message.TxRollback
	}
	return message.TxNot
}

// runListener runs f, a panic counting as TransactionUnknown.
func runListener(f func() TransactionState) (s TransactionState) {
	defer func() {
		if r := recover(); r != nil {
			s = TransactionUnknown
		}
	}()
	return f()
}

// onCheckTransaction serves CHECK_TRANSACTION_STATE: the broker asks about
// an undecided half message of this producer's group; the listener's
// CheckLocal answers, with END_TRANSACTION on the same connection.
func (c *core) onCheckTransaction(req *remoting.Command, conn *remoting.Conn) {
	var h protocol.CheckTransactionStateRequestHeader
	if err := h.FromExt(req.ExtMap()); err != nil {
		c.log.Warn("client: bad CHECK_TRANSACTION_STATE", "err", err)
		return
	}
	c.mu.Lock()
	l, group := c.txListener, c.txGroup
	c.mu.Unlock()
	msgs, err := decodeRecords(req.Body, "", c.cfg.maxBodySize)
	if err != nil || len(msgs) != 1 || l == nil || conn == nil {
		c.log.Warn("client: cannot answer CHECK_TRANSACTION_STATE", "listener", l != nil, "err", err)
		return
	}
	m := msgs[0]
	if g := m.Properties[message.PropProducerGroup]; g != group {
		c.log.Warn("client: CHECK_TRANSACTION_STATE for another producer group", "group", g, "mine", group)
		return
	}
	if h.MsgID == "" {
		h.MsgID = m.MsgID // NB: as the official client, from the message when the header has none
	}
	if h.TransactionID == "" {
		h.TransactionID = m.MsgID
	}
	if !c.txClaim(m.MsgID) {
		return // its ExecuteLocal, or another check of it, is running: the broker asks again
	}
	ctx, cancel := c.quitCtx()
	defer cancel()
	// NB: a check of a message this producer decided lately (the broker
	// asked before the decision reached it) gets that decision, without
	// CheckLocal.
	state, known := c.txDecisionOf(m.MsgID)
	if !known {
		checkCtx, cancelCheck := c.callCtx(ctx)
		state = runListener(func() TransactionState { return l.CheckLocal(checkCtx, m) })
		cancelCheck()
		if state != TransactionUnknown {
			c.txRemember(m.MsgID, state)
		}
	}
	// NB: released before the answer goes: a check that follows it (the
	// broker's next, or one that crossed it) gets the decision remembered
	// instead of being dropped as running (TestTransaction_LateCheck-
	// GetsTheDecision lost its second check so under load)
	c.txRelease(m.MsgID)
	if state == TransactionUnknown {
		return // NB: the broker asks again at its next check
	}
	end := &protocol.EndTransactionRequestHeader{ProducerGroup: group, TranStateTableOffset: h.TranStateTableOffset,
		CommitLogOffset: h.CommitLogOffset, CommitOrRollback: txType(state), FromTransactionCheck: true,
		MsgID: h.MsgID, TransactionID: h.TransactionID}
	cctx, cancel2 := c.callCtx(ctx)
	defer cancel2()
	if _, err := conn.Invoke(cctx, remoting.NewRequest(protocol.EndTransaction, protocol.Ext(end), nil), remoting.Oneway()); err != nil {
		c.log.Warn("client: END_TRANSACTION after a check", "msg_id", h.MsgID, "err", err)
	}
}

// txClaim marks id as having its local transaction or a check running,
// and reports false when it already had one.
func (c *core) txClaim(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.txBusy[id] {
		return false
	}
	c.txBusy[id] = true
	return true
}

// txRelease ends what txClaim marked.
func (c *core) txRelease(id string) {
	c.mu.Lock()
	delete(c.txBusy, id)
	c.mu.Unlock()
}

// A producer remembers the decisions it sent for txMemory, at most
// txMemoryMax of them (the oldest are forgotten first): a check of one
// of them is answered with it.
const (
	txMemory    = time.Minute
	txMemoryMax = 1 << 16
)

// txDecision is a decision remembered, and when.
type txDecision struct {
	state TransactionState
	at    time.Time
}

// txDecided is an entry of txDecidedOrder.
type txDecided struct {
	id string
	at time.Time
}

// txRemember records that this producer decided id's half message.
func (c *core) txRemember(id string, s TransactionState) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.txDecidedOrder) > 0 {
		old := c.txDecidedOrder[0]
		if len(c.txDecidedOrder) < txMemoryMax && now.Sub(old.at) < txMemory {
			break
		}
		if c.txDecided[old.id].at.Equal(old.at) {
			delete(c.txDecided, old.id) // NB: not when decided again since
		}
		c.txDecidedOrder = c.txDecidedOrder[1:]
	}
	c.txDecided[id] = txDecision{s, now}
	c.txDecidedOrder = append(c.txDecidedOrder, txDecided{id, now})
}

// txDecisionOf returns the decision this producer sent lately for id's
// half message, if any.
func (c *core) txDecisionOf(id string) (TransactionState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.txDecided[id]
	if !ok || time.Since(d.at) >= txMemory {
		return TransactionUnknown, false
	}
	return d.state, true
}
