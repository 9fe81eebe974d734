package client

import (
	"encoding/binary"
	"fmt"
	"maps"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
)

// MessageQueue names one queue: a topic's queue id on one broker.
type MessageQueue struct {
	Topic      string
	BrokerName string
	QueueID    int
}

func (q MessageQueue) String() string {
	return q.Topic + "@" + q.BrokerName + "#" + strconv.Itoa(q.QueueID)
}

func (q MessageQueue) wire() protocol.MessageQueue {
	return protocol.MessageQueue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: int32(q.QueueID)}
}

func fromWire(q protocol.MessageQueue) MessageQueue {
	return MessageQueue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: int(q.QueueID)}
}

// compareQueues orders queues by topic, broker name and queue id, the
// order rebalance allocates in (spec §8.2).
func compareQueues(a, b MessageQueue) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	if c := strings.Compare(a.BrokerName, b.BrokerName); c != 0 {
		return c
	}
	return a.QueueID - b.QueueID
}

// Message is a message to send, or one delivered to a consumer.
//
// A producer reads Topic, Body, Tags, Keys, Properties, ShardingKey,
// DelayLevel, Flag, MsgID (the user-facing id; generated when empty) and,
// for ManualSelector, Queue. A consumer receives every field filled in.
// A producer never modifies the Message it is given.
type Message struct {
	Topic       string
	Body        []byte
	Tags        string            // one tag; subscriptions filter on it
	Keys        []string          // business keys, indexed by the broker for QueryByKey
	Properties  map[string]string // user properties; delivered messages carry all of them
	ShardingKey string            // HashSelector puts equal keys on one queue
	DelayLevel  int               // send only: 1..18 delays delivery by the broker's level; 0 = now
	Flag        int32             // user flag, stored as is

	// DeliverAt (send only) delivers the message at this time, to within
	// about half a second (property TIMER_DELIVER_MS, RocketMQ 5's timer
	// message; the Go client's WithDelayTimestamp). At most 3 days ahead;
	// the zero time is now. Not with DelayLevel, nor in a batch.
	DeliverAt time.Time

	// MsgID is the message's id (property UNIQ_KEY). A producer generates
	// one when it is empty; a consumer sees UNIQ_KEY, or the offset id
	// when the sender set none.
	MsgID string
	// Queue is where the message was stored (delivery; a retried
	// message's queue is one of %RETRY%<group> while Topic is the
	// original), or where ManualSelector sends it.
	Queue MessageQueue

	// Delivery only.
	OffsetMsgID     string // store host + commitlog offset, for QueryByID
	QueueOffset     int64
	CommitLogOffset int64
	ReconsumeTimes  int // failed deliveries before this one
	StoreTimestamp  time.Time
	BornTimestamp   time.Time
	BornHost        string
	StoreHost       string
}

func (m *Message) String() string {
	return fmt.Sprintf("Message{Topic: %s, MsgID: %s, Tags: %s, Keys: %v, Queue: %s, QueueOffset: %d, ReconsumeTimes: %d, Body: %d bytes}",
		m.Topic, m.MsgID, m.Tags, m.Keys, m.Queue, m.QueueOffset, m.ReconsumeTimes, len(m.Body))
}

// reserved are the properties a producer fills from Message fields;
// values for them in Properties are ignored.
var reserved = map[string]bool{
	message.PropTags: true, message.PropKeys: true, message.PropUniqKey: true,
	message.PropDelay: true, message.PropShardingKey: true, message.PropWait: true,
	message.PropTimerDeliverMS: true,
}

// fieldProperties appends to b the properties of a message without user
// properties (see appendSendProperties): the pairs are written straight
// from the fields, in the sorted order AppendProperties gives them, with
// no map in between. A fresh id from gen is written into b (no string of
// its own): idAt is where, or -1.
func (m *Message) fieldProperties(b *strings.Builder, id string, gen *message.UniqIDGenerator) (idAt int, err error) {
	start := b.Len()
	add := func(k, v string) error {
		if v == "" || strings.ContainsRune(v, '\x02') {
			return invalidMessage("property %q=%q cannot be encoded (empty, or holds \\x01/\\x02)", k, v)
		}
		if b.Len() > start {
			b.WriteByte(message.PropertySeparator)
		}
		b.WriteString(k)
		b.WriteByte(message.NameValueSeparator)
		b.WriteString(v)
		return nil
	}
	b.Grow(len(m.Tags) + len(id) + len(m.ShardingKey) + 40)
	if m.DelayLevel > 0 {
		err = add(message.PropDelay, strconv.Itoa(m.DelayLevel))
	}
	if len(m.Keys) > 0 && err == nil {
		err = add(message.PropKeys, strings.Join(m.Keys, " "))
	}
	if m.ShardingKey != "" && err == nil {
		err = add(message.PropShardingKey, m.ShardingKey)
	}
	if m.Tags != "" && err == nil {
		err = add(message.PropTags, m.Tags)
	}
	if !m.DeliverAt.IsZero() && err == nil {
		err = add(message.PropTimerDeliverMS, strconv.FormatInt(m.DeliverAt.UnixMilli(), 10))
	}
	idAt = -1
	switch {
	case err != nil:
	case id != "":
		err = add(message.PropUniqKey, id)
	case gen != nil:
		raw := gen.NextBytes()
		if b.Len() > start {
			b.WriteByte(message.PropertySeparator)
		}
		b.WriteString(message.PropUniqKey)
		b.WriteByte(message.NameValueSeparator)
		idAt = b.Len()
		b.Write(raw[:])
	}
	if err != nil {
		return -1, err
	}
	if n := b.Len() - start; n > message.MaxPropertiesLen {
		return -1, invalidMessage("properties are %d bytes, the limit is %d", n, message.MaxPropertiesLen)
	}
	return idAt, nil
}

// sendProperties returns m's properties string for a send and its
// UNIQ_KEY: id, or a fresh one from gen when id is empty (none when gen is
// nil too).
func (m *Message) sendProperties(id string, gen *message.UniqIDGenerator) (string, string, error) {
	var b strings.Builder
	id, idAt, err := m.appendSendProperties(&b, id, gen)
	if err != nil {
		return "", "", err
	}
	props := b.String()
	if idAt >= 0 {
		id = props[idAt : idAt+message.UniqIDLen] // NB: a substring, no allocation
	}
	return props, id, nil
}

// appendSendProperties appends m's properties for a send to b. The id is
// the one given, or a fresh one from gen: returned, or, when idAt >= 0,
// written at idAt in b (the caller cuts it from b's string, saving a
// string per message).
func (m *Message) appendSendProperties(b *strings.Builder, id string, gen *message.UniqIDGenerator) (string, int, error) {
	if len(m.Properties) == 0 {
		idAt, err := m.fieldProperties(b, id, gen)
		return id, idAt, err
	}
	if id == "" && gen != nil {
		id = gen.Next()
	}
	props, err := m.mapProperties(id)
	if err != nil {
		return "", -1, err
	}
	b.WriteString(props)
	return id, -1, nil
}

// mapProperties is sendProperties through a map: user properties (but the
// reserved names) and the fields.
func (m *Message) mapProperties(id string) (string, error) {
	props := make(map[string]string, len(m.Properties)+4)
	for k, v := range m.Properties {
		if !reserved[k] {
			props[k] = v
		}
	}
	if m.Tags != "" {
		props[message.PropTags] = m.Tags
	}
	if len(m.Keys) > 0 {
		props[message.PropKeys] = strings.Join(m.Keys, " ")
	}
	if id != "" {
		props[message.PropUniqKey] = id
	}
	if m.DelayLevel > 0 {
		props[message.PropDelay] = strconv.Itoa(m.DelayLevel)
	}
	if m.ShardingKey != "" {
		props[message.PropShardingKey] = m.ShardingKey
	}
	if !m.DeliverAt.IsZero() {
		props[message.PropTimerDeliverMS] = strconv.FormatInt(m.DeliverAt.UnixMilli(), 10)
	}
	for k, v := range props {
		if strings.ContainsAny(k, "\x01\x02") || k == "" || strings.ContainsRune(v, '\x02') || v == "" {
			return "", invalidMessage("property %q=%q cannot be encoded (empty, or holds \\x01/\\x02)", k, v)
		}
	}
	s := string(message.AppendProperties(nil, props))
	if len(s) > message.MaxPropertiesLen {
		return "", invalidMessage("properties are %d bytes, the limit is %d", len(s), message.MaxPropertiesLen)
	}
	return s, nil
}

// fromRecord builds a delivered message from a stored record, inflating a
// compressed body. The message owns its memory.
//
// rec's bytes belong to a buffer the message may keep referencing: the
// body is not copied. names remembers strings across a pull's records.
func fromRecord(m *Message, rec message.Record, brokerName string, maxBody int, names *recordNames) error {
	props := message.ParseProperties(string(rec.Properties))
	body := rec.Body
	switch {
	case rec.SysFlag&message.FlagCompressed != 0:
		b, err := message.Decompress(body, maxBody)
		if err != nil {
			return err
		}
		body = b
	default:
		body = body[:len(body):len(body)] // NB: an append must not run into the next record
	}
	topic := names.topic(rec.Topic)
	*m = Message{
		Topic:           topic,
		Body:            body,
		Tags:            props[message.PropTags],
		ShardingKey:     props[message.PropShardingKey],
		Flag:            rec.Flag,
		Properties:      props,
		Queue:           MessageQueue{Topic: topic, BrokerName: brokerName, QueueID: int(rec.QueueID)},
		OffsetMsgID:     message.OffsetMsgID(rec.StoreHost, rec.PhysicalOffset),
		QueueOffset:     rec.QueueOffset,
		CommitLogOffset: rec.PhysicalOffset,
		ReconsumeTimes:  int(rec.ReconsumeTimes),
		StoreTimestamp:  time.UnixMilli(rec.StoreTimestamp),
		BornTimestamp:   time.UnixMilli(rec.BornTimestamp),
		BornHost:        names.host(0, rec.BornHost),
		StoreHost:       names.host(1, rec.StoreHost),
	}
	if k := props[message.PropKeys]; k != "" {
		m.Keys = strings.Fields(k)
	}
	m.MsgID = props[message.PropUniqKey]
	if m.MsgID == "" {
		m.MsgID = m.OffsetMsgID
	}
	return nil
}

// recordNames remembers the strings of the last topic and hosts decoded:
// the records of one pull mostly share them.
type recordNames struct {
	topicS string
	hosts  [2]netip.AddrPort
	hostS  [2]string
}

func (n *recordNames) topic(b []byte) string {
	if n.topicS == "" || string(b) != n.topicS {
		n.topicS = string(b)
	}
	return n.topicS
}

func (n *recordNames) host(i int, a netip.AddrPort) string {
	if n.hostS[i] == "" || n.hosts[i] != a {
		n.hosts[i], n.hostS[i] = a, a.String()
	}
	return n.hostS[i]
}

// decodeRecords splits a pull or query body into messages. The messages'
// bodies reference body, which must not be reused.
func decodeRecords(body []byte, brokerName string, maxBody int) ([]*Message, error) {
	// NB: the messages of a pull are allocated together (they already
	// share the response buffer their bodies point into).
	n := 0
	for p := body; len(p) >= 4; n++ {
		size := int(binary.BigEndian.Uint32(p))
		if size < message.MinRecordSize || size > len(p) {
			n++ // NB: Decode reports it
			break
		}
		p = p[size:]
	}
	// NB: the count never exceeds what the body can hold, so a hostile
	// body cannot make the slab larger than a few times itself.
	n = min(n, len(body)/message.MinRecordSize+1)
	slab := make([]Message, n)
	out := make([]*Message, 0, n)
	total := len(body)
	var names recordNames
	for len(body) > 0 {
		rec, err := message.Decode(body)
		if err != nil {
			return out, fmt.Errorf("client: decode message %d of a %d-byte body (at byte %d): %w", len(out), total, total-len(body), err)
		}
		var m *Message
		if len(out) < len(slab) {
			m = &slab[len(out)]
		} else {
			m = new(Message)
		}
		if err := fromRecord(m, rec, brokerName, maxBody, &names); err != nil {
			return out, fmt.Errorf("client: message %s: %w", message.OffsetMsgID(rec.StoreHost, rec.PhysicalOffset), err)
		}
		out = append(out, m)
		body = body[rec.TotalSize:]
	}
	return out, nil
}

// restoreRetryTopic gives a message read from %RETRY%<group> its original
// topic back (property RETRY_TOPIC).
func restoreRetryTopic(m *Message) {
	if t := m.Properties[message.PropRetryTopic]; t != "" && strings.HasPrefix(m.Topic, retryPrefix) {
		m.Topic = t
	}
}

// clone returns a shallow copy of m with its own Properties map.
func (m *Message) clone() *Message {
	c := *m
	c.Properties = maps.Clone(m.Properties)
	return &c
}

// cloneWith is clone with the properties kv (name, value, name, value…)
// set.
func (m *Message) cloneWith(kv ...string) *Message {
	c := m.clone()
	if c.Properties == nil {
		c.Properties = make(map[string]string, len(kv)/2)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		c.Properties[kv[i]] = kv[i+1]
	}
	return c
}

// SendStatus is how a broker stored a message that counts as sent.
type SendStatus int

const (
	SendOK                SendStatus = iota // stored (and flushed or replicated as configured)
	SendFlushDiskTimeout                    // stored, but the sync flush timed out
	SendFlushSlaveTimeout                   // stored, but replication timed out
	SendSlaveNotAvailable                   // stored, but no slave to replicate to
)

func (s SendStatus) String() string {
	switch s {
	case SendFlushDiskTimeout:
		return "SEND_FLUSH_DISK_TIMEOUT"
	case SendFlushSlaveTimeout:
		return "SEND_FLUSH_SLAVE_TIMEOUT"
	case SendSlaveNotAvailable:
		return "SEND_SLAVE_NOT_AVAILABLE"
	}
	return "SEND_OK"
}

// SendResult is the outcome of a send that counts as sent.
type SendResult struct {
	Status SendStatus
	// MsgID is the message's id (UNIQ_KEY); for a batch, the members' ids
	// joined with commas.
	MsgID string
	// OffsetMsgID is the broker's id (store host + commitlog offset); for
	// a batch, comma-joined.
	OffsetMsgID string
	Queue       MessageQueue
	QueueOffset int64 // for a batch, the first member's
	// Duplicate says the broker had stored the message (every member of
	// the batch) already, within its duplicate window: this send was a
	// retry of one whose answer was lost, nothing was stored again, and
	// the ids above are those of the copy stored first. Sluice brokers
	// only (others never set it).
	Duplicate bool
}

const (
	retryPrefix = "%RETRY%"
	dlqPrefix   = "%DLQ%"
)

// RetryTopic returns the retry topic of a consumer group.
func RetryTopic(group string) string { return retryPrefix + group }

// DLQTopic returns the dead-letter topic of a consumer group.
func DLQTopic(group string) string { return dlqPrefix + group }
