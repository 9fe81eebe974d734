package protocol

// ReplyTopic is the topic request-reply responders send their replies to
// (spec 7.10): one per cluster, on every broker of it.
func ReplyTopic(cluster string) string { return cluster + "_REPLY_TOPIC" }

// ReplyMessageRequestHeader is the header of PUSH_REPLY_MESSAGE_TO_CLIENT
// (326), broker → the requesting client (request-reply, spec §4): the
// reply message's fields, long names, as Java's.
type ReplyMessageRequestHeader struct {
	ProducerGroup         string // producerGroup
	Topic                 string // topic
	DefaultTopic          string // defaultTopic
	DefaultTopicQueueNums int32  // defaultTopicQueueNums
	QueueID               int32  // queueId
	SysFlag               int32  // sysFlag
	BornTimestamp         int64  // bornTimestamp
	Flag                  int32  // flag
	Properties            string // properties, optional
	ReconsumeTimes        int32  // reconsumeTimes, optional
	UnitMode              bool   // unitMode, optional
	BornHost              string // bornHost
	StoreHost             string // storeHost
	StoreTimestamp        int64  // storeTimestamp
}

func (h *ReplyMessageRequestHeader) extLen() int { return 14 }

// ToExt implements ExtHeader.
func (h *ReplyMessageRequestHeader) ToExt(ext map[string]string) {
	ext["producerGroup"] = h.ProducerGroup
	ext["topic"] = h.Topic
	ext["defaultTopic"] = h.DefaultTopic
	ext["defaultTopicQueueNums"] = itoa32(h.DefaultTopicQueueNums)
	ext["queueId"] = itoa32(h.QueueID)
	ext["sysFlag"] = itoa32(h.SysFlag)
	ext["bornTimestamp"] = itoa64(h.BornTimestamp)
	ext["flag"] = itoa32(h.Flag)
	putOpt(ext, "properties", h.Properties)
	ext["reconsumeTimes"] = itoa32(h.ReconsumeTimes)
	ext["unitMode"] = btoa(h.UnitMode)
	ext["bornHost"] = h.BornHost
	ext["storeHost"] = h.StoreHost
	ext["storeTimestamp"] = itoa64(h.StoreTimestamp)
}

// FromExt implements ExtHeader.
func (h *ReplyMessageRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "ReplyMessageRequestHeader", ext: ext}
	*h = ReplyMessageRequestHeader{
		ProducerGroup:         r.optStr("producerGroup"),
		Topic:                 r.str("topic"),
		DefaultTopic:          r.optStr("defaultTopic"),
		DefaultTopicQueueNums: r.optInt32("defaultTopicQueueNums"),
		QueueID:               r.int32("queueId"),
		SysFlag:               r.optInt32("sysFlag"),
		BornTimestamp:         r.optInt64("bornTimestamp"),
		Flag:                  r.optInt32("flag"),
		Properties:            r.optStr("properties"),
		ReconsumeTimes:        r.optInt32("reconsumeTimes"),
		UnitMode:              r.optBool("unitMode"),
		BornHost:              r.optStr("bornHost"),
		StoreHost:             r.optStr("storeHost"),
		StoreTimestamp:        r.optInt64("storeTimestamp"),
	}
	return r.err
}
