package protocol

// JSON bodies of RocketMQ requests and responses (spec sections 3 and 5),
// shared by the broker, the nameserver and the client. Field names and
// shapes are what the official Go client reads and writes.

// DataVersion changes whenever a broker's topic table does.
type DataVersion struct {
	Timestamp int64 `json:"timestamp" msgpack:"ts"`
	Counter   int64 `json:"counter" msgpack:"counter"`
}

// TopicConfig is one topic's configuration (RocketMQ's TopicConfig).
type TopicConfig struct {
	TopicName       string `json:"topicName" msgpack:"name"`
	ReadQueueNums   int32  `json:"readQueueNums" msgpack:"read"`
	WriteQueueNums  int32  `json:"writeQueueNums" msgpack:"write"`
	Perm            int32  `json:"perm" msgpack:"perm"`
	TopicFilterType string `json:"topicFilterType" msgpack:"filter"`
	TopicSysFlag    int32  `json:"topicSysFlag" msgpack:"sysflag"`
	Order           bool   `json:"order" msgpack:"order"`
	// Attributes are RocketMQ 5's topic attributes (mqadmin updateTopic -a
	// +message.type=FIFO); nil when none. Never modified once in a table:
	// a change makes a new map.
	Attributes map[string]string `json:"attributes,omitempty" msgpack:"attrs,omitempty"`
}

// AttrMessageType is the topic attribute naming the message types a topic
// takes (NORMAL, FIFO, DELAY, TRANSACTION, MIXED; unset is MIXED).
const AttrMessageType = "message.type"

// Queues returns the number of queue ids in use: max(read, write).
func (c TopicConfig) Queues() int32 { return max(c.ReadQueueNums, c.WriteQueueNums) }

// Readable reports the read permission bit.
func (c TopicConfig) Readable() bool { return c.Perm&PermRead != 0 }

// Writable reports the write permission bit.
func (c TopicConfig) Writable() bool { return c.Perm&PermWrite != 0 }

// TopicConfigSerializeWrapper is a broker's topic table with its version.
type TopicConfigSerializeWrapper struct {
	TopicConfigTable map[string]TopicConfig `json:"topicConfigTable"`
	DataVersion      DataVersion            `json:"dataVersion"`
}

// RegisterBrokerBody is the body of REGISTER_BROKER (spec 5.2).
type RegisterBrokerBody struct {
	TopicConfigSerializeWrapper TopicConfigSerializeWrapper `json:"topicConfigSerializeWrapper"`
	FilterServerList            []string                    `json:"filterServerList"`
}

// QueueData is one broker's queues of a topic in a route.
type QueueData struct {
	BrokerName     string `json:"brokerName"`
	ReadQueueNums  int32  `json:"readQueueNums"`
	WriteQueueNums int32  `json:"writeQueueNums"`
	Perm           int32  `json:"perm"`
	TopicSysFlag   int32  `json:"topicSysFlag"`
}

// BrokerData is one broker name's addresses by broker id ("0" = master).
// encoding/json writes the int64 keys quoted and compact, which both the
// Go client's hand parser and Java accept (spec 5.1).
type BrokerData struct {
	Cluster     string           `json:"cluster"`
	BrokerName  string           `json:"brokerName"`
	BrokerAddrs map[int64]string `json:"brokerAddrs"`
	// GrpcAddrs (Sluice) are the RocketMQ 5 gRPC addresses by broker id,
	// in routes asked for with withGrpc only.
	GrpcAddrs map[int64]string `json:"grpcAddrs,omitempty"`
}

// TopicRouteData is the body of a GET_ROUTEINFO_BY_TOPIC response.
// QueueDatas must never be null: the Go client fails on it.
type TopicRouteData struct {
	OrderTopicConf    string              `json:"orderTopicConf,omitempty"`
	QueueDatas        []QueueData         `json:"queueDatas"`
	BrokerDatas       []BrokerData        `json:"brokerDatas"`
	FilterServerTable map[string][]string `json:"filterServerTable"`
}

// ClusterInfo is the body of GET_BROKER_CLUSTER_INFO.
type ClusterInfo struct {
	BrokerAddrTable  map[string]BrokerData `json:"brokerAddrTable"`
	ClusterAddrTable map[string][]string   `json:"clusterAddrTable"`
}

// TopicList is the body of GET_ALL_TOPIC_LIST_FROM_NAMESERVER and
// GET_TOPICS_BY_CLUSTER.
type TopicList struct {
	TopicList []string `json:"topicList"`
}

// SubscriptionData is one subscription in a heartbeat (spec 3.3). CodeSet
// travels as strings from the Go client; the broker recomputes it.
type SubscriptionData struct {
	ClassFilterMode bool     `json:"classFilterMode"`
	Topic           string   `json:"topic"`
	SubString       string   `json:"subString"`
	TagsSet         []string `json:"tagsSet"`
	CodeSet         []any    `json:"codeSet"`
	SubVersion      int64    `json:"subVersion"`
	ExpressionType  string   `json:"expressionType"`
}

// ConsumerData is one consumer group's entry in a heartbeat.
type ConsumerData struct {
	GroupName           string             `json:"groupName"`
	ConsumeType         string             `json:"consumeType"`
	MessageModel        string             `json:"messageModel"`
	ConsumeFromWhere    string             `json:"consumeFromWhere"`
	SubscriptionDataSet []SubscriptionData `json:"subscriptionDataSet"`
	UnitMode            bool               `json:"unitMode"`
}

// ProducerData is one producer group's entry in a heartbeat.
type ProducerData struct {
	GroupName string `json:"groupName"`
}

// HeartbeatData is the body of HEART_BEAT.
type HeartbeatData struct {
	ClientID        string         `json:"clientID"`
	ProducerDataSet []ProducerData `json:"producerDataSet"`
	ConsumerDataSet []ConsumerData `json:"consumerDataSet"`
}

// ConsumerList is the body of a GET_CONSUMER_LIST_BY_GROUP response.
type ConsumerList struct {
	ConsumerIDList []string `json:"consumerIdList"`
}

// MessageQueue names one queue of one broker.
type MessageQueue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
}

// LockBatchRequest is the body of LOCK_BATCH_MQ and UNLOCK_BATCH_MQ.
type LockBatchRequest struct {
	ConsumerGroup string         `json:"consumerGroup"`
	ClientID      string         `json:"clientId"`
	MQSet         []MessageQueue `json:"mqSet"`
}

// LockBatchResponse is the body of a LOCK_BATCH_MQ response.
type LockBatchResponse struct {
	LockOKMQSet []MessageQueue `json:"lockOKMQSet"`
}
