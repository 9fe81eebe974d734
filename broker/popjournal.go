package broker

import (
	"context"
	"time"

	"github.com/sluicemq/sluice/broker/pop"
	"github.com/sluicemq/sluice/broker/store"
	"github.com/sluicemq/sluice/internal/message"
)

// popStateTopic holds the POP state records (pop/record.go) in queue 0:
// the master's pop.Table writes one per change (a receive's deliveries,
// an ack, a change of invisible time, a reset, a group's deletion), in
// the order of the changes; the log carries them to the slaves, whose
// tables apply them (popApplyLog), as a restarted broker applies those
// past its saved state. A new master (promoted, elected) applies what it
// has not before it serves a receive: acked messages are not delivered
// again, those in flight are after their invisible time, and FIFO
// message groups keep their order. The topic has no config: no route or
// topic list shows it, and producers may not send to it (systemTopics).
const popStateTopic = "RMQ_SYS_POP_STATE"

// popJournal writes a table's records to the store (pop.Journal).
type popJournal struct {
	b  *Broker
	sc store.PutScratch // guarded by the table's lock (Append's caller holds it)
}

// Append implements pop.Journal: called with the table's lock held, so
// that the records' order in the log is the changes' order (the table's
// is the only writer of the topic). The wait is the put's answer: OK
// only once the record is as durable as a send (flushed in sync flush
// mode, on the in-sync replicas behind a replica gate).
func (j *popJournal) Append(rec []byte) (int64, pop.Wait) {
	b := j.b
	now := time.Now().UnixMilli()
	m := &message.Message{Topic: popStateTopic, BornTimestamp: now, BornHost: b.storeHost, StoreHost: b.storeHost, Body: rec}
	done := make(chan store.PutResult, 1)
	b.store.SubmitWith([]store.PutRequest{{Msg: m, Done: store.AnswerFunc(func(res store.PutResult) { done <- res })}}, &j.sc)
	wait := func(res store.PutResult) error {
		if res.Status != store.PutOK {
			return &putError{res}
		}
		return nil
	}
	select {
	case res := <-done: // NB: a refusal, or async flush with no gate: answered during Submit
		if !res.Stored() {
			return 0, func() error { return wait(res) }
		}
		return res.QueueOffset + 1, func() error { return wait(res) }
	default:
	}
	return b.store.QueueNext(popStateTopic, 0), func() error { return wait(<-done) }
}

// popRecordsBatch bounds the records popApplyLog reads at once.
const popRecordsBatch = 256

// popApplyLog applies to the POP table the records of the log it has
// not applied: a slave's, as they arrive, a restarted or new master's
// before it serves.
func (b *Broker) popApplyLog() {
	b.popApplyMu.Lock()
	defer b.popApplyMu.Unlock()
	b.popApplyLogLocked()
}

// popApplyLogLocked is popApplyLog. REQUIRES: popApplyMu held.
func (b *Broker) popApplyLogLocked() {
	for {
		from := b.pop.Pos()
		res, err := b.store.Get(context.Background(), store.GetRequest{Topic: popStateTopic, QueueID: 0, Offset: from,
			MaxMsgs: popRecordsBatch, MaxBytes: 8 << 20})
		if err != nil {
			b.logger.Warn("broker: read POP state records", "from", from, "err", err)
			return
		}
		switch res.Status {
		case store.GetOffsetTooSmall:
			// NB: retention removed records the saved state does not
			// hold: what they changed is lost (delivered again).
			b.logger.Warn("broker: POP state records removed before they were applied", "from", from, "next", res.NextOffset)
			b.pop.Skip(res.NextOffset)
			continue
		case store.GetFound:
		default:
			return
		}
		for body := res.Body; len(body) > 0; {
			rec, err := message.Decode(body)
			if err != nil || rec.TotalSize <= 0 || int(rec.TotalSize) > len(body) {
				b.logger.Error("broker: POP state record unreadable", "from", from, "err", err)
				return
			}
			body = body[rec.TotalSize:]
			r, err := pop.DecodeRecord(rec.Body)
			if err != nil {
				b.logger.Error("broker: POP state record skipped", "offset", rec.QueueOffset, "err", err)
				b.pop.Skip(rec.QueueOffset + 1)
				continue
			}
			b.pop.Apply(rec.QueueOffset, &r)
		}
		if res.NextOffset <= from {
			return
		}
	}
}

// popOpenWait bounds how long New waits for the dispatcher to index the
// log before it reads the POP state records; past it the broker serves
// all the same, and POP calls wait (answered INTERNAL_SERVER_ERROR, which
// clients retry) until popApplyLoop has read them.
const popOpenWait = 30 * time.Second

// openPopLog readies the POP table of New: records are written from now
// on, and those the saved state lacks are applied (popInit).
func (b *Broker) openPopLog() {
	b.store.Subscribe(func(topic string, _ int32, _, _ int64, _ []byte) {
		if topic == popStateTopic && (b.isSlave() || !b.popReady.Load()) {
			select {
			case b.popKick <- struct{}{}:
			default:
			}
		}
	})
	deadline := time.Now().Add(popOpenWait)
	for !b.popInit() {
		if time.Now().After(deadline) {
			b.logger.Warn("broker: the dispatcher is still indexing the log: POP calls wait until the POP state records are read",
				"behind_bytes", b.store.DispatchLag(), "waited", popOpenWait)
			return
		}
		time.Sleep(time.Millisecond) // NB: at open only: the dispatcher indexes what recovery found
	}
}

// popInit applies the records the saved POP state lacks once the
// dispatcher has indexed the whole log (a kill -9 may have left its end
// unindexed), then journals the table's changes and lets POP calls in;
// false while the log is not indexed yet. A saved state past the log's
// records (the log was cut to agree with a new master) is dropped and
// rebuilt from the records. Once done, it only applies what came since.
func (b *Broker) popInit() bool {
	b.popApplyMu.Lock()
	defer b.popApplyMu.Unlock()
	if b.popReady.Load() {
		b.popApplyLogLocked()
		return true
	}
	if b.store.DispatchLag() > 0 {
		return false
	}
	if pos, end := b.pop.Pos(), b.store.MaxOffset(popStateTopic, 0); pos > end {
		b.logger.Warn("broker: the POP state holds records the log no longer has (cut); rebuilding it from the log", "pos", pos, "end", end)
		b.pop.Clear()
	}
	b.popApplyLogLocked()
	b.pop.SetJournal(&popJournal{b: b})
	b.popReady.Store(true)
	return true
}

// popApplyLoop applies a slave's POP state records as they arrive.
func (b *Broker) popApplyLoop() {
	defer b.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-b.quit:
			return
		case <-b.popKick:
		case <-t.C:
		}
		if !b.popReady.Load() {
			b.popInit()
			continue
		}
		if !b.isSlave() {
			continue
		}
		if b.pop.Diverged() {
			// NB: this broker, master before, changed its POP state
			// without a record (its log refused it): the master's records
			// would apply to a state they do not describe.
			b.logger.Warn("broker: the POP state holds changes its log does not; rebuilding it from the log")
			b.pop.Clear()
		}
		b.popApplyLog()
	}
}
