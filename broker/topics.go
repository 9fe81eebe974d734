package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluicemq/sluice/broker/store"
	"github.com/sluicemq/sluice/broker/topic"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// System topics producers may not send to directly (spec 3.1).
var systemTopics = map[string]bool{
	store.ScheduleTopic:        true,
	"RMQ_SYS_TRANS_HALF_TOPIC": true,
	transOpTopic:               true,
	transCheckMaxTopic:         true,
	"SELF_TEST_TOPIC":          true,
	"OFFSET_MOVED_EVENT":       true,
	popStateTopic:              true,
}

func openTopics(dir string) (*topic.Table, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("broker: create %s: %w", dir, err)
	}
	return topic.Open(filepath.Join(dir, "topics"))
}

// createSystemTopics creates the topics a RocketMQ broker has at start
// (spec 7.10): the auto-create template TBW102 when auto-create is on, the
// delay topic, topics named after the cluster and the broker, and the
// cluster's reply topic.
func (b *Broker) createSystemTopics() error {
	rw := int32(protocol.PermRead | protocol.PermWrite)
	cfgs := []topic.Config{
		{TopicName: store.ScheduleTopic, ReadQueueNums: int32(len(store.DefaultDelayLevels)), WriteQueueNums: int32(len(store.DefaultDelayLevels)), Perm: rw},
		{TopicName: "SELF_TEST_TOPIC", ReadQueueNums: 1, WriteQueueNums: 1, Perm: rw},
		{TopicName: "OFFSET_MOVED_EVENT", ReadQueueNums: 1, WriteQueueNums: 1, Perm: rw},
		{TopicName: b.cfg.BrokerName, ReadQueueNums: 1, WriteQueueNums: 1, Perm: protocol.PermInherit | rw},
	}
	if topic.ValidateName(b.cfg.ClusterName) == nil {
		cfgs = append(cfgs, topic.Config{TopicName: b.cfg.ClusterName, ReadQueueNums: 16, WriteQueueNums: 16, Perm: protocol.PermInherit | rw},
			topic.Config{TopicName: protocol.ReplyTopic(b.cfg.ClusterName), ReadQueueNums: 1, WriteQueueNums: 1, Perm: rw})
	}
	for _, c := range cfgs {
		if _, _, err := b.topics.PutIfAbsent(c); err != nil {
			return err
		}
	}
	if b.cfg.AutoCreateTopic {
		// NB: put, not put-if-absent: the template's queue count is
		// default_topic_queue_nums, also after the setting changed.
		n := b.cfg.DefaultTopicQueueNums
		if _, err := b.topics.Put(topic.Config{TopicName: topic.AutoCreateTemplate, ReadQueueNums: n, WriteQueueNums: n,
			Perm: protocol.PermInherit | rw}); err != nil {
			return err
		}
	}
	return nil
}

// knownTopic returns the config of an existing topic, or answers
// TOPIC_NOT_EXIST naming the topic and this broker.
func (b *Broker) knownTopic(w remoting.ResponseWriter, req *remoting.Command, name string) (topic.Config, bool) {
	cfg, ok := b.topics.Get(name)
	if !ok && b.isSlave() {
		cfg, ok = b.replicatedTopic(name)
	}
	if !ok {
		reply(w, req, protocol.TopicNotExist, fmt.Sprintf("topic %s does not exist on broker %s", name, b.cfg.BrokerName))
	}
	return cfg, ok
}

// replicatedTopic is, on a slave, a read-only config for a topic its log
// holds but whose config has not been copied from the master yet (it
// does so every MetaSyncInterval): consumers that fall back to the slave
// right after the master died still read.
func (b *Broker) replicatedTopic(name string) (topic.Config, bool) {
	queues := int32(-1)
	b.store.Topics(func(t string, id int32, _, _ int64) bool {
		if t == name {
			queues = max(queues, id+1)
		}
		return true
	})
	if queues <= 0 {
		return topic.Config{}, false
	}
	return topic.Config{TopicName: name, ReadQueueNums: queues, WriteQueueNums: queues, Perm: topic.PermRead}, true
}

// topicForSend returns the config of a topic a producer sends to, creating
// it from the producer's template (defaultTopic) when it is unknown and
// auto-create allows it (spec 3.1 step 2). It returns a response code and a
// remark when the send must be refused.
//
// An auto-created topic gets the template's queue count, capped by the
// count the producer asks for (defaultQueues, its DefaultTopicQueueNums:
// 4 in RocketMQ's clients and Sluice's), as RocketMQ's broker does. The
// template TBW102 has default_topic_queue_nums queues, so that is the rule:
// min(default_topic_queue_nums, the producer's count).
func (b *Broker) topicForSend(name, defaultTopic string, defaultQueues int32) (topic.Config, int16, string) {
	if c, ok := b.topics.Get(name); ok {
		return c, protocol.Success, ""
	}
	if err := topic.ValidateName(name); err != nil {
		return topic.Config{}, protocol.MessageIllegal, err.Error()
	}
	retry := strings.HasPrefix(name, topic.RetryPrefix)
	if !retry && !b.cfg.AutoCreateTopic {
		return topic.Config{}, protocol.TopicNotExist, fmt.Sprintf(
			"topic %s does not exist on broker %s and auto-create is off: create it with mqadmin updateTopic", name, b.cfg.BrokerName)
	}
	tmplName := defaultTopic
	if tmplName == "" {
		tmplName = topic.AutoCreateTemplate
	}
	tmpl, ok := b.topics.Get(tmplName)
	if !retry && (!ok || tmpl.Perm&protocol.PermInherit == 0) {
		return topic.Config{}, protocol.TopicNotExist, fmt.Sprintf(
			"topic %s does not exist and its template %s cannot create it (missing or not inheritable)", name, tmplName)
	}
	queues := int32(1)
	perm := int32(protocol.PermRead | protocol.PermWrite)
	if !retry {
		queues = tmpl.WriteQueueNums
		if defaultQueues > 0 {
			queues = min(defaultQueues, queues)
		}
		perm = tmpl.Perm &^ protocol.PermInherit
	}
	c, created, err := b.topics.PutIfAbsent(topic.Config{TopicName: name, ReadQueueNums: queues, WriteQueueNums: queues, Perm: perm})
	if err != nil {
		return topic.Config{}, protocol.SystemError, "broker: cannot save the new topic: " + err.Error()
	}
	if created {
		b.logger.Info("broker: topic auto-created", "topic", name, "queues", queues)
		b.registerNow()
	}
	return c, protocol.Success, ""
}

// ensureTopic creates a topic with n queues unless it exists (retry and DLQ
// topics), registering it with the nameservers when created.
func (b *Broker) ensureTopic(name string, n int32) (topic.Config, error) {
	c, created, err := b.topics.PutIfAbsent(topic.Config{TopicName: name, ReadQueueNums: n, WriteQueueNums: n,
		Perm: protocol.PermRead | protocol.PermWrite})
	if err == nil && created {
		b.registerNow()
	}
	return c, err
}

// registerNow registers with the nameservers and returns once they have
// answered. Callers are requests that created a topic: like Java, the
// broker registers before it replies, so a client that asks for the route
// right after the reply finds it (a Go consumer's Start fails without a
// route, spec 9 item 3). Until Start is done the register loop's first
// registration covers the topic.
func (b *Broker) registerNow() {
	if b.started.Load() {
		b.registerAll()
	}
}

// deleteTopic removes a topic's config. Its stored messages stay in the
// commitlog until retention removes them.
func (b *Broker) deleteTopic(_ context.Context, name string) (bool, error) {
	return b.topics.Delete(name)
}
