package protocol

// Admin bodies Sluice's broker answers with (GET_TOPIC_STATS_INFO,
// GET_CONSUME_STATS, GET_BROKER_RUNTIME_INFO, GET_ALL_TOPIC_CONFIG). Queue
// lists are arrays rather than Java's maps keyed by MessageQueue objects,
// which JSON cannot express portably.

// KVTable is the body of GET_BROKER_RUNTIME_INFO: {"table":{...}}.
type KVTable struct {
	Table map[string]string `json:"table"`
}

// QueueStat is one queue's bounds in GET_TOPIC_STATS_INFO.
type QueueStat struct {
	MessageQueue
	MinOffset           int64 `json:"minOffset"`
	MaxOffset           int64 `json:"maxOffset"`
	LastUpdateTimestamp int64 `json:"lastUpdateTimestamp"` // store time of the newest message, 0 if none
}

// TopicStats is the body of GET_TOPIC_STATS_INFO.
type TopicStats struct {
	Queues []QueueStat `json:"queues"`
}

// QueueProgress is a consumer group's position in one queue.
type QueueProgress struct {
	MessageQueue
	BrokerOffset   int64 `json:"brokerOffset"`   // the queue's max offset
	ConsumerOffset int64 `json:"consumerOffset"` // -1 when the group has none stored
	// OldestUnconsumedTimestamp is the store time of the message at the
	// consumer offset; 0 when nothing is waiting or it is unknown.
	OldestUnconsumedTimestamp int64 `json:"oldestUnconsumedTimestamp"`
}

// ConsumeStats is the body of GET_CONSUME_STATS.
type ConsumeStats struct {
	Group  string          `json:"group"`
	Queues []QueueProgress `json:"queues"`
}

// GetConsumeStatsRequestHeader is the header of GET_CONSUME_STATS (208).
type GetConsumeStatsRequestHeader struct {
	ConsumerGroup string // consumerGroup
	Topic         string // topic, optional: every subscribed topic when empty
}

// ToExt implements ExtHeader.
func (h *GetConsumeStatsRequestHeader) ToExt(ext map[string]string) {
	ext["consumerGroup"] = h.ConsumerGroup
	if h.Topic != "" {
		ext["topic"] = h.Topic
	}
}

// FromExt implements ExtHeader.
func (h *GetConsumeStatsRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{ext: ext, header: "GetConsumeStatsRequestHeader"}
	h.ConsumerGroup = r.str("consumerGroup")
	h.Topic = r.optStr("topic")
	return r.err
}

// TopicRequestHeader is the header of requests that name only a topic
// (GET_TOPIC_STATS_INFO 202).
type TopicRequestHeader struct {
	Topic string // topic
}

// ToExt implements ExtHeader.
func (h *TopicRequestHeader) ToExt(ext map[string]string) { ext["topic"] = h.Topic }

// FromExt implements ExtHeader.
func (h *TopicRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{ext: ext, header: "TopicRequestHeader"}
	h.Topic = r.str("topic")
	return r.err
}

// SubscriptionGroupConfig is a consumer group's settings on a broker
// (RocketMQ's SubscriptionGroupConfig).
type SubscriptionGroupConfig struct {
	GroupName                      string `json:"groupName" msgpack:"name"`
	ConsumeEnable                  bool   `json:"consumeEnable" msgpack:"consume"`
	ConsumeFromMinEnable           bool   `json:"consumeFromMinEnable" msgpack:"from_min"`
	ConsumeBroadcastEnable         bool   `json:"consumeBroadcastEnable" msgpack:"broadcast"`
	RetryQueueNums                 int32  `json:"retryQueueNums" msgpack:"retry_queues"`
	RetryMaxTimes                  int32  `json:"retryMaxTimes" msgpack:"retry_max"`
	BrokerID                       int64  `json:"brokerId" msgpack:"broker_id"`
	WhichBrokerWhenConsumeSlowly   int64  `json:"whichBrokerWhenConsumeSlowly" msgpack:"slow_broker"`
	NotifyConsumerIdsChangedEnable bool   `json:"notifyConsumerIdsChangedEnable" msgpack:"notify"`
	// ConsumeMessageOrderly (RocketMQ 5's consumeMessageOrderly, mqadmin
	// updateSubGroup -o true): RocketMQ 5 clients of the group consume FIFO.
	ConsumeMessageOrderly bool `json:"consumeMessageOrderly,omitempty" msgpack:"orderly,omitempty"`
}

// DefaultSubscriptionGroupConfig returns RocketMQ's defaults for a group.
func DefaultSubscriptionGroupConfig(group string) SubscriptionGroupConfig {
	return SubscriptionGroupConfig{GroupName: group, ConsumeEnable: true, ConsumeFromMinEnable: true,
		ConsumeBroadcastEnable: true, RetryQueueNums: 1, RetryMaxTimes: 16, WhichBrokerWhenConsumeSlowly: 1,
		NotifyConsumerIdsChangedEnable: true}
}

// SubscriptionGroupWrapper is the body of GET_ALL_SUBSCRIPTIONGROUP_CONFIG.
type SubscriptionGroupWrapper struct {
	SubscriptionGroupTable map[string]SubscriptionGroupConfig `json:"subscriptionGroupTable"`
	DataVersion            DataVersion                        `json:"dataVersion"`
}

// DeleteSubscriptionGroupRequestHeader is the header of
// DELETE_SUBSCRIPTIONGROUP (207).
type DeleteSubscriptionGroupRequestHeader struct {
	GroupName string // groupName
}

// ToExt implements ExtHeader.
func (h *DeleteSubscriptionGroupRequestHeader) ToExt(ext map[string]string) {
	ext["groupName"] = h.GroupName
}

// FromExt implements ExtHeader.
func (h *DeleteSubscriptionGroupRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{ext: ext, header: "DeleteSubscriptionGroupRequestHeader"}
	h.GroupName = r.str("groupName")
	return r.err
}

// Connection is one client connection of a consumer group in
// GET_CONSUMER_CONNECTION_LIST. Subscriptions (topic → expression) and
// ExpressionTypes (topic → TAG or SQL92) are Sluice additions so that an
// operator can see members that subscribe differently.
type Connection struct {
	ClientID        string            `json:"clientId"`
	ClientAddr      string            `json:"clientAddr"`
	Language        string            `json:"language"`
	Version         int32             `json:"version"`
	Subscriptions   map[string]string `json:"subscriptions,omitempty"`
	ExpressionTypes map[string]string `json:"expressionTypes,omitempty"`
}

// ConsumerConnection is the body of GET_CONSUMER_CONNECTION_LIST (203).
type ConsumerConnection struct {
	ConnectionSet     []Connection                `json:"connectionSet"`
	SubscriptionTable map[string]SubscriptionData `json:"subscriptionTable"`
	ConsumeType       string                      `json:"consumeType"`
	MessageModel      string                      `json:"messageModel"`
	ConsumeFromWhere  string                      `json:"consumeFromWhere"`
}

// ProducerConnection is the body of GET_PRODUCER_CONNECTION_LIST (204).
type ProducerConnection struct {
	ConnectionSet []Connection `json:"connectionSet"`
}

// ConsumerOffsetWrapper is the body of GET_ALL_CONSUMER_OFFSET (43) and
// GET_ALL_DELAY_OFFSET (45): Java's ConsumerOffsetManager, offsets by
// "topic@group", then queue id.
type ConsumerOffsetWrapper struct {
	OffsetTable map[string]map[int32]int64 `json:"offsetTable"`
}
