package protocol

// Pull sysFlag bits (spec §3.2).
const (
	PullFlagCommitOffset = 0x1  // store commitOffset for the group
	PullFlagSuspend      = 0x2  // allow long polling
	PullFlagSubscription = 0x4  // subscription present in this request
	PullFlagClassFilter  = 0x8  // class filter (unsupported)
	PullFlagLitePull     = 0x10 // lite pull consumer (4.9.x)
)

// PullMessageRequestHeader is the header of PULL_MESSAGE (11), spec §3.2.
type PullMessageRequestHeader struct {
	ConsumerGroup        string // consumerGroup
	Topic                string // topic
	QueueID              int32  // queueId
	QueueOffset          int64  // queueOffset: first queue offset wanted
	MaxMsgNums           int32  // maxMsgNums: 0 from the Go pull consumer
	SysFlag              int32  // sysFlag: PullFlag* bits
	CommitOffset         int64  // commitOffset: stored when PullFlagCommitOffset
	SuspendTimeoutMillis int64  // suspendTimeoutMillis: long-poll hold, 20000 from Go
	Subscription         string // subscription, optional: tag expression
	SubVersion           int64  // subVersion
	ExpressionType       string // expressionType, optional: "TAG" or "SQL92"
	BrokerName           string // bname, optional
}

func (h *PullMessageRequestHeader) extLen() int { return 12 }

// ExtLen implements ExtWriter.
func (h *PullMessageRequestHeader) ExtLen() int {
	n := 10
	if h.ExpressionType != "" {
		n++
	}
	if h.BrokerName != "" {
		n++
	}
	return n
}

// WriteExt implements ExtWriter: a consumer's pull, often one a message,
// is encoded without a map of its 12 fields.
func (h *PullMessageRequestHeader) WriteExt(e ExtEncoder) {
	e.Str("consumerGroup", h.ConsumerGroup)
	e.Str("topic", h.Topic)
	e.Int("queueId", int64(h.QueueID))
	e.Int("queueOffset", h.QueueOffset)
	e.Int("maxMsgNums", int64(h.MaxMsgNums))
	e.Int("sysFlag", int64(h.SysFlag))
	e.Int("commitOffset", h.CommitOffset)
	e.Int("suspendTimeoutMillis", h.SuspendTimeoutMillis)
	e.Str("subscription", h.Subscription)
	e.Int("subVersion", h.SubVersion)
	if h.ExpressionType != "" {
		e.Str("expressionType", h.ExpressionType)
	}
	if h.BrokerName != "" {
		e.Str("bname", h.BrokerName)
	}
}

// ToExt implements ExtHeader.
func (h *PullMessageRequestHeader) ToExt(ext map[string]string) {
	ext["consumerGroup"] = h.ConsumerGroup
	ext["topic"] = h.Topic
	ext["queueId"] = itoa32(h.QueueID)
	ext["queueOffset"] = itoa64(h.QueueOffset)
	ext["maxMsgNums"] = itoa32(h.MaxMsgNums)
	ext["sysFlag"] = itoa32(h.SysFlag)
	ext["commitOffset"] = itoa64(h.CommitOffset)
	ext["suspendTimeoutMillis"] = itoa64(h.SuspendTimeoutMillis)
	ext["subscription"] = h.Subscription
	ext["subVersion"] = itoa64(h.SubVersion)
	putOpt(ext, "expressionType", h.ExpressionType)
	putOpt(ext, "bname", h.BrokerName)
}

// FromExt implements ExtHeader.
func (h *PullMessageRequestHeader) FromExt(ext map[string]string) error {
	return h.read(&extReader{header: "PullMessageRequestHeader", ext: ext})
}

// FromExtPairs is FromExt from the fields of a header read without a map
// (remoting.Header.ExtPairs: a pull Sluice's client sent).
func (h *PullMessageRequestHeader) FromExtPairs(kv ExtPairs) error {
	return h.read(&extReader{header: "PullMessageRequestHeader", pairs: orNoFields(kv)})
}

func (h *PullMessageRequestHeader) read(r *extReader) error {
	*h = PullMessageRequestHeader{
		ConsumerGroup:        r.str("consumerGroup"),
		Topic:                r.str("topic"),
		QueueID:              r.int32("queueId"),
		QueueOffset:          r.int64("queueOffset"),
		MaxMsgNums:           r.int32("maxMsgNums"),
		SysFlag:              r.int32("sysFlag"),
		CommitOffset:         r.int64("commitOffset"),
		SuspendTimeoutMillis: r.int64("suspendTimeoutMillis"),
		Subscription:         r.optStr("subscription"),
		SubVersion:           r.int64("subVersion"),
		ExpressionType:       r.optStr("expressionType"),
		BrokerName:           r.optStr("bname"),
	}
	return r.err
}

// PullMessageResponseHeader is the ext of every PULL_MESSAGE response with
// code 0, 19, 20 or 21 (spec §3.2). The Go client relies on
// NextBeginOffset being present and right.
type PullMessageResponseHeader struct {
	SuggestWhichBrokerID int64 // suggestWhichBrokerId: 0 = master
	NextBeginOffset      int64 // nextBeginOffset
	MinOffset            int64 // minOffset
	MaxOffset            int64 // maxOffset
}

// ToExt implements ExtHeader.
func (h *PullMessageResponseHeader) ToExt(ext map[string]string) { h.WriteExt(MapEncoder(ext)) }

// ExtLen implements ExtWriter.
func (h *PullMessageResponseHeader) ExtLen() int { return 4 }

// WriteExt implements ExtWriter: a pull's answer, often one a message, is
// encoded without a map of its 4 fields.
func (h *PullMessageResponseHeader) WriteExt(e ExtEncoder) {
	e.Int("suggestWhichBrokerId", h.SuggestWhichBrokerID)
	e.Int("nextBeginOffset", h.NextBeginOffset)
	e.Int("minOffset", h.MinOffset)
	e.Int("maxOffset", h.MaxOffset)
}

// FromExt implements ExtHeader.
func (h *PullMessageResponseHeader) FromExt(ext map[string]string) error {
	return h.read(&extReader{header: "PullMessageResponseHeader", ext: ext})
}

// FromExtPairs is FromExt from the fields of a header read without a map
// (remoting.Header.ExtPairs: a pull's answer).
func (h *PullMessageResponseHeader) FromExtPairs(kv ExtPairs) error {
	return h.read(&extReader{header: "PullMessageResponseHeader", pairs: orNoFields(kv)})
}

func (h *PullMessageResponseHeader) read(r *extReader) error {
	*h = PullMessageResponseHeader{
		SuggestWhichBrokerID: r.int64("suggestWhichBrokerId"),
		NextBeginOffset:      r.int64("nextBeginOffset"),
		MinOffset:            r.int64("minOffset"),
		MaxOffset:            r.int64("maxOffset"),
	}
	return r.err
}
