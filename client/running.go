package client

import (
	"errors"
	"fmt"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
)

// maxStackDump bounds the goroutine dump a running-info answer carries.
const maxStackDump = 1 << 20

// errNoHandler is the answer to CONSUME_MESSAGE_DIRECTLY for a consumer
// that cannot consume a message given to it.
var errNoHandler = errors.New("no handler")

// baseProperties are the running-info properties every consumer kind
// reports: the RocketMQ ones tools read, then its settings by name.
func baseProperties(cfg *config, group, consumeType string, started time.Time) map[string]string {
	return map[string]string{
		protocol.PropNameServerAddr:         strings.Join(cfg.nameServers, ";"),
		protocol.PropConsumeType:            consumeType,
		protocol.PropClientVersion:          protocol.VersionName(protocol.CurrentVersion),
		protocol.PropConsumerStartTimestamp: strconv.FormatInt(started.UnixMilli(), 10),
		"consumerGroup":                     group,
		"instanceName":                      cfg.instance,
		"language":                          "GO",
	}
}

// goroutineStacks returns every goroutine's stack, at most maxStackDump
// bytes of it: what Java's jstack option carries.
func goroutineStacks() string {
	var b strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&b, 2); err != nil {
		return "goroutine dump failed: " + err.Error()
	}
	s := b.String()
	if len(s) > maxStackDump {
		s = s[:maxStackDump] + "\n… truncated"
	}
	return s
}

// runningInfo implements member (GET_CONSUMER_RUNNING_INFO).
func (c *PushConsumer) runningInfo(jstack bool) protocol.ConsumerRunningInfo {
	subs := c.consumerData().SubscriptionDataSet
	c.mu.Lock()
	started := c.startedAt
	pqs := make([]*processQueue, 0, len(c.queues))
	for _, pq := range c.queues {
		pqs = append(pqs, pq)
	}
	c.mu.Unlock()
	info := protocol.ConsumerRunningInfo{
		Properties:      baseProperties(c.cfg, c.group, "CONSUME_PASSIVELY", started),
		SubscriptionSet: subs,
		MQTable:         make(map[protocol.MessageQueue]protocol.ProcessQueueInfo, len(pqs)),
		StatusTable:     c.stats.status(time.Now()),
	}
	for _, s := range subs {
		if _, ok := info.StatusTable[s.Topic]; !ok {
			info.StatusTable[s.Topic] = protocol.ConsumeStatus{} // NB: listed idle, as Java does
		}
	}
	p := info.Properties
	p[protocol.PropConsumeOrderly] = strconv.FormatBool(c.cfg.orderly)
	p[protocol.PropThreadPoolCoreSize] = strconv.Itoa(c.cfg.consumeGoroutines)
	p["messageModel"] = c.cfg.model.String()
	p["consumeFromWhere"] = c.cfg.from.String()
	p["consumeMessageBatchMaxSize"] = strconv.Itoa(c.cfg.consumeBatch)
	p["pullBatchSize"] = strconv.Itoa(c.cfg.pullBatch)
	p["pullThresholdForQueue"] = strconv.Itoa(c.cfg.pullThresholdCount)
	p["pullThresholdSizeForQueue"] = strconv.FormatInt(c.cfg.pullThresholdBytes>>20, 10)
	p["maxReconsumeTimes"] = strconv.Itoa(c.cfg.maxReconsume)
	for _, pq := range pqs {
		info.MQTable[pq.mq.wire()] = pq.info()
	}
	if jstack {
		info.JStack = goroutineStacks()
	}
	return info
}

// consumeDirectly implements member (CONSUME_MESSAGE_DIRECTLY): m goes to
// the handler of its topic as a batch of one, outside any queue: nothing
// is acknowledged or sent back, whatever the handler answers.
func (c *PushConsumer) consumeDirectly(m *Message) (protocol.ConsumeMessageDirectlyResult, error) {
	restoreRetryTopic(m)
	if sub, ok := c.subscription(m.Topic); !ok || sub.handler == nil {
		return protocol.ConsumeMessageDirectlyResult{}, fmt.Errorf("%w: consumer group %s does not subscribe to topic %s",
			errNoHandler, c.group, m.Topic)
	}
	began := time.Now()
	res, panicked := c.handle([]*Message{m})
	out := protocol.ConsumeMessageDirectlyResult{Order: c.cfg.orderly, AutoCommit: true,
		SpentTimeMills: time.Since(began).Milliseconds()}
	switch {
	case panicked != nil:
		out.ConsumeResult, out.Remark = protocol.CRThrowException, fmt.Sprintf("the handler panicked: %v", panicked)
	case res == ConsumeSuccess:
		out.ConsumeResult = protocol.CRSuccess
	default:
		out.ConsumeResult = protocol.CRLater
	}
	return out, nil
}

// runningInfo implements member: a pull consumer holds no queues, so it
// reports its settings and subscriptions.
func (c *PullConsumer) runningInfo(jstack bool) protocol.ConsumerRunningInfo {
	subs := c.consumerData().SubscriptionDataSet
	c.mu.Lock()
	started := c.startedAt
	c.mu.Unlock()
	info := protocol.ConsumerRunningInfo{
		Properties:      baseProperties(c.cfg, c.group, "CONSUME_ACTIVELY", started),
		SubscriptionSet: subs,
	}
	info.Properties[protocol.PropConsumeOrderly] = "false"
	if jstack {
		info.JStack = goroutineStacks()
	}
	return info
}

// consumeDirectly implements member: a pull consumer has no handler.
func (c *PullConsumer) consumeDirectly(*Message) (protocol.ConsumeMessageDirectlyResult, error) {
	return protocol.ConsumeMessageDirectlyResult{}, fmt.Errorf("%w: consumer group %s is a pull consumer", errNoHandler, c.group)
}

// queueOffsets implements member: the commit offsets of the queues of
// topic this consumer holds.
func (c *PushConsumer) queueOffsets(topic string) map[protocol.MessageQueue]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[protocol.MessageQueue]int64{}
	for mq, pq := range c.queues {
		if off := pq.offset.Load(); mq.Topic == topic && off >= 0 {
			out[mq.wire()] = off
		}
	}
	return out
}

// queueOffsets implements member: a pull consumer holds no queues.
func (c *PullConsumer) queueOffsets(string) map[protocol.MessageQueue]int64 {
	return map[protocol.MessageQueue]int64{}
}
