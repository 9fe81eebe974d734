package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// retryableCodes are the answers after which a send is retried on another
// queue (the Go client's set, spec §3.1).
var retryableCodes = []Code{CodeTopicNotExist, CodeServiceNotAvailable, CodeSystemError, CodeNoPermission}

// sendTarget is a route to publish to, and whether it is borrowed from the
// auto-create template (TBW102) because the topic does not exist yet.
type sendTarget struct {
	route    *topicRoute
	template bool
}

// publishRoute returns the route to send to topic. A topic no name server
// knows is sent through the template topic's brokers, capped at the
// default queue count, so that the broker creates it (spec §5.1).
func (p *Producer) publishRoute(ctx context.Context, topic string, refresh bool) (sendTarget, error) {
	routes := p.core.routes
	if !refresh {
		if r := routes.cached(topic); r != nil && len(r.write) > 0 {
			return sendTarget{route: r}, nil
		}
		if r := p.derivedRoute(topic); r != nil {
			return sendTarget{route: r, template: true}, nil
		}
	}
	r, err := routes.refresh(ctx, topic)
	if err == nil && len(r.write) > 0 {
		return sendTarget{route: r}, nil
	}
	if err == nil {
		// NB: the topic exists: its template is no way around what
		// keeps it from taking sends.
		return sendTarget{}, notWritable(topic, r)
	}
	if !errors.Is(err, ErrTopicNotExist) {
		return sendTarget{}, err
	}
	tpl, terr := routes.get(ctx, p.cfg.createTopicKey)
	if terr != nil || len(tpl.write) == 0 {
		return sendTarget{}, fmt.Errorf("%w %s: the topic does not exist and the template topic %s has no writable queue",
			ErrNoRoute, topic, p.cfg.createTopicKey)
	}
	derived := &topicRoute{data: tpl.data, addrs: tpl.addrs, all: tpl.all}
	for _, q := range tpl.write {
		if q.QueueID < p.cfg.defaultQueueNums {
			derived.write = append(derived.write, MessageQueue{Topic: topic, BrokerName: q.BrokerName, QueueID: q.QueueID})
		}
	}
	// NB: kept a moment, so that a burst of sends to a new topic asks the
	// name servers again once a moment, not once per send, until the
	// topic's own route appears.
	p.derived.Store(topic, derivedRoute{route: derived, until: time.Now().Add(derivedRouteTTL)})
	return sendTarget{route: derived, template: true}, nil
}

// notWritable says why a topic the name servers know has no queue a send
// can go to: its broker groups have no master (only slaves registered), or
// its queues do not take writes.
func notWritable(topic string, r *topicRoute) error {
	var masterless, readOnly []string
	for _, q := range r.data.QueueDatas {
		switch {
		case q.Perm&protocol.PermWrite == 0 || q.WriteQueueNums <= 0:
			readOnly = append(readOnly, q.BrokerName)
		case r.addrs[q.BrokerName] == "":
			masterless = append(masterless, q.BrokerName)
		}
	}
	slices.Sort(masterless)
	slices.Sort(readOnly)
	var why []string
	if len(masterless) > 0 {
		why = append(why, fmt.Sprintf("broker group %s has no master (only its slaves are registered: the master is down); "+
			"sends fail until it returns or a slave is promoted, consumers read from the slaves meanwhile",
			strings.Join(masterless, ", ")))
	}
	if len(readOnly) > 0 {
		why = append(why, fmt.Sprintf("its queues on %s take no writes (permission or write queue count)", strings.Join(readOnly, ", ")))
	}
	if len(why) == 0 {
		why = append(why, "its route lists no queue")
	}
	return fmt.Errorf("%w %s: the topic exists but no queue takes sends: %s", ErrNoRoute, topic, strings.Join(why, "; "))
}

// derivedRouteTTL is how long a route borrowed from the template topic is
// used before the name servers are asked for the topic's own again.
const derivedRouteTTL = 500 * time.Millisecond

type derivedRoute struct {
	route *topicRoute
	until time.Time
}

// derivedRoute returns the template-derived route of topic while it is
// fresh, or nil. Once it is stale, one caller gets nil and asks the name
// servers again; the others keep the derived route meanwhile.
// NB: deleting the stale entry instead made every send in flight at that
// moment ask, until one answer stored a new entry (132 asks in 0.8 s of a
// burst of async sends, in a loaded CI run).
func (p *Producer) derivedRoute(topic string) *topicRoute {
	v, ok := p.derived.Load(topic)
	if !ok {
		return nil
	}
	d := v.(derivedRoute)
	if now := time.Now(); now.After(d.until) {
		if p.derived.CompareAndSwap(topic, v, derivedRoute{route: d.route, until: now.Add(derivedRouteTTL)}) {
			return nil // NB: this caller asks (publishRoute)
		}
	}
	return d.route
}

// pick selects the queue for an attempt. lastBroker is the broker the
// previous attempt failed on.
func (p *Producer) pick(o *outgoing, r *topicRoute, lastBroker string) (MessageQueue, error) {
	_, aware := p.sel.(faultAware)
	// NB: a queue chosen before (a batch's) is kept unless the selector
	// avoids faulty brokers and that one has failed since.
	if o.first != nil && lastBroker == "" && slices.Contains(r.write, *o.first) &&
		!(aware && p.cfg.faultAvoidance && p.faults.avoided(o.first.BrokerName)) {
		return *o.first, nil
	}
	qs := r.write
	if aware && (p.cfg.faultAvoidance || lastBroker != "") {
		if p.cfg.faultAvoidance {
			qs = p.faults.candidates(qs, lastBroker)
		} else {
			qs = (&faultTracker{}).candidates(qs, lastBroker)
		}
	}
	q := p.sel.Select(o.m, qs)
	if !slices.Contains(r.write, q) {
		return q, fmt.Errorf("%w: the selector chose %s, which is not a writable queue of %s", ErrNoRoute, q, o.topic)
	}
	return q, nil
}

// sendState is what the attempts of one send have learned so far.
type sendState struct {
	deadline   time.Time
	lastBroker string
	lastErr    error
	failures   int
	backoff    time.Duration
	refresh    bool
}

// NB: without a caller's deadline, a send is bounded by a deadline checked
// between attempts and handed to each attempt, not by a context with a
// timer (a cost per message that showed in profiles).
func (p *Producer) newSendState(ctx context.Context) *sendState {
	return &sendState{deadline: p.sendDeadline(ctx, time.Now()), backoff: p.cfg.busyBackoff}
}

// sendDeadline is ctx's deadline, or the producer's bound on a send.
func (p *Producer) sendDeadline(ctx context.Context, now time.Time) time.Time {
	if deadline, ok := ctx.Deadline(); ok {
		return deadline
	}
	return now.Add(p.cfg.sendTimeout*time.Duration(p.cfg.retries+1) + p.cfg.busyRetryDeadline)
}

// attemptTimeout bounds the next attempt, starting now.
func (p *Producer) attemptTimeout(st *sendState, now time.Time) time.Duration {
	return min(p.cfg.sendTimeout, st.deadline.Sub(now))
}

// send runs the attempts of one send: retries on another queue for
// connection failures and retryable codes, backoff for SYSTEM_BUSY.
func (p *Producer) send(ctx context.Context, o *outgoing, oneway bool) (SendResult, error) {
	return p.sendFrom(ctx, o, oneway, p.newSendState(ctx))
}

// sendFrom runs the attempts of a send from state st.
func (p *Producer) sendFrom(ctx context.Context, o *outgoing, oneway bool, st *sendState) (SendResult, error) {
	for {
		err := ctx.Err()
		if err == nil && !time.Now().Before(st.deadline) {
			err = context.DeadlineExceeded
		}
		if err != nil {
			if st.lastErr != nil {
				return SendResult{}, fmt.Errorf("%w (gave up: %w)", st.lastErr, err)
			}
			return SendResult{}, err
		}
		target, err := p.publishRoute(ctx, o.topic, st.refresh)
		if err != nil {
			return SendResult{}, err
		}
		st.refresh = false
		q, err := p.pick(o, target.route, st.lastBroker)
		if err != nil {
			return SendResult{}, err
		}
		addr := target.route.addrs[q.BrokerName]
		start := time.Now() // NB: also the born timestamp and the call's deadline
		res, err := p.attempt(ctx, addr, q, o, oneway, start, p.attemptTimeout(st, start))
		if err == nil {
			p.faults.record(q.BrokerName, time.Since(start), false)
			return res, nil
		}
		if final := p.afterFailure(ctx, st, o, q, addr, start, err); final != nil {
			return SendResult{}, final
		}
	}
}

// afterFailure records the failed attempt (see failed) and waits the
// backoff it asks for. It returns the error the send ends with, or nil when
// the next attempt may go.
func (p *Producer) afterFailure(ctx context.Context, st *sendState, o *outgoing, q MessageQueue, addr string, start time.Time, err error) error {
	wait, final := p.failed(ctx, st, o, q, addr, start, err)
	if final != nil {
		return final
	}
	if wait > 0 {
		if serr := sleepCtx(ctx, wait); serr != nil {
			return fmt.Errorf("%w (gave up: %w)", err, serr)
		}
	}
	return nil
}

// failed records the failed attempt of o on q (at addr, started at start)
// in st. It returns the error the send ends with, or nil and how long to
// wait before the next attempt.
func (p *Producer) failed(ctx context.Context, st *sendState, o *outgoing, q MessageQueue, addr string, start time.Time, err error) (time.Duration, error) {
	if errors.Is(err, ErrClosed) || errors.Is(err, context.Canceled) {
		return 0, err
	}
	if ctx.Err() != nil || !time.Now().Before(st.deadline) {
		// NB: the caller's deadline cut this attempt short; that is no
		// fault of the broker's. Report what the earlier attempts were
		// answered (a busy broker) before the deadline. A broker that
		// answered nothing may be gone (a master stopped and replaced):
		// the routes are refreshed all the same, for the next send.
		p.core.connFailed(addr, err)
		if st.lastErr != nil {
			return 0, fmt.Errorf("%w (gave up: %w)", st.lastErr, err)
		}
		return 0, err
	}
	st.lastErr, st.lastBroker = err, q.BrokerName
	var be *BrokerError
	switch {
	case errors.As(err, &be) && be.Code == CodeSystemBusy:
		// NB: busy is overload, not failure: no penalty, no retry budget;
		// back off and prefer another broker.
		wait := min(st.backoff, time.Until(st.deadline))
		st.backoff = min(st.backoff*2, p.cfg.busyMaxBackoff)
		return max(wait, time.Nanosecond), nil
	case errors.As(err, &be) && !slices.Contains(retryableCodes, be.Code):
		return 0, err
	case errors.As(err, &be):
		st.refresh = be.Code == CodeTopicNotExist
		if be.Code == CodeServiceNotAvailable {
			// NB: a broker that stopped being its group's master (a
			// failover): the route names the new one within a second.
			p.core.connFailed(addr, err)
		}
	default:
		p.core.connFailed(addr, err)
		o.noReuse.Store(true) // NB: see outgoing.noReuse
	}
	p.faults.record(q.BrokerName, time.Since(start), true)
	st.failures++
	if st.failures > p.cfg.retries {
		return 0, fmt.Errorf("client: send to %s failed after %d attempts: %w", o.topic, st.failures, err)
	}
	return 0, nil
}

// sendRequest is the SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE) of o to q.
func (p *Producer) sendRequest(q MessageQueue, o *outgoing, now time.Time, timeout time.Duration) request {
	h := protocol.SendMessageRequestHeader{
		ProducerGroup: o.group, Topic: o.topic, DefaultTopic: p.cfg.createTopicKey,
		DefaultTopicQueueNums: int32(p.cfg.defaultQueueNums), QueueID: int32(q.QueueID), SysFlag: o.sysFlag,
		BornTimestamp: now.UnixMilli(), Flag: o.flag, Properties: o.props, ReconsumeTimes: o.reconsum,
		MaxReconsumeTimes: o.maxRecon, Batch: o.batch, BrokerName: q.BrokerName,
	}
	v2 := h.V2()
	code := int16(protocol.SendMessageV2)
	switch {
	case o.batch:
		code = protocol.SendBatchMessage
	case o.reply:
		code = protocol.SendReplyMessageV2
	}
	r := request{code: code, hdr: &v2, body: o.body, timeout: timeout, at: now}
	if o.async {
		// NB: async sends only: sync senders (one per connection, or many
		// sharing one) measured no gain from a second connection, and 128
		// producers with a connection each lost 10% with two.
		r.lane = q.QueueID & 1
	}
	return r
}

// attempt sends o once to queue q at addr.
func (p *Producer) attempt(ctx context.Context, addr string, q MessageQueue, o *outgoing, oneway bool, now time.Time, timeout time.Duration) (SendResult, error) {
	if addr == "" {
		// NB: an ordered topic's route lists the queues of its order
		// config, those of a broker without a master too.
		return SendResult{}, fmt.Errorf("%w: broker %s of queue %s has no master (an ordered topic keeps its queues meanwhile)",
			ErrNoRoute, q.BrokerName, q)
	}
	req := p.sendRequest(q, o, now, timeout)
	if oneway {
		actx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return SendResult{}, p.core.tr.oneway(actx, addr, req)
	}
	resp, err := p.core.tr.call(ctx, addr, req, sendOKCodes...)
	if err != nil {
		return SendResult{}, err
	}
	return sendResult(resp, q, o)
}

func sendResult(resp *remoting.Command, q MessageQueue, o *outgoing) (SendResult, error) {
	var rh protocol.SendMessageResponseHeader
	var err error
	if resp.ExtFields == nil && resp.ExtPairs.Valid() {
		err = rh.FromExtPairs(resp.ExtPairs)
	} else {
		err = rh.FromExt(resp.ExtFields)
	}
	if err != nil {
		return SendResult{}, fmt.Errorf("client: bad send response header: %w", err)
	}
	res := SendResult{MsgID: strings.Join(o.ids, ","), OffsetMsgID: rh.MsgID, QueueOffset: rh.QueueOffset,
		Queue:     MessageQueue{Topic: o.topic, BrokerName: q.BrokerName, QueueID: int(rh.QueueID)},
		Duplicate: rh.Duplicates > 0 && int(rh.Duplicates) >= len(o.ids)}
	switch resp.Code {
	case protocol.FlushDiskTimeout:
		res.Status = SendFlushDiskTimeout
	case protocol.FlushSlaveTimeout:
		res.Status = SendFlushSlaveTimeout
	case protocol.SlaveNotAvailable:
		res.Status = SendSlaveNotAvailable
	}
	return res, nil
}
