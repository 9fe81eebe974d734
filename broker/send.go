package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicemq/sluice/broker/store"
	"github.com/sluicemq/sluice/broker/topic"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

const (
	transHalfTopic = "RMQ_SYS_TRANS_HALF_TOPIC"
	defaultRegion  = "DefaultRegion"
	// defaultMaxReconsume is RocketMQ's retryMaxTimes.
	defaultMaxReconsume = 16
)

// reply writes a response with a code and remark.
func reply(w remoting.ResponseWriter, req *remoting.Command, code int16, remark string) {
	_ = w.Write(remoting.NewResponse(req, code, remark))
}

// decodeSendHeader reads the long (10) or one-letter (310, 320) send header.
func decodeSendHeader(req *remoting.Command) (protocol.SendMessageRequestHeader, error) {
	switch req.Code {
	case protocol.SendMessage:
		var h protocol.SendMessageRequestHeader
		err := h.FromExt(req.ExtFields)
		return h, err
	case protocol.SendReplyMessage, protocol.SendReplyMessageV2:
		return protocol.DecodeSendMessageRequestHeader(req.Code, req.ExtMap())
	}
	var v2 protocol.SendMessageRequestHeaderV2
	var err error
	if req.ExtFields == nil && req.ExtPairs.Valid() {
		err = v2.FromExtPairs(req.ExtPairs) // NB: msgpack sends come so
	} else {
		err = v2.FromExt(req.ExtFields)
	}
	return v2.V1(), err
}

// peerAddr is the connection's remote address as a netip.AddrPort (the
// stored BORNHOST).
func peerAddr(w remoting.ResponseWriter) netip.AddrPort {
	if c := w.Conn(); c != nil {
		if ap := c.RemoteAddrPort(); ap.IsValid() {
			return ap
		}
	}
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 0)
}

// handleSend serves SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and
// SEND_BATCH_MESSAGE (320), spec 3.1.
func (b *Broker) handleSend(ctx context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	b.send(ctx, w, req, false)
}

// trySendInline serves a send on the connection's reader when nothing in
// it can block: an existing topic, no retry or transactional redirect
// (they may create topics). The send joins the reader's burst, stored with
// one append once the reader has read all it had (in sync mode each is
// answered by the store's notifier once on disk): under load, many sends
// are answered with one write and no goroutine per send. It declines
// anything else, which the server then runs on the connection's ordered
// executor (remoting's dispatcher keeps a connection's sends in order).
func (b *Broker) trySendInline(ctx context.Context, w remoting.ResponseWriter, req *remoting.Command) bool {
	if w.Conn() == nil {
		return false
	}
	if b.send(ctx, w, req, true) {
		return true
	}
	// NB: the sends this connection sent before it are stored first, as
	// they arrived.
	b.storePendingBurst(w.Conn())
	return false
}

// storePendingBurst stores the sends gathered from c so far.
// REQUIRES: on c's reader (an InlineHandler).
func (b *Broker) storePendingBurst(c *remoting.Conn) {
	if v, ok := b.bursts.Load(c); ok {
		b.storeBurst(v.(*sendBurst))
	}
}

// monoEpoch is the origin of monoNow.
var monoEpoch = time.Now()

// monoNow reads the monotonic clock only: half the cost of time.Now (60
// ns on this VM), for latency metrics.
func monoNow() time.Duration { return time.Since(monoEpoch) }

// send serves SEND_MESSAGE, V2 and batch. Every send is stored with
// store.Submit before send returns, so a connection's sends are stored in
// the order it serves them, and answered from the put's Done. Inline, it
// returns false without answering where it would have to block (see
// trySendInline).
func (b *Broker) send(ctx context.Context, w remoting.ResponseWriter, req *remoting.Command, inline bool) bool {
	burst, start := b.sendStart(w, inline)
	h, err := decodeSendHeader(req)
	if err != nil {
		reply(w, req, protocol.SystemError, "bad send header: "+err.Error())
		return true
	}
	var cfg topic.Config
	if inline {
		// NB: the config read here is the one used: a topic deleted
		// meanwhile must not be auto-created on the reader.
		c, ok := b.topics.Get(h.Topic)
		if !ok || strings.HasPrefix(h.Topic, topic.RetryPrefix) || message.TxType(h.SysFlag) != message.TxNot {
			return false
		}
		cfg = c
	}
	if b.isSlave() {
		// NB: before anything that could create a topic on a replica.
		reply(w, req, protocol.ServiceNotAvailable, fmt.Sprintf("broker %s is a slave, not its group's master now: send to the master", b.cfg.BrokerName))
		return true
	}
	if systemTopics[h.Topic] {
		reply(w, req, protocol.NoPermission, fmt.Sprintf("sending to the system topic %s is not allowed", h.Topic))
		return true
	}
	if !inline {
		var code int16
		var remark string
		if cfg, code, remark = b.topicForSend(h.Topic, h.DefaultTopic, h.DefaultTopicQueueNums); code != protocol.Success {
			reply(w, req, code, remark)
			return true
		}
	}
	if !cfg.Writable() {
		reply(w, req, protocol.NoPermission, fmt.Sprintf("topic %s is not writable on broker %s (perm %d)", h.Topic, b.cfg.BrokerName, cfg.Perm))
		return true
	}
	if h.QueueID < 0 {
		h.QueueID = rand.Int32N(max(cfg.WriteQueueNums, 1))
	} else if h.QueueID >= cfg.Queues() {
		reply(w, req, protocol.SystemError, fmt.Sprintf("queueId %d out of range: topic %s has %d queues on broker %s",
			h.QueueID, h.Topic, cfg.Queues(), b.cfg.BrokerName))
		return true
	}
	// Flow control: at most send_queue_size sends wait for the store (or,
	// in sync mode, for the disk; as SYNC_MASTER, for a slave); the rest
	// are told to back off (SYSTEM_BUSY is retried by clients). An inline
	// send in async mode waits for nothing.
	release := func() {}
	isReply := req.Code == protocol.SendReplyMessage || req.Code == protocol.SendReplyMessageV2
	if (!inline || b.cfg.Store.SyncFlush() || b.cfg.Role == conf.RoleSyncMaster) && !isReply {
		select {
		case b.sendSem <- struct{}{}:
			release = func() { <-b.sendSem }
		default:
			b.stats.busy.Add(1)
			reply(w, req, protocol.SystemBusy, fmt.Sprintf(
				"broker %s busy: %d sends already waiting for the store (send_queue_size); retry after a short backoff",
				b.cfg.BrokerName, cap(b.sendSem)))
			return true
		}
	}
	if req.Code == protocol.SendBatchMessage {
		return b.sendBatch(ctx, w, req, h, burst, start, release)
	}
	op := &sendOp{m: message.Message{
		Topic: h.Topic, QueueID: h.QueueID, Flag: h.Flag, SysFlag: h.SysFlag, BornTimestamp: h.BornTimestamp,
		BornHost: peerAddr(w), StoreHost: b.storeHost, ReconsumeTimes: h.ReconsumeTimes,
		Body: req.Body, Properties: h.Properties,
	}, b: b, w: w, req: req, release: release, start: start, asked: h.QueueID}
	m := &op.m
	sp := message.ReadSendProperties(m.Properties)
	if sp.ReplyToClient != "" && !isReply {
		// NB: a request (request-reply) names its requester: its reply
		// goes back on this connection even before the requester's first
		// heartbeat here (the official Go client heartbeats a broker it
		// learned of only on its next beat, up to 30 s later, unless the
		// request's route was new to it; compat TestRequestReply).
		if c := w.Conn(); c != nil {
			b.groups.RegisterProducer(h.ProducerGroup, sp.ReplyToClient, c.ID(), time.Now())
		}
	}
	wait := !sp.HasWait || sp.Wait != "false"
	if code, remark := b.redirect(m, h, sp); code != protocol.Success {
		release()
		reply(w, req, code, remark)
		return true
	}
	// NB: as Java, WAIT is not stored, and CLUSTER is the storing broker's.
	m.Properties = sp.StoreProperties(m.Properties, b.cfg.ClusterName) // NB: rewritten in full if redirect changed them
	if isReply {
		// NB: a reply goes to its requester first; unlike Java's broker,
		// which stores it whatever the push gave, it is stored only once
		// delivered: nobody reads a reply topic, and the replier learns
		// that its reply was lost. The push holds no send slot (see the
		// flow control above): a slow requester must not make sends busy.
		if code, remark := b.pushReply(ctx, w, m, h); code != protocol.Success {
			reply(w, req, code, remark)
			return true
		}
	}
	// NB: every send is checked against the duplicate window; the
	// store leaves out retry and dead-letter topics (send-backs repeat
	// their key on purpose).
	b.put(w, burst, store.PutRequest{Msg: m, NoWait: !wait, Dedup: true, Done: op})
	return true
}

// sendOp is one send on its way through the store: its message and what
// its answer needs, in one allocation; the store answers it through
// PutDone (a closure over the same state was a second allocation per
// send).
type sendOp struct {
	m       message.Message
	b       *Broker
	w       remoting.ResponseWriter
	req     *remoting.Command
	release func()        // gives back the send slot, if one was taken
	start   time.Duration // when the send was read (sendStart)
	asked   int32         // the queue the sender asked for
}

// PutDone answers the send with its put's result.
func (op *sendOp) PutDone(res store.PutResult) {
	op.release()
	b, m := op.b, &op.m
	qid := m.QueueID
	switch {
	case m.Topic == transHalfTopic:
		qid = op.asked // NB: as Java: the queue asked for, not the half topic's
	case res.Duplicates > 0:
		qid = res.QueueID // NB: the stored copy's, which a retry may not have picked
	}
	if res.Duplicates == 0 {
		b.stats.recordPut(m.Topic, 1, len(m.Body))
	}
	b.answerPut(op.w, op.req, res, qid, false)
	b.metrics.send.Observe((monoNow() - op.start).Seconds())
}

// put stores a send: inline (burst set), with the reader's burst (the put
// lock is taken at the end of the burst, once for all its sends);
// otherwise now.
func (b *Broker) put(w remoting.ResponseWriter, burst *sendBurst, r store.PutRequest) {
	if burst != nil {
		b.queueSend(w.Conn(), burst, r, len(r.Msg.Body)+len(r.Msg.Properties))
		return
	}
	b.store.Submit([]store.PutRequest{r})
}

// sendBurst gathers the inline sends of one connection's burst (its
// reader's, so it needs no lock).
type sendBurst struct {
	sends []store.PutRequest
	bytes int
	armed bool          // the end-of-burst hook is registered
	start time.Duration // monoNow at its first send (sendStart)
}

// Bounds of one stored burst.
const (
	burstSends = 256
	burstBytes = 256 << 10
)

// queueSend adds s (of about size bytes) to c's burst; the burst is stored
// with one append (a few, past store's chunk bound) when the reader has
// read all it had, or when it is large. REQUIRES: on c's reader (an
// InlineHandler).
func (b *Broker) queueSend(c *remoting.Conn, burst *sendBurst, s store.PutRequest, size int) {
	if !burst.armed {
		burst.armed = true
		c.AtBatchEnd(func() { burst.armed = false; b.storeBurst(burst) })
	}
	burst.sends = append(burst.sends, s)
	burst.bytes += size
	if len(burst.sends) >= burstSends || burst.bytes >= burstBytes {
		b.storeBurst(burst)
	}
}

// burstOf returns c's burst. REQUIRES: on c's reader.
func (b *Broker) burstOf(c *remoting.Conn) *sendBurst {
	v, ok := b.bursts.Load(c)
	if !ok {
		v, _ = b.bursts.LoadOrStore(c, &sendBurst{})
		if c.Closed() {
			// NB: onDisconnect may have run already (it runs on another
			// goroutine than the reader's last frames): the entry would
			// stay for ever. This send still uses it.
			b.bursts.Delete(c)
		}
	}
	return v.(*sendBurst)
}

// sendStart returns an inline send's burst (nil otherwise) and when the
// send was read, for the send latency metric: for an inline send, when
// its burst began (monoNow was 3.5% of the broker's async 128 B profile
// with a read per send and one per answer; now one per burst), else now.
// The sends of a burst read later count its reading in their latency.
// REQUIRES: on w's reader when inline.
func (b *Broker) sendStart(w remoting.ResponseWriter, inline bool) (*sendBurst, time.Duration) {
	if !inline {
		return nil, monoNow()
	}
	burst := b.burstOf(w.Conn())
	if len(burst.sends) == 0 {
		burst.start = monoNow()
	}
	return burst, burst.start
}

// putScratches holds the store's working space of bursts being stored
// (store.PutScratch): bounded by the bursts in flight, not kept per
// connection (up to 62 KiB for a full burst).
var putScratches = sync.Pool{New: func() any { return new(store.PutScratch) }}

// storeBurst stores the sends gathered and answers each.
func (b *Broker) storeBurst(burst *sendBurst) {
	if len(burst.sends) == 0 {
		return
	}
	sc := putScratches.Get().(*store.PutScratch)
	b.store.SubmitWith(burst.sends, sc)
	putScratches.Put(sc)
	clear(burst.sends)
	burst.sends, burst.bytes = burst.sends[:0], 0
}

// redirect applies the retry→DLQ, transaction-half and delay rules to a
// single message before it is stored (spec 3.1 steps 4 and 7, 3.9, 7.9).
// sp holds m's properties as sent: redirect reads them there.
func (b *Broker) redirect(m *message.Message, h protocol.SendMessageRequestHeader, sp message.SendProperties) (int16, string) {
	if grp, ok := strings.CutPrefix(m.Topic, topic.RetryPrefix); ok {
		dead, err := b.deadLetter(m, grp, m.ReconsumeTimes, h.MaxReconsumeTimes, false)
		if err != nil {
			return protocol.SystemError, err.Error()
		}
		if dead {
			return protocol.Success, ""
		}
	}
	if sp.TranMsg == "true" && message.TxType(m.SysFlag) == message.TxPrepared {
		if err := b.toHalf(m); err != nil {
			return protocol.MessageIllegal, err.Error()
		}
		return protocol.Success, ""
	}
	tx := message.TxType(m.SysFlag)
	if tx != message.TxNot && tx != message.TxCommit {
		return protocol.Success, ""
	}
	if sp.HasDelay {
		level, err := strconv.Atoi(sp.Delay)
		if err == nil && level > 0 {
			if err := b.toSchedule(m, level); err != nil {
				return protocol.MessageIllegal, err.Error()
			}
		}
		return protocol.Success, ""
	}
	if sp.HasTimerDeliverMS {
		at, err := strconv.ParseInt(sp.TimerDeliverMS, 10, 64)
		if err != nil {
			return protocol.MessageIllegal, fmt.Sprintf("%s %q is not a time in Unix milliseconds", message.PropTimerDeliverMS, sp.TimerDeliverMS)
		}
		wait := time.Until(time.UnixMilli(at))
		if wait > maxTimerDelay {
			return protocol.MessageIllegal, fmt.Sprintf("%s is %s ahead; a delivery time may be at most %s ahead",
				message.PropTimerDeliverMS, wait.Round(time.Second), maxTimerDelay)
		}
		if level, ok := timerLevel(wait); ok {
			if err := b.toSchedule(m, level); err != nil {
				return protocol.MessageIllegal, err.Error()
			}
		}
	}
	return protocol.Success, ""
}

// Delivery times (TIMER_DELIVER_MS, RocketMQ 5's timer messages) ride the
// delay levels: a message waits in the largest level not longer than the
// time left, again and again, until less than timerSlack is left. It is
// delivered within timerSlack of its time, after at most a few waits per
// level (the levels are nearly geometric, and 2 h at most).
const (
	maxTimerDelay = 72 * time.Hour // RocketMQ 5's timerMaxDelaySec
	timerSlack    = 500 * time.Millisecond
)

// timerLevel is the delay level a message due in wait should wait in next;
// false when it is due now.
func timerLevel(wait time.Duration) (int, bool) {
	if wait < timerSlack {
		return 0, false
	}
	level := 1
	for i, d := range store.DefaultDelayLevels {
		if d <= wait {
			level = i + 1
		}
	}
	return level, true
}

// toSchedule moves a delayed message to SCHEDULE_TOPIC_XXXX, queue level-1,
// keeping its real topic and queue in properties.
func (b *Broker) toSchedule(m *message.Message, level int) error {
	level = min(level, len(store.DefaultDelayLevels))
	props, err := message.SetProperty(m.Properties, message.PropRealTopic, m.Topic)
	if err == nil {
		props, err = message.SetProperty(props, message.PropRealQueueID, strconv.Itoa(int(m.QueueID)))
	}
	if err == nil {
		props, err = message.SetProperty(props, message.PropDelay, strconv.Itoa(level))
	}
	if err != nil {
		return err
	}
	m.Properties, m.Topic, m.QueueID = props, store.ScheduleTopic, int32(level-1)
	return nil
}

// toHalf stores a transactional message as a half message (spec 3.9).
func (b *Broker) toHalf(m *message.Message) error {
	if _, err := b.ensureTopic(transHalfTopic, 1); err != nil {
		return err
	}
	props, err := message.SetProperty(m.Properties, message.PropRealTopic, m.Topic)
	if err == nil {
		props, err = message.SetProperty(props, message.PropRealQueueID, strconv.Itoa(int(m.QueueID)))
	}
	if err != nil {
		return err
	}
	m.Properties, m.Topic, m.QueueID = props, transHalfTopic, 0
	m.SysFlag &^= message.TxMask
	return nil
}

// answerPut answers a send with its put's result (spec 3.1). The answer
// is queued for the connection's flusher: it comes from the reader's
// burst or the store's notifier, which answer many sends and must not
// wait for one peer's network. Its msgId is the offset id of res.Pos, or
// for a batch those of res.Positions, comma-joined.
func (b *Broker) answerPut(w remoting.ResponseWriter, req *remoting.Command, res store.PutResult, queueID int32, batch bool) {
	if res.Stored() && b.opts.LoseSendAnswer != nil && b.opts.LoseSendAnswer(req) {
		return
	}
	code, remark := putCode(res, putSend)
	a := sendAnswers.Get().(*sendAnswer)
	a.resp = remoting.Command{Header: remoting.Header{Code: code, Language: protocol.LanguageGo,
		Version: protocol.CurrentVersion, Remark: remark}}
	if res.Stored() {
		// NB: written into the frame without a map (ExtWriter).
		if batch {
			for i, p := range res.Positions {
				if i > 0 {
					a.ids = append(a.ids, ',')
				}
				a.ids = message.AppendOffsetMsgID(a.ids, b.storeHost, p)
			}
		} else {
			a.ids = message.AppendOffsetMsgID(a.ids, b.storeHost, res.Pos)
		}
		a.hdr = protocol.SendMessageResponseHeader{MsgIDBytes: a.ids, QueueID: queueID,
			QueueOffset: res.QueueOffset, Region: defaultRegion, TraceOn: true, Duplicates: int32(res.Duplicates)}
		a.resp.ExtWriter = &a.hdr
	}
	_ = w.WriteSoon(&a.resp)
	// NB: a ResponseWriter keeps nothing of the command once Write
	// returns (the frame is encoded, or the recorder copied it).
	ids := a.ids[:0]
	if cap(ids) > maxKeptIDs {
		ids = nil // NB: a large batch's; not kept for ever in the pool
	}
	*a = sendAnswer{ids: ids}
	sendAnswers.Put(a)
}

// maxKeptIDs bounds the id buffer a pooled sendAnswer keeps.
const maxKeptIDs = 4 << 10

// sendAnswer is a send's answer: the response, its ext header and its
// msgId's bytes, reused (three allocations per send saved). Write sets the opaque, the flag and
// the serialize type.
type sendAnswer struct {
	resp remoting.Command
	hdr  protocol.SendMessageResponseHeader
	ids  []byte // hdr.MsgIDBytes, reused
}

var sendAnswers = sync.Pool{New: func() any { return new(sendAnswer) }}

// sendBatch stores a SEND_BATCH_MESSAGE as consecutive records (spec 3.1
// step 8).
func (b *Broker) sendBatch(ctx context.Context, w remoting.ResponseWriter, req *remoting.Command, h protocol.SendMessageRequestHeader,
	burst *sendBurst, start time.Duration, release func(),
) bool {
	if message.TxType(h.SysFlag) != message.TxNot {
		release()
		reply(w, req, protocol.MessageIllegal, "batch messages cannot be transactional")
		return true
	}
	if _, ok := message.PropertyValue(h.Properties, message.PropDelay); ok {
		release()
		reply(w, req, protocol.MessageIllegal, "batch messages cannot be delayed (DELAY in the batch properties)")
		return true
	}
	if strings.HasPrefix(h.Topic, topic.RetryPrefix) {
		release()
		reply(w, req, protocol.MessageIllegal, "batch messages cannot be sent to a retry topic")
		return true
	}
	// NB: each item's properties get CLUSTER, in the one string the
	// items' properties are cut from.
	items, err := message.DecodeBatchItems(req.Body, b.clusterProp)
	if err == nil {
		for _, it := range items {
			if strings.Contains(it.Properties, message.PropTimerDeliverMS+"\x01") {
				err = errors.New("a batch member has a delivery time (" + message.PropTimerDeliverMS + "); batches cannot be delayed")
				break
			}
		}
	}
	if err != nil {
		release()
		reply(w, req, protocol.MessageIllegal, "bad batch body: "+err.Error())
		return true
	}
	batch := &store.Batch{Template: message.Message{Topic: h.Topic, QueueID: h.QueueID, SysFlag: h.SysFlag,
		BornTimestamp: h.BornTimestamp, BornHost: peerAddr(w), StoreHost: b.storeHost, ReconsumeTimes: h.ReconsumeTimes},
		Items: items}
	topicName, asked := h.Topic, h.QueueID // NB: copies: captured, h would move to the heap
	done := func(res store.PutResult) {
		release()
		bytes := 0
		for _, it := range items {
			bytes += len(it.Body)
		}
		qid := asked
		if res.Duplicates > 0 {
			qid = res.QueueID
			bytes = 0 // NB: a partly repeated batch's stored bytes are not known here
		}
		b.stats.recordPut(topicName, len(items)-res.Duplicates, bytes)
		b.answerPut(w, req, res, qid, true)
		b.metrics.send.Observe((monoNow() - start).Seconds())
	}
	if burst != nil {
		b.queueSend(w.Conn(), burst, store.PutRequest{Batch: batch, Dedup: true, Done: store.AnswerFunc(done)}, len(req.Body))
		return true
	}
	b.store.Submit([]store.PutRequest{{Batch: batch, Dedup: true, Done: store.AnswerFunc(done)}})
	return true
}

// decodeHeader reads a request's typed ext header; a bad one is answered
// SYSTEM_ERROR with a remark naming the field (what says which header).
func decodeHeader(w remoting.ResponseWriter, req *remoting.Command, h protocol.ExtHeader, what string) bool {
	if err := h.FromExt(req.ExtFields); err != nil {
		reply(w, req, protocol.SystemError, what+": "+err.Error())
		return false
	}
	return true
}
