package broker

import (
	"context"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/broker/offset"
	"github.com/sluicemq/sluice/broker/store"
	"github.com/sluicemq/sluice/internal/message"
)

// scheduler delivers delayed messages (RocketMQ's ScheduleMessageService,
// spec 7.9): each level's queue of SCHEDULE_TOPIC_XXXX is read in order from
// its saved offset; an entry whose delivery time (its tags code) has come is
// stored again under its real topic and queue, and the level's offset moves
// on. Delivery is at least once: a crash between the store and the offset
// save delivers that message twice.
type scheduler struct {
	b       *Broker
	offsets *offset.Table // group "schedule", topic SCHEDULE_TOPIC_XXXX, queue = level-1
	kick    chan struct{}
}

const scheduleGroup = "%SCHEDULE%"

func newScheduler(b *Broker) *scheduler {
	t, err := offset.Open(filepath.Join(b.cfg.Store.Dir, "config", "delay-offsets"), b.logger)
	if err != nil {
		b.logger.Error("broker: delay offsets unreadable; delayed messages restart from the queue heads", "err", err)
		t, _ = offset.Open(filepath.Join(b.cfg.Store.Dir, "config", "delay-offsets.new"), b.logger)
	}
	s := &scheduler{b: b, offsets: t, kick: make(chan struct{}, 1)}
	b.store.Subscribe(func(topic string, _ int32, _, _ int64, _ []byte) {
		if topic == store.ScheduleTopic {
			select {
			case s.kick <- struct{}{}:
			default:
			}
		}
	})
	return s
}

// loop delivers due messages, sleeping until the earliest due time (at most
// 1 s) or a new delayed message.
func (s *scheduler) loop() {
	defer s.b.wg.Done()
	defer s.offsets.Close()
	timer := time.NewTimer(time.Second)
	defer timer.Stop()
	for {
		wait := s.deliverDue(time.Now())
		timer.Reset(min(wait, time.Second))
		select {
		case <-s.b.quit:
			return
		case <-timer.C:
		case <-s.kick:
		}
	}
}

// deliverDue delivers every due message of every level and returns how long
// until the next one is due.
func (s *scheduler) deliverDue(now time.Time) time.Duration {
	if s.b.isSlave() {
		return time.Second // NB: the master delivers; a slave's log is its copy
	}
	next := time.Hour
	for level := 1; level <= len(store.DefaultDelayLevels); level++ {
		if d := s.deliverLevel(int32(level-1), now); d < next {
			next = d
		}
	}
	return next
}

func (s *scheduler) deliverLevel(qid int32, now time.Time) time.Duration {
	b := s.b
	off, _ := s.offsets.Query(scheduleGroup, store.ScheduleTopic, qid)
	off = max(off, b.store.MinOffset(store.ScheduleTopic, qid))
	for {
		res, err := b.store.Get(context.Background(), store.GetRequest{Topic: store.ScheduleTopic, QueueID: qid, Offset: off, MaxMsgs: 32})
		if err != nil || res.Status != store.GetFound {
			if res.Status == store.GetOffsetTooSmall || res.Status == store.GetOffsetOverflowBadly {
				s.offsets.Commit(scheduleGroup, store.ScheduleTopic, qid, res.NextOffset)
			}
			return time.Hour
		}
		body := res.Body
		for len(body) > 0 {
			r, err := message.Decode(body)
			if err != nil {
				b.logger.Error("broker: unreadable delayed message; skipped", "queue_id", qid, "offset", off, "err", err)
				s.offsets.Commit(scheduleGroup, store.ScheduleTopic, qid, off+1)
				return 0
			}
			body = body[r.TotalSize:]
			level, _ := strconv.Atoi(propOf(r.Properties, message.PropDelay))
			due := time.UnixMilli(r.StoreTimestamp + delayOf(level).Milliseconds())
			if due.After(now) {
				return due.Sub(now)
			}
			if !s.deliver(&r) {
				return time.Second // store refused (disk full…): retry later
			}
			off = r.QueueOffset + 1
			s.offsets.Commit(scheduleGroup, store.ScheduleTopic, qid, off)
		}
	}
}

func delayOf(level int) time.Duration {
	level = max(1, min(level, len(store.DefaultDelayLevels)))
	return store.DefaultDelayLevels[level-1]
}

func propOf(props []byte, name string) string {
	v, _ := message.PropertyValueBytes(props, name)
	return string(v)
}

// deliver stores a due message under its real topic and queue.
func (s *scheduler) deliver(r *message.Record) bool {
	b := s.b
	props := string(r.Properties)
	realTopic := propOf(r.Properties, message.PropRealTopic)
	qid, _ := strconv.Atoi(propOf(r.Properties, message.PropRealQueueID))
	props = message.DeleteProperty(props, message.PropDelay)
	m := &message.Message{Topic: realTopic, QueueID: int32(qid), Flag: r.Flag,
		SysFlag:       r.SysFlag &^ (message.FlagBornHostV6 | message.FlagStoreHostV6),
		BornTimestamp: r.BornTimestamp, BornHost: r.BornHost, StoreHost: b.storeHost,
		ReconsumeTimes: r.ReconsumeTimes, Body: r.Body, Properties: props}
	if realTopic == "" {
		b.logger.Error("broker: delayed message without REAL_TOPIC; dropped", "offset", r.PhysicalOffset)
		return true
	}
	if v := propOf(r.Properties, message.PropTimerDeliverMS); v != "" {
		// NB: a delivery time waits level after level until it is near.
		if at, err := strconv.ParseInt(v, 10, 64); err == nil {
			if level, ok := timerLevel(time.Until(time.UnixMilli(at))); ok {
				m.Topic, m.QueueID = store.ScheduleTopic, int32(level-1)
				props, err := message.SetProperty(props, message.PropDelay, strconv.Itoa(level))
				if err != nil {
					b.logger.Error("broker: timer message: cannot set its next level; delivered now", "err", err)
					m.Topic, m.QueueID = realTopic, int32(qid)
				} else {
					m.Properties = props
				}
			}
		}
	}
	res := b.store.Put(context.Background(), m)
	if !res.Stored() {
		b.logger.Warn("broker: deliver delayed message", "topic", realTopic, "status", res.Status, "remark", res.Remark)
		return false
	}
	return true
}
