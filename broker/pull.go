package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/sluicemq/sluice/broker/longpoll"
	"github.com/sluicemq/sluice/broker/store"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// Pull request sysFlag bits (spec 3.2).
const (
	pullCommitOffset = 0x1
	pullSuspend      = 0x2
	pullSubscription = 0x4
)

// handlePull serves PULL_MESSAGE (11). A pull that finds nothing new and
// allows suspension is parked (never blocking the connection) and answered
// when a message arrives in its queue or its suspend time runs out.
func (b *Broker) handlePull(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.PullMessageRequestHeader
	var err error
	if req.ExtFields == nil && req.ExtPairs.Valid() {
		err = h.FromExtPairs(req.ExtPairs) // NB: msgpack pulls come so
	} else {
		err = h.FromExt(req.ExtFields)
	}
	if err != nil {
		reply(w, req, protocol.SystemError, "bad pull header: "+err.Error())
		return
	}
	b.pull(w, req, &h, true)
}

func (b *Broker) pull(w remoting.ResponseWriter, req *remoting.Command, h *protocol.PullMessageRequestHeader, first bool) {
	cfg, ok := b.knownTopic(w, req, h.Topic)
	if !ok {
		return
	}
	if !cfg.Readable() {
		reply(w, req, protocol.NoPermission, fmt.Sprintf("topic %s is not readable on broker %s", h.Topic, b.cfg.BrokerName))
		return
	}
	if h.QueueID < 0 || h.QueueID >= cfg.Queues() {
		reply(w, req, protocol.SystemError, fmt.Sprintf("queueId %d out of range: topic %s has %d queues", h.QueueID, h.Topic, cfg.Queues()))
		return
	}
	sub, serr := b.pullSubscription(h)
	if serr != nil {
		reply(w, req, serr.code, serr.remark)
		return
	}
	if gc, ok := b.groupCfgs.Get(h.ConsumerGroup); ok && !gc.ConsumeEnable {
		reply(w, req, protocol.NoPermission, fmt.Sprintf("consumption is disabled for group %s on broker %s", h.ConsumerGroup, b.cfg.BrokerName))
		return
	}
	// NB: a slave keeps the master's offsets (metaSyncLoop), not its
	// pullers', as Java's.
	if first && h.SysFlag&pullCommitOffset != 0 && h.CommitOffset >= 0 && !b.isSlave() {
		b.offsets.Commit(h.ConsumerGroup, h.Topic, h.QueueID, h.CommitOffset)
	}
	pf := b.newPullFilter(h.ConsumerGroup, sub)
	bp := pullBufs.Get().(*[]byte)
	res, err := b.store.Get(context.Background(), store.GetRequest{Topic: h.Topic, QueueID: h.QueueID,
		Offset: h.QueueOffset, MaxMsgs: min(max(int(h.MaxMsgNums), 1), int(b.cfg.PullMaxMessages)), TagCodes: pf.codes,
		Filter: pf.propsFilter(), Buf: *bp})
	// NB: the body goes back to the pool once written: Write returns after
	// a referenced body is in the kernel. After a failed write netpoll may
	// still hold it, so it is left to the collector.
	recycle := func(werr error) {
		if werr != nil {
			return
		}
		if c := cap(res.Body); c > cap(*bp) && c <= maxPooledPull {
			*bp = res.Body[:0] // NB: the store needed a larger one: keep that
		}
		pullBufs.Put(bp)
	}
	if err != nil {
		b.logger.Error("broker: pull", "topic", h.Topic, "queue_id", h.QueueID, "offset", h.QueueOffset, "err", err)
		reply(w, req, storeErrCode(err), "broker: read failed: "+err.Error())
		return
	}
	code, next := pullCode(res, h.QueueOffset)
	if code == protocol.PullNotFound && first && h.SysFlag&pullSuspend != 0 {
		recycle(nil)
		b.park(w, req, h, pf)
		return
	}
	resp := remoting.NewResponse(req, code, res.Status.String())
	resp.ExtWriter = &protocol.PullMessageResponseHeader{NextBeginOffset: next,
		MinOffset: res.MinOffset, MaxOffset: res.MaxOffset, SuggestWhichBrokerID: b.suggestBroker(code, res.Body)}
	if code == protocol.Success {
		resp.Body = res.Body
		b.stats.recordGet(h.Topic, res.Count, len(res.Body))
	}
	recycle(w.Write(resp))
}

// pullBufs holds pull response bodies for reuse; bodies above
// maxPooledPull (a pull of one huge message) are not kept.
var pullBufs = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

const maxPooledPull = 1 << 20

// park holds a pull until a message arrives or its suspend time passes.
// Only a message that passes the pull's filter wakes it.
func (b *Broker) park(w remoting.ResponseWriter, req *remoting.Command, h *protocol.PullMessageRequestHeader, pf *pullFilter) {
	wait := b.cfg.LongPoll.ShortPollWait
	if b.cfg.LongPoll.Enabled {
		wait = min(time.Duration(h.SuspendTimeoutMillis)*time.Millisecond, b.cfg.LongPoll.MaxSuspend)
		if wait <= 0 {
			wait = b.cfg.LongPoll.ShortPollWait
		}
	}
	topic, qid := h.Topic, h.QueueID
	remoting.Parked(w)
	b.hold.Park(&longpoll.Request{Topic: topic, QueueID: qid, Offset: h.QueueOffset,
		Deadline: time.Now().Add(wait), Match: pf.match,
		Wake: func(bool) { b.pull(w, req, h, false) },
	}, func() int64 { return b.store.MaxOffset(topic, qid) })
}

// suggestBroker is a pull answer's suggestWhichBrokerId: with
// slave_read_enable, a master sends a consumer reading far behind the log's
// end (more than Options.ColdReadBytes, 40% of the machine's memory by
// default, as RocketMQ's accessMessageInMemoryMaxRatio) to its slave 1, so
// that cold reads leave the master's page cache to new messages.
func (b *Broker) suggestBroker(code int16, body []byte) int64 {
	if code != protocol.Success || !b.cfg.SlaveReadEnable || b.isSlave() || len(body) < message.OffPhysicalOffset+8 {
		return 0
	}
	pos := int64(binary.BigEndian.Uint64(body[message.OffPhysicalOffset:]))
	if int64(b.store.Log().Next())-pos > b.opts.ColdReadBytes {
		return 1
	}
	return 0
}
