package protocol

// QueryConsumerOffsetRequestHeader is the header of QUERY_CONSUMER_OFFSET
// (14), spec §3.6.
type QueryConsumerOffsetRequestHeader struct {
	ConsumerGroup string // consumerGroup
	Topic         string // topic
	QueueID       int32  // queueId
	BrokerName    string // bname, optional
}

// ToExt implements ExtHeader.
func (h *QueryConsumerOffsetRequestHeader) ToExt(ext map[string]string) {
	ext["consumerGroup"] = h.ConsumerGroup
	ext["topic"] = h.Topic
	ext["queueId"] = itoa32(h.QueueID)
	putOpt(ext, "bname", h.BrokerName)
}

// FromExt implements ExtHeader.
func (h *QueryConsumerOffsetRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "QueryConsumerOffsetRequestHeader", ext: ext}
	*h = QueryConsumerOffsetRequestHeader{
		ConsumerGroup: r.str("consumerGroup"),
		Topic:         r.str("topic"),
		QueueID:       r.int32("queueId"),
		BrokerName:    r.optStr("bname"),
	}
	return r.err
}

// QueryConsumerOffsetResponseHeader is the ext of a successful
// QUERY_CONSUMER_OFFSET response.
type QueryConsumerOffsetResponseHeader struct {
	Offset int64 // offset
}

// ToExt implements ExtHeader.
func (h *QueryConsumerOffsetResponseHeader) ToExt(ext map[string]string) {
	ext["offset"] = itoa64(h.Offset)
}

// FromExt implements ExtHeader.
func (h *QueryConsumerOffsetResponseHeader) FromExt(ext map[string]string) error {
	return decodeOffset(&h.Offset, "QueryConsumerOffsetResponseHeader", ext)
}

// UpdateConsumerOffsetRequestHeader is the header of UPDATE_CONSUMER_OFFSET
// (15), spec §3.6.
type UpdateConsumerOffsetRequestHeader struct {
	ConsumerGroup string // consumerGroup
	Topic         string // topic
	QueueID       int32  // queueId
	CommitOffset  int64  // commitOffset
	BrokerName    string // bname, optional
}

// ToExt implements ExtHeader.
func (h *UpdateConsumerOffsetRequestHeader) ToExt(ext map[string]string) {
	ext["consumerGroup"] = h.ConsumerGroup
	ext["topic"] = h.Topic
	ext["queueId"] = itoa32(h.QueueID)
	ext["commitOffset"] = itoa64(h.CommitOffset)
	putOpt(ext, "bname", h.BrokerName)
}

// FromExt implements ExtHeader.
func (h *UpdateConsumerOffsetRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "UpdateConsumerOffsetRequestHeader", ext: ext}
	*h = UpdateConsumerOffsetRequestHeader{
		ConsumerGroup: r.str("consumerGroup"),
		Topic:         r.str("topic"),
		QueueID:       r.int32("queueId"),
		CommitOffset:  r.int64("commitOffset"),
		BrokerName:    r.optStr("bname"),
	}
	return r.err
}

// queueRequest is the (topic, queueId, bname) shape shared by GET_MAX_OFFSET,
// GET_MIN_OFFSET and GET_EARLIEST_MSG_STORETIME (spec §3.7).
type queueRequest struct {
	Topic      string // topic
	QueueID    int32  // queueId
	BrokerName string // bname, optional
}

func (h *queueRequest) toExt(ext map[string]string) {
	ext["topic"] = h.Topic
	ext["queueId"] = itoa32(h.QueueID)
	putOpt(ext, "bname", h.BrokerName)
}

func (h *queueRequest) fromExt(name string, ext map[string]string) error {
	r := extReader{header: name, ext: ext}
	*h = queueRequest{Topic: r.str("topic"), QueueID: r.int32("queueId"), BrokerName: r.optStr("bname")}
	return r.err
}

func decodeOffset(dst *int64, name string, ext map[string]string) error {
	r := extReader{header: name, ext: ext}
	*dst = r.int64("offset")
	return r.err
}

// GetMaxOffsetRequestHeader is the header of GET_MAX_OFFSET (30).
type GetMaxOffsetRequestHeader struct {
	Topic      string // topic
	QueueID    int32  // queueId
	BrokerName string // bname, optional
}

// ToExt implements ExtHeader.
func (h *GetMaxOffsetRequestHeader) ToExt(ext map[string]string) { (*queueRequest)(h).toExt(ext) }

// FromExt implements ExtHeader.
func (h *GetMaxOffsetRequestHeader) FromExt(ext map[string]string) error {
	return (*queueRequest)(h).fromExt("GetMaxOffsetRequestHeader", ext)
}

// GetMaxOffsetResponseHeader is the ext of a GET_MAX_OFFSET response: the
// next queue offset to be written.
type GetMaxOffsetResponseHeader struct {
	Offset int64 // offset
}

// ToExt implements ExtHeader.
func (h *GetMaxOffsetResponseHeader) ToExt(ext map[string]string) { ext["offset"] = itoa64(h.Offset) }

// FromExt implements ExtHeader.
func (h *GetMaxOffsetResponseHeader) FromExt(ext map[string]string) error {
	return decodeOffset(&h.Offset, "GetMaxOffsetResponseHeader", ext)
}

// GetMinOffsetRequestHeader is the header of GET_MIN_OFFSET (31).
type GetMinOffsetRequestHeader struct {
	Topic      string // topic
	QueueID    int32  // queueId
	BrokerName string // bname, optional
}

// ToExt implements ExtHeader.
func (h *GetMinOffsetRequestHeader) ToExt(ext map[string]string) { (*queueRequest)(h).toExt(ext) }

// FromExt implements ExtHeader.
func (h *GetMinOffsetRequestHeader) FromExt(ext map[string]string) error {
	return (*queueRequest)(h).fromExt("GetMinOffsetRequestHeader", ext)
}

// GetMinOffsetResponseHeader is the ext of a GET_MIN_OFFSET response: the
// first queue offset still present.
type GetMinOffsetResponseHeader struct {
	Offset int64 // offset
}

// ToExt implements ExtHeader.
func (h *GetMinOffsetResponseHeader) ToExt(ext map[string]string) { ext["offset"] = itoa64(h.Offset) }

// FromExt implements ExtHeader.
func (h *GetMinOffsetResponseHeader) FromExt(ext map[string]string) error {
	return decodeOffset(&h.Offset, "GetMinOffsetResponseHeader", ext)
}

// SearchOffsetByTimestampRequestHeader is the header of
// SEARCH_OFFSET_BY_TIMESTAMP (29).
type SearchOffsetByTimestampRequestHeader struct {
	Topic      string // topic
	QueueID    int32  // queueId
	Timestamp  int64  // timestamp, ms
	BrokerName string // bname, optional
}

// ToExt implements ExtHeader.
func (h *SearchOffsetByTimestampRequestHeader) ToExt(ext map[string]string) {
	ext["topic"] = h.Topic
	ext["queueId"] = itoa32(h.QueueID)
	ext["timestamp"] = itoa64(h.Timestamp)
	putOpt(ext, "bname", h.BrokerName)
}

// FromExt implements ExtHeader.
func (h *SearchOffsetByTimestampRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "SearchOffsetByTimestampRequestHeader", ext: ext}
	*h = SearchOffsetByTimestampRequestHeader{
		Topic:      r.str("topic"),
		QueueID:    r.int32("queueId"),
		Timestamp:  r.int64("timestamp"),
		BrokerName: r.optStr("bname"),
	}
	return r.err
}

// SearchOffsetByTimestampResponseHeader is the ext of a
// SEARCH_OFFSET_BY_TIMESTAMP response.
type SearchOffsetByTimestampResponseHeader struct {
	Offset int64 // offset
}

// ToExt implements ExtHeader.
func (h *SearchOffsetByTimestampResponseHeader) ToExt(ext map[string]string) {
	ext["offset"] = itoa64(h.Offset)
}

// FromExt implements ExtHeader.
func (h *SearchOffsetByTimestampResponseHeader) FromExt(ext map[string]string) error {
	return decodeOffset(&h.Offset, "SearchOffsetByTimestampResponseHeader", ext)
}

// GetEarliestMsgStoretimeRequestHeader is the header of
// GET_EARLIEST_MSG_STORETIME (32).
type GetEarliestMsgStoretimeRequestHeader struct {
	Topic      string // topic
	QueueID    int32  // queueId
	BrokerName string // bname, optional
}

// ToExt implements ExtHeader.
func (h *GetEarliestMsgStoretimeRequestHeader) ToExt(ext map[string]string) {
	(*queueRequest)(h).toExt(ext)
}

// FromExt implements ExtHeader.
func (h *GetEarliestMsgStoretimeRequestHeader) FromExt(ext map[string]string) error {
	return (*queueRequest)(h).fromExt("GetEarliestMsgStoretimeRequestHeader", ext)
}

// GetEarliestMsgStoretimeResponseHeader is the ext of a
// GET_EARLIEST_MSG_STORETIME response.
type GetEarliestMsgStoretimeResponseHeader struct {
	Timestamp int64 // timestamp, ms
}

// ToExt implements ExtHeader.
func (h *GetEarliestMsgStoretimeResponseHeader) ToExt(ext map[string]string) {
	ext["timestamp"] = itoa64(h.Timestamp)
}

// FromExt implements ExtHeader.
func (h *GetEarliestMsgStoretimeResponseHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "GetEarliestMsgStoretimeResponseHeader", ext: ext}
	h.Timestamp = r.int64("timestamp")
	return r.err
}
