package protocol

import (
	"errors"
	"strconv"
)

// SendMessageRequestHeader is the header of SEND_MESSAGE (10) with long key
// names (spec §3.1). SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320)
// carry the same fields under one-letter keys: see
// SendMessageRequestHeaderV2.
type SendMessageRequestHeader struct {
	ProducerGroup         string // producerGroup (a)
	Topic                 string // topic (b)
	DefaultTopic          string // defaultTopic (c): auto-create template, "TBW102"
	DefaultTopicQueueNums int32  // defaultTopicQueueNums (d)
	QueueID               int32  // queueId (e): negative = broker picks
	SysFlag               int32  // sysFlag (f): message sysFlag bits
	BornTimestamp         int64  // bornTimestamp (g): client ms
	Flag                  int32  // flag (h): user flag
	Properties            string // properties (i), optional: encoded properties string
	ReconsumeTimes        int32  // reconsumeTimes (j), optional
	UnitMode              bool   // unitMode (k), optional
	// MaxReconsumeTimes (l) is optional and its absence matters: nil means
	// "use the subscription group's retryMaxTimes".
	MaxReconsumeTimes *int32
	Batch             bool   // batch (m), optional
	BrokerName        string // bname (n), optional; sent by the Go client, ignored by Java 4.9.8
}

// SendMessageRequestHeaderV2 is SendMessageRequestHeader under the
// one-letter keys of SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320):
// a=producerGroup b=topic c=defaultTopic d=defaultTopicQueueNums e=queueId
// f=sysFlag g=bornTimestamp h=flag i=properties j=reconsumeTimes k=unitMode
// l=maxReconsumeTimes m=batch n=brokerName. Convert with a type conversion
// or with V2 / V1.
type SendMessageRequestHeaderV2 SendMessageRequestHeader

// V2 returns h in its one-letter form.
func (h *SendMessageRequestHeader) V2() SendMessageRequestHeaderV2 {
	return SendMessageRequestHeaderV2(*h)
}

// V1 returns h in its long-name form.
func (h *SendMessageRequestHeaderV2) V1() SendMessageRequestHeader {
	return SendMessageRequestHeader(*h)
}

type sendKeys struct {
	header                                                    string
	producerGroup, topic, defaultTopic, defaultTopicQueueNum  string
	queueID, sysFlag, bornTimestamp, flag, properties         string
	reconsumeTimes, unitMode, maxReconsumeTimes, batch, bname string
}

var (
	sendKeysLong = sendKeys{
		header:        "SendMessageRequestHeader",
		producerGroup: "producerGroup", topic: "topic", defaultTopic: "defaultTopic",
		defaultTopicQueueNum: "defaultTopicQueueNums", queueID: "queueId", sysFlag: "sysFlag",
		bornTimestamp: "bornTimestamp", flag: "flag", properties: "properties",
		reconsumeTimes: "reconsumeTimes", unitMode: "unitMode",
		maxReconsumeTimes: "maxReconsumeTimes", batch: "batch", bname: "bname",
	}
	sendKeysShort = sendKeys{
		header:        "SendMessageRequestHeaderV2",
		producerGroup: "a", topic: "b", defaultTopic: "c", defaultTopicQueueNum: "d",
		queueID: "e", sysFlag: "f", bornTimestamp: "g", flag: "h", properties: "i",
		reconsumeTimes: "j", unitMode: "k", maxReconsumeTimes: "l", batch: "m", bname: "n",
	}
)

func (h *SendMessageRequestHeader) writeExt(e ExtEncoder, k *sendKeys) {
	e.Str(k.producerGroup, h.ProducerGroup)
	e.Str(k.topic, h.Topic)
	e.Str(k.defaultTopic, h.DefaultTopic)
	e.Int(k.defaultTopicQueueNum, int64(h.DefaultTopicQueueNums))
	e.Int(k.queueID, int64(h.QueueID))
	e.Int(k.sysFlag, int64(h.SysFlag))
	e.Int(k.bornTimestamp, h.BornTimestamp)
	e.Int(k.flag, int64(h.Flag))
	e.Str(k.properties, h.Properties)
	e.Int(k.reconsumeTimes, int64(h.ReconsumeTimes))
	e.Str(k.unitMode, btoa(h.UnitMode))
	if h.MaxReconsumeTimes != nil {
		e.Int(k.maxReconsumeTimes, int64(*h.MaxReconsumeTimes))
	}
	e.Str(k.batch, btoa(h.Batch))
	if h.BrokerName != "" {
		e.Str(k.bname, h.BrokerName)
	}
}

// ExtLen implements ExtWriter.
func (h *SendMessageRequestHeader) ExtLen() int {
	n := 12
	if h.MaxReconsumeTimes != nil {
		n++
	}
	if h.BrokerName != "" {
		n++
	}
	return n
}

func (h *SendMessageRequestHeader) fromExt(ext map[string]string, k *sendKeys) error {
	r := extReader{header: k.header, ext: ext}
	return h.read(&r, k)
}

func (h *SendMessageRequestHeader) read(r *extReader, k *sendKeys) error {
	*h = SendMessageRequestHeader{
		ProducerGroup:         r.str(k.producerGroup),
		Topic:                 r.str(k.topic),
		DefaultTopic:          r.str(k.defaultTopic),
		DefaultTopicQueueNums: r.int32(k.defaultTopicQueueNum),
		QueueID:               r.int32(k.queueID),
		SysFlag:               r.int32(k.sysFlag),
		BornTimestamp:         r.int64(k.bornTimestamp),
		Flag:                  r.int32(k.flag),
		Properties:            r.optStr(k.properties),
		ReconsumeTimes:        r.optInt32(k.reconsumeTimes),
		UnitMode:              r.optBool(k.unitMode),
		MaxReconsumeTimes:     r.optInt32Ptr(k.maxReconsumeTimes),
		Batch:                 r.optBool(k.batch),
		BrokerName:            r.optStr(k.bname),
	}
	return r.err
}

// ToExt implements ExtHeader with the long key names.
func (h *SendMessageRequestHeader) ToExt(ext map[string]string) {
	h.writeExt(MapEncoder(ext), &sendKeysLong)
}

// WriteExt implements ExtWriter.
func (h *SendMessageRequestHeader) WriteExt(e ExtEncoder) { h.writeExt(e, &sendKeysLong) }

// FromExt implements ExtHeader with the long key names.
func (h *SendMessageRequestHeader) FromExt(ext map[string]string) error {
	return h.fromExt(ext, &sendKeysLong)
}

// ToExt implements ExtHeader with the one-letter key names.
func (h *SendMessageRequestHeaderV2) ToExt(ext map[string]string) {
	(*SendMessageRequestHeader)(h).writeExt(MapEncoder(ext), &sendKeysShort)
}

// ExtLen implements ExtWriter.
func (h *SendMessageRequestHeaderV2) ExtLen() int { return (*SendMessageRequestHeader)(h).ExtLen() }

// WriteExt implements ExtWriter with the one-letter key names.
func (h *SendMessageRequestHeaderV2) WriteExt(e ExtEncoder) {
	(*SendMessageRequestHeader)(h).writeExt(e, &sendKeysShort)
}

// FromExt implements ExtHeader with the one-letter key names.
func (h *SendMessageRequestHeaderV2) FromExt(ext map[string]string) error {
	return (*SendMessageRequestHeader)(h).fromExt(ext, &sendKeysShort)
}

// FromExtPairs is FromExt from the fields of a header read without a map
// (remoting.Header.ExtPairs): a send's (its keys are one letter each).
func (h *SendMessageRequestHeaderV2) FromExtPairs(kv ExtPairs) error {
	if h.fromPairsUsual(kv) {
		return nil
	}
	r := extReader{header: sendKeysShort.header}
	r.readLetters(kv)
	return (*SendMessageRequestHeader)(h).read(&r, &sendKeysShort)
}

// fromPairsUsual reads a send header in one pass over kv, without the
// reader's lookups by key (a quarter of a send header's decoding). It
// returns false, having set nothing, for a header the reader refuses (a
// field missing or malformed): FromExtPairs then reads it again to say
// what is wrong.
func (h *SendMessageRequestHeaderV2) fromPairsUsual(kv ExtPairs) bool {
	var v [14]string // the fields of keys "a" to "n" (sendKeysShort)
	var has uint32
	for i := range kv.Len() {
		if k0, k1 := kv.span[4*i], kv.span[4*i+1]; k1 == k0+1 {
			if c := kv.src[k0] - 'a'; c < uint8(len(v)) {
				v[c] = kv.Value(i) // NB: the last of a repeated key counts
				has |= 1 << c
			}
		}
	}
	const required = 1<<8 - 1 // a to h
	if has&required != required {
		return false
	}
	at := func(c int) (string, bool) { return v[c], has&(1<<c) != 0 }
	queues, ok1 := usualInt(at(3))
	queueID, ok2 := usualInt(at(4))
	sysFlag, ok3 := usualInt(at(5))
	born, ok4 := parseDecimal(v[6], 64) // NB: required, present
	flag, ok5 := usualInt(at(7))
	reconsume, ok6 := usualInt(at(9))
	unit, ok7 := usualBool(at(10))
	maxRe, ok8 := usualInt(at(11))
	batch, ok9 := usualBool(at(12))
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7 && ok8 && ok9) {
		return false
	}
	*h = SendMessageRequestHeaderV2{ProducerGroup: v[0], Topic: v[1], DefaultTopic: v[2], DefaultTopicQueueNums: queues,
		QueueID: queueID, SysFlag: sysFlag, BornTimestamp: born, Flag: flag, Properties: v[8], ReconsumeTimes: reconsume,
		UnitMode: unit, Batch: batch, BrokerName: v[13]}
	if has&(1<<11) != 0 {
		m := maxRe // NB: allocated only when sent
		h.MaxReconsumeTimes = &m
	}
	return true
}

// usualInt reads an int32 field (0 when absent) as extReader.int32 does.
func usualInt(s string, present bool) (int32, bool) {
	if !present {
		return 0, true
	}
	n, ok := parseDecimal(s, 32)
	return int32(n), ok
}

// usualBool reads a boolean field (false when absent) as extReader's
// optBool does.
func usualBool(s string, present bool) (bool, bool) {
	if !present {
		return false, true
	}
	b, err := strconv.ParseBool(s)
	return b, err == nil
}

// ErrNotSendCode is returned by DecodeSendMessageRequestHeader for a code
// that is not a send request.
var ErrNotSendCode = errors.New("protocol: not a send request code")

// DecodeSendMessageRequestHeader reads the send header of a request with
// the given code, as Java does: long names for SEND_MESSAGE (10) and
// SEND_REPLY_MESSAGE (324), one-letter names for SEND_MESSAGE_V2 (310),
// SEND_BATCH_MESSAGE (320) and SEND_REPLY_MESSAGE_V2 (325).
func DecodeSendMessageRequestHeader(code int16, ext map[string]string) (SendMessageRequestHeader, error) {
	var h SendMessageRequestHeader
	switch code {
	case SendMessage, SendReplyMessage:
		return h, h.fromExt(ext, &sendKeysLong)
	case SendMessageV2, SendBatchMessage, SendReplyMessageV2:
		return h, h.fromExt(ext, &sendKeysShort)
	}
	return h, errors.Join(ErrNotSendCode, errors.New("protocol: code "+strconv.Itoa(int(code))+" ("+CodeName(code)+")"))
}

// SendMessageResponseHeader is the ext of a send response (spec §3.1).
type SendMessageResponseHeader struct {
	MsgID string // msgId: offset message id; comma-joined for a batch
	// MsgIDBytes, when not nil, is written as msgId in MsgID's place: a
	// broker builds the ids of its answers in a reused buffer, not in a
	// new string per send. Reading a header sets MsgID only.
	MsgIDBytes    []byte
	QueueID       int32  // queueId: queue actually used
	QueueOffset   int64  // queueOffset: first record's queue offset
	TransactionID string // transactionId, optional
	Region        string // MSG_REGION, optional ("DefaultRegion")
	TraceOn       bool   // TRACE_ON, optional
	// Duplicates (Sluice's "duplicates", optional) counts the messages of
	// the send the broker had stored already (its duplicate window): the
	// ids above are the first copy's. Other clients ignore the field.
	Duplicates int32
}

// ToExt implements ExtHeader.
func (h *SendMessageResponseHeader) ToExt(ext map[string]string) { h.WriteExt(MapEncoder(ext)) }

// ExtLen implements ExtWriter.
func (h *SendMessageResponseHeader) ExtLen() int {
	n := 4
	if h.TransactionID != "" {
		n++
	}
	if h.Region != "" {
		n++
	}
	if h.Duplicates != 0 {
		n++
	}
	return n
}

// WriteExt implements ExtWriter.
func (h *SendMessageResponseHeader) WriteExt(e ExtEncoder) {
	if h.MsgIDBytes != nil {
		e.Bytes("msgId", h.MsgIDBytes)
	} else {
		e.Str("msgId", h.MsgID)
	}
	e.Int("queueId", int64(h.QueueID))
	e.Int("queueOffset", h.QueueOffset)
	if h.TransactionID != "" {
		e.Str("transactionId", h.TransactionID)
	}
	if h.Region != "" {
		e.Str("MSG_REGION", h.Region)
	}
	e.Str("TRACE_ON", btoa(h.TraceOn))
	if h.Duplicates != 0 {
		e.Int("duplicates", int64(h.Duplicates))
	}
}

// FromExt implements ExtHeader.
func (h *SendMessageResponseHeader) FromExt(ext map[string]string) error {
	return h.read(&extReader{header: "SendMessageResponseHeader", ext: ext})
}

// FromExtPairs is FromExt from the fields of a header read without a map
// (remoting.Header.ExtPairs: a send's answer).
func (h *SendMessageResponseHeader) FromExtPairs(kv ExtPairs) error {
	return h.read(&extReader{header: "SendMessageResponseHeader", pairs: orNoFields(kv)})
}

func (h *SendMessageResponseHeader) read(r *extReader) error {
	*h = SendMessageResponseHeader{
		MsgID:         r.str("msgId"),
		QueueID:       r.int32("queueId"),
		QueueOffset:   r.int64("queueOffset"),
		TransactionID: r.optStr("transactionId"),
		Region:        r.optStr("MSG_REGION"),
		TraceOn:       r.optBool("TRACE_ON"),
		Duplicates:    r.optInt32("duplicates"),
	}
	return r.err
}
