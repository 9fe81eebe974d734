package protocol

// Topic permission bits (TopicConfig.perm).
const (
	PermInherit = 0x1 // a template topic whose perm new topics inherit
	PermWrite   = 0x2
	PermRead    = 0x4
)

// CreateTopicRequestHeader is the header of UPDATE_AND_CREATE_TOPIC (17),
// spec §3.11.
type CreateTopicRequestHeader struct {
	Topic           string // topic
	DefaultTopic    string // defaultTopic (ignored by the broker)
	ReadQueueNums   int32  // readQueueNums
	WriteQueueNums  int32  // writeQueueNums
	Perm            int32  // perm: Perm* bits, 6 = read+write
	TopicFilterType string // topicFilterType: "SINGLE_TAG" or "MULTI_TAG"
	TopicSysFlag    int32  // topicSysFlag, optional
	Order           bool   // order, optional
	// Attributes, optional: RocketMQ 5's attribute changes, comma-separated
	// "+key=value" (set) and "-key" (remove), e.g. "+message.type=FIFO".
	Attributes string // attributes
}

// ToExt implements ExtHeader.
func (h *CreateTopicRequestHeader) ToExt(ext map[string]string) {
	ext["topic"] = h.Topic
	ext["defaultTopic"] = h.DefaultTopic
	ext["readQueueNums"] = itoa32(h.ReadQueueNums)
	ext["writeQueueNums"] = itoa32(h.WriteQueueNums)
	ext["perm"] = itoa32(h.Perm)
	ext["topicFilterType"] = h.TopicFilterType
	ext["topicSysFlag"] = itoa32(h.TopicSysFlag)
	ext["order"] = btoa(h.Order)
	if h.Attributes != "" {
		ext["attributes"] = h.Attributes
	}
}

// FromExt implements ExtHeader.
func (h *CreateTopicRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "CreateTopicRequestHeader", ext: ext}
	*h = CreateTopicRequestHeader{
		Topic:           r.str("topic"),
		DefaultTopic:    r.str("defaultTopic"),
		ReadQueueNums:   r.int32("readQueueNums"),
		WriteQueueNums:  r.int32("writeQueueNums"),
		Perm:            r.int32("perm"),
		TopicFilterType: r.str("topicFilterType"),
		TopicSysFlag:    r.optInt32("topicSysFlag"),
		Order:           r.optBool("order"),
		Attributes:      r.optStr("attributes"),
	}
	return r.err
}

// DeleteTopicRequestHeader is the header of DELETE_TOPIC_IN_BROKER (215),
// spec §3.11.
type DeleteTopicRequestHeader struct {
	Topic string // topic
}

// ToExt implements ExtHeader.
func (h *DeleteTopicRequestHeader) ToExt(ext map[string]string) { ext["topic"] = h.Topic }

// FromExt implements ExtHeader.
func (h *DeleteTopicRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "DeleteTopicRequestHeader", ext: ext}
	h.Topic = r.str("topic")
	return r.err
}

// ViewMessageByIDRequestHeader is the header of VIEW_MESSAGE_BY_ID (33),
// spec §3.12.
type ViewMessageByIDRequestHeader struct {
	Offset int64 // offset: physical commitlog offset
}

// ToExt implements ExtHeader.
func (h *ViewMessageByIDRequestHeader) ToExt(ext map[string]string) { ext["offset"] = itoa64(h.Offset) }

// FromExt implements ExtHeader.
func (h *ViewMessageByIDRequestHeader) FromExt(ext map[string]string) error {
	return decodeOffset(&h.Offset, "ViewMessageByIDRequestHeader", ext)
}

// QueryMessageRequestHeader is the header of QUERY_MESSAGE (12),
// spec §3.12.
type QueryMessageRequestHeader struct {
	Topic          string // topic
	Key            string // key: a KEYS token or UNIQ_KEY
	MaxNum         int32  // maxNum
	BeginTimestamp int64  // beginTimestamp, ms
	EndTimestamp   int64  // endTimestamp, ms
}

// ToExt implements ExtHeader.
func (h *QueryMessageRequestHeader) ToExt(ext map[string]string) {
	ext["topic"] = h.Topic
	ext["key"] = h.Key
	ext["maxNum"] = itoa32(h.MaxNum)
	ext["beginTimestamp"] = itoa64(h.BeginTimestamp)
	ext["endTimestamp"] = itoa64(h.EndTimestamp)
}

// FromExt implements ExtHeader.
func (h *QueryMessageRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "QueryMessageRequestHeader", ext: ext}
	*h = QueryMessageRequestHeader{
		Topic:          r.str("topic"),
		Key:            r.str("key"),
		MaxNum:         r.int32("maxNum"),
		BeginTimestamp: r.int64("beginTimestamp"),
		EndTimestamp:   r.int64("endTimestamp"),
	}
	return r.err
}

// QueryMessageResponseHeader is the ext of a QUERY_MESSAGE response.
type QueryMessageResponseHeader struct {
	IndexLastUpdateTimestamp int64 // indexLastUpdateTimestamp
	IndexLastUpdatePhyoffset int64 // indexLastUpdatePhyoffset
}

// ToExt implements ExtHeader.
func (h *QueryMessageResponseHeader) ToExt(ext map[string]string) {
	ext["indexLastUpdateTimestamp"] = itoa64(h.IndexLastUpdateTimestamp)
	ext["indexLastUpdatePhyoffset"] = itoa64(h.IndexLastUpdatePhyoffset)
}

// FromExt implements ExtHeader.
func (h *QueryMessageResponseHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "QueryMessageResponseHeader", ext: ext}
	*h = QueryMessageResponseHeader{
		IndexLastUpdateTimestamp: r.int64("indexLastUpdateTimestamp"),
		IndexLastUpdatePhyoffset: r.int64("indexLastUpdatePhyoffset"),
	}
	return r.err
}
