package protocol

// ConsumerSendMsgBackRequestHeader is the header of CONSUMER_SEND_MSG_BACK
// (36), spec §3.8.
type ConsumerSendMsgBackRequestHeader struct {
	Offset      int64  // offset: commitlog (physical) offset of the failed message
	Group       string // group
	DelayLevel  int32  // delayLevel: 0 = broker picks 3+reconsumeTimes; <0 = DLQ
	OriginMsgID string // originMsgId, optional
	OriginTopic string // originTopic, optional
	UnitMode    bool   // unitMode, optional
	// MaxReconsumeTimes is optional; nil means the group's retryMaxTimes.
	MaxReconsumeTimes *int32
	BrokerName        string // bname, optional
}

// ToExt implements ExtHeader.
func (h *ConsumerSendMsgBackRequestHeader) ToExt(ext map[string]string) {
	ext["offset"] = itoa64(h.Offset)
	ext["group"] = h.Group
	ext["delayLevel"] = itoa32(h.DelayLevel)
	putOpt(ext, "originMsgId", h.OriginMsgID)
	putOpt(ext, "originTopic", h.OriginTopic)
	ext["unitMode"] = btoa(h.UnitMode)
	if h.MaxReconsumeTimes != nil {
		ext["maxReconsumeTimes"] = itoa32(*h.MaxReconsumeTimes)
	}
	putOpt(ext, "bname", h.BrokerName)
}

// FromExt implements ExtHeader.
func (h *ConsumerSendMsgBackRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "ConsumerSendMsgBackRequestHeader", ext: ext}
	*h = ConsumerSendMsgBackRequestHeader{
		Offset:            r.int64("offset"),
		Group:             r.str("group"),
		DelayLevel:        r.int32("delayLevel"),
		OriginMsgID:       r.optStr("originMsgId"),
		OriginTopic:       r.optStr("originTopic"),
		UnitMode:          r.optBool("unitMode"),
		MaxReconsumeTimes: r.optInt32Ptr("maxReconsumeTimes"),
		BrokerName:        r.optStr("bname"),
	}
	return r.err
}

// GetConsumerListByGroupRequestHeader is the header of
// GET_CONSUMER_LIST_BY_GROUP (38), spec §3.5.
type GetConsumerListByGroupRequestHeader struct {
	ConsumerGroup string // consumerGroup
}

// ToExt implements ExtHeader.
func (h *GetConsumerListByGroupRequestHeader) ToExt(ext map[string]string) {
	ext["consumerGroup"] = h.ConsumerGroup
}

// FromExt implements ExtHeader.
func (h *GetConsumerListByGroupRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "GetConsumerListByGroupRequestHeader", ext: ext}
	h.ConsumerGroup = r.str("consumerGroup")
	return r.err
}

// GetProducerConnectionListRequestHeader is the header of
// GET_PRODUCER_CONNECTION_LIST (204).
type GetProducerConnectionListRequestHeader struct {
	ProducerGroup string // producerGroup
}

// ToExt implements ExtHeader.
func (h *GetProducerConnectionListRequestHeader) ToExt(ext map[string]string) {
	ext["producerGroup"] = h.ProducerGroup
}

// FromExt implements ExtHeader.
func (h *GetProducerConnectionListRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "GetProducerConnectionListRequestHeader", ext: ext}
	h.ProducerGroup = r.str("producerGroup")
	return r.err
}

// NotifyConsumerIDsChangedRequestHeader is the header of
// NOTIFY_CONSUMER_IDS_CHANGED (40), broker → client, spec §4.
type NotifyConsumerIDsChangedRequestHeader struct {
	ConsumerGroup string // consumerGroup
}

// ToExt implements ExtHeader.
func (h *NotifyConsumerIDsChangedRequestHeader) ToExt(ext map[string]string) {
	ext["consumerGroup"] = h.ConsumerGroup
}

// FromExt implements ExtHeader.
func (h *NotifyConsumerIDsChangedRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "NotifyConsumerIDsChangedRequestHeader", ext: ext}
	h.ConsumerGroup = r.str("consumerGroup")
	return r.err
}

// UnregisterClientRequestHeader is the header of UNREGISTER_CLIENT (35),
// spec §3.4 (Java clients only).
type UnregisterClientRequestHeader struct {
	ClientID      string // clientID
	ProducerGroup string // producerGroup, optional
	ConsumerGroup string // consumerGroup, optional
}

// ToExt implements ExtHeader.
func (h *UnregisterClientRequestHeader) ToExt(ext map[string]string) {
	ext["clientID"] = h.ClientID
	putOpt(ext, "producerGroup", h.ProducerGroup)
	putOpt(ext, "consumerGroup", h.ConsumerGroup)
}

// FromExt implements ExtHeader.
func (h *UnregisterClientRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "UnregisterClientRequestHeader", ext: ext}
	*h = UnregisterClientRequestHeader{
		ClientID:      r.str("clientID"),
		ProducerGroup: r.optStr("producerGroup"),
		ConsumerGroup: r.optStr("consumerGroup"),
	}
	return r.err
}

// ResetOffsetRequestHeader is the header of RESET_CONSUMER_CLIENT_OFFSET
// (220), broker → client, spec §4, and of INVOKE_BROKER_TO_RESET_OFFSET
// (222), admin → broker.
type ResetOffsetRequestHeader struct {
	Topic     string // topic
	Group     string // group
	Timestamp int64  // timestamp, ms
	IsForce   bool   // isForce
}

// ToExt implements ExtHeader.
func (h *ResetOffsetRequestHeader) ToExt(ext map[string]string) {
	ext["topic"] = h.Topic
	ext["group"] = h.Group
	ext["timestamp"] = itoa64(h.Timestamp)
	ext["isForce"] = btoa(h.IsForce)
}

// FromExt implements ExtHeader.
func (h *ResetOffsetRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "ResetOffsetRequestHeader", ext: ext}
	*h = ResetOffsetRequestHeader{
		Topic:     r.str("topic"),
		Group:     r.str("group"),
		Timestamp: r.int64("timestamp"),
		IsForce:   r.boolean("isForce"),
	}
	return r.err
}

// GetConsumerRunningInfoRequestHeader is the header of
// GET_CONSUMER_RUNNING_INFO (307), broker → client, spec §4.
type GetConsumerRunningInfoRequestHeader struct {
	ConsumerGroup string // consumerGroup
	ClientID      string // clientId
	JstackEnable  bool   // jstackEnable, optional
}

// ToExt implements ExtHeader.
func (h *GetConsumerRunningInfoRequestHeader) ToExt(ext map[string]string) {
	ext["consumerGroup"] = h.ConsumerGroup
	ext["clientId"] = h.ClientID
	ext["jstackEnable"] = btoa(h.JstackEnable)
}

// FromExt implements ExtHeader.
func (h *GetConsumerRunningInfoRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "GetConsumerRunningInfoRequestHeader", ext: ext}
	*h = GetConsumerRunningInfoRequestHeader{
		ConsumerGroup: r.str("consumerGroup"),
		ClientID:      r.str("clientId"),
		JstackEnable:  r.optBool("jstackEnable"),
	}
	return r.err
}

// ConsumeMessageDirectlyRequestHeader is the header of
// CONSUME_MESSAGE_DIRECTLY (309), broker → client, spec §4 (Java's
// ConsumeMessageDirectlyResultRequestHeader).
type ConsumeMessageDirectlyRequestHeader struct {
	ConsumerGroup string // consumerGroup
	ClientID      string // clientId, optional
	MsgID         string // msgId, optional
	BrokerName    string // brokerName, optional
}

// ToExt implements ExtHeader.
func (h *ConsumeMessageDirectlyRequestHeader) ToExt(ext map[string]string) {
	ext["consumerGroup"] = h.ConsumerGroup
	putOpt(ext, "clientId", h.ClientID)
	putOpt(ext, "msgId", h.MsgID)
	putOpt(ext, "brokerName", h.BrokerName)
}

// FromExt implements ExtHeader.
func (h *ConsumeMessageDirectlyRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "ConsumeMessageDirectlyRequestHeader", ext: ext}
	*h = ConsumeMessageDirectlyRequestHeader{
		ConsumerGroup: r.str("consumerGroup"),
		ClientID:      r.optStr("clientId"),
		MsgID:         r.optStr("msgId"),
		BrokerName:    r.optStr("brokerName"),
	}
	return r.err
}

// GetConsumerStatusRequestHeader is the header of
// GET_CONSUMER_STATUS_FROM_CLIENT (221), broker → client, spec §4.
type GetConsumerStatusRequestHeader struct {
	Topic      string // topic
	Group      string // group
	ClientAddr string // clientAddr, optional
}

// ToExt implements ExtHeader.
func (h *GetConsumerStatusRequestHeader) ToExt(ext map[string]string) {
	ext["topic"] = h.Topic
	ext["group"] = h.Group
	putOpt(ext, "clientAddr", h.ClientAddr)
}

// FromExt implements ExtHeader.
func (h *GetConsumerStatusRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "GetConsumerStatusRequestHeader", ext: ext}
	*h = GetConsumerStatusRequestHeader{
		Topic:      r.str("topic"),
		Group:      r.str("group"),
		ClientAddr: r.optStr("clientAddr"),
	}
	return r.err
}
