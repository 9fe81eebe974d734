package v5

import (
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/sluicemq/sluice/broker/topic"
	"github.com/sluicemq/sluice/internal/message"
)

// Properties RocketMQ 5 adds to 4.x's (RocketMQ's MessageConst).
const (
	// PropShardingKey holds a FIFO message's group.
	PropShardingKey = "__SHARDINGKEY"
)

// MaxDelay is how far ahead a delivery time may be: the broker's timer
// limit (RocketMQ 5's timerMaxDelaySec, 3 days).
const MaxDelay = 72 * time.Hour

// maxIDLen bounds a message id, a tag, a key and a group.
const maxIDLen = 1024

// reservedProps are the system properties a user property must not name
// (RocketMQ's MessageConst.STRING_HASH_SET, and Sluice's).
var reservedProps = map[string]bool{}

func init() {
	for _, p := range []string{
		message.PropUniqKey, message.PropKeys, message.PropTags, message.PropWait, message.PropDelay,
		message.PropRealTopic, message.PropRealQueueID, message.PropRetryTopic, message.PropOriginMessageID,
		message.PropReconsumeTime, message.PropMaxReconsumeTimes, message.PropTranMsg, message.PropProducerGroup,
		message.PropTransactionID, message.PropTranPreparedQueueOffset, message.PropTransactionCheckTimes,
		message.PropCheckImmunityTime, message.PropMinOffset, message.PropMaxOffset, message.PropConsumeStartTime,
		message.PropCluster, message.PropMsgRegion, message.PropTraceSwitch, message.PropShardingKey,
		message.PropBuyerID, message.PropTransferFlag, message.PropCorrectionFlag, message.PropInstanceID,
		message.PropCorrelationID, message.PropReplyToClient, message.PropTTL, message.PropArriveTime,
		message.PropMsgType, message.PropPushReplyTime, message.PropTimerDeliverMS, PropShardingKey,
		"__STARTDELIVERTIME", "TIMER_DELAY_SEC", "TIMER_DELAY_MS", "TIMER_OUT_MS", "TIMER_ENQUEUE_MS",
		"TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "POP_CK", "1ST_POP_TIME", "INNER_NUM", "INNER_BASE",
	} {
		reservedProps[p] = true
	}
}

// converted is one v5 message ready to store.
type converted struct {
	msg   message.Message
	group string // FIFO: the message group
	id    string // the client's message id (UNIQ_KEY)
	tx    bool   // TRANSACTION: stored as a half message until EndTransaction
}

// badInput is a conversion refusal: the v5 code and what to fix.
type badInput struct {
	code v2.Code
	msg  string
}

func (b *badInput) Error() string { return b.msg }

func bad(code v2.Code, format string, args ...any) *badInput {
	return &badInput{code: code, msg: fmt.Sprintf(format, args...)}
}

// plainText reports whether s is usable as a tag, key, group or id: not
// empty, not too long, printable, no separators of the properties string.
func plainText(s string) bool {
	if s == "" || len(s) > maxIDLen {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// toMessage converts a v5 message to a stored one (RocketMQ's proxy
// SendMessageActivity.buildMessage): the message id becomes UNIQ_KEY, the
// tag TAGS, the keys KEYS, the group __SHARDINGKEY and the delivery time
// TIMER_DELIVER_MS; a TRANSACTION message is marked a half (TRAN_MSG,
// PGROUP, the prepared flag). A GZIP body is stored decoded. maxBody
// bounds the (decoded) body; now is the time delivery times are measured
// from.
func toMessage(pm *v2.Message, born netip.AddrPort, maxBody int32, now time.Time) (converted, *badInput) {
	var c converted
	if pm == nil {
		return c, bad(v2.Code_BAD_REQUEST, "a message is empty")
	}
	name := pm.GetTopic().GetName()
	if err := topic.ValidateName(name); err != nil {
		return c, bad(v2.Code_ILLEGAL_TOPIC, "topic: %v", err)
	}
	sp := pm.GetSystemProperties()
	if sp == nil {
		return c, bad(v2.Code_BAD_REQUEST, "message to %s has no system_properties", name)
	}
	c.id = sp.GetMessageId()
	if !plainText(c.id) {
		return c, bad(v2.Code_ILLEGAL_MESSAGE_ID, "message_id %q: want 1 to %d printable characters", clip(c.id), maxIDLen)
	}
	body, err := decodeBody(pm.GetBody(), sp.GetBodyEncoding(), maxBody)
	if err != nil {
		return c, err
	}
	if d := sp.GetBodyDigest(); d != nil && d.GetType() != v2.DigestType_DIGEST_TYPE_UNSPECIFIED {
		if err := checkDigest(pm.GetBody(), d); err != nil {
			return c, err
		}
	}
	props := map[string]string{message.PropUniqKey: c.id}
	for k, v := range pm.GetUserProperties() {
		if reservedProps[k] {
			return c, bad(v2.Code_ILLEGAL_MESSAGE_PROPERTY_KEY, "user property %q is a system property's name", clip(k))
		}
		if k == "" || v == "" || strings.ContainsAny(k, "\x00\x01\x02") || strings.ContainsAny(v, "\x00\x01\x02") {
			return c, bad(v2.Code_ILLEGAL_MESSAGE_PROPERTY_KEY,
				"user property %q=%q: name and value must be non-empty, without the bytes 0, 1 and 2", clip(k), clip(v))
		}
		props[k] = v
	}
	if sp.Tag != nil {
		tag := sp.GetTag()
		if !plainText(tag) || strings.ContainsAny(tag, "|") || strings.TrimSpace(tag) == "" {
			return c, bad(v2.Code_ILLEGAL_MESSAGE_TAG, "tag %q: want 1 to %d printable characters, not blank, without '|'", clip(tag), maxIDLen)
		}
		props[message.PropTags] = tag
	}
	if keys := sp.GetKeys(); len(keys) > 0 {
		for _, k := range keys {
			if !plainText(k) || strings.ContainsAny(k, " \t") {
				return c, bad(v2.Code_ILLEGAL_MESSAGE_KEY, "key %q: want 1 to %d printable characters without spaces", clip(k), maxIDLen)
			}
		}
		props[message.PropKeys] = strings.Join(keys, " ")
	}
	if sp.MessageGroup != nil {
		c.group = sp.GetMessageGroup()
		if !plainText(c.group) {
			return c, bad(v2.Code_ILLEGAL_MESSAGE_GROUP, "message_group %q: want 1 to %d printable characters", clip(c.group), maxIDLen)
		}
		props[PropShardingKey] = c.group
	}
	switch sp.GetMessageType() {
	case v2.MessageType_TRANSACTION:
		if c.group != "" || sp.DeliveryTimestamp != nil {
			return c, bad(v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "a TRANSACTION message has no message_group and no delivery_timestamp")
		}
		// NB: the 4.x half-message marks (the broker's send path stores it
		// in the half topic); a v5 producer names no group, so its group is
		// the topic, as RocketMQ's proxy makes it.
		c.tx = true
		props[message.PropTranMsg] = "true"
		props[message.PropProducerGroup] = name
		if d := sp.GetOrphanedTransactionRecoveryDuration(); d != nil && d.CheckValid() == nil {
			if secs := int64(d.AsDuration() / time.Second); secs > 0 {
				props[message.PropCheckImmunityTime] = strconv.FormatInt(min(secs, math.MaxInt32), 10)
			}
		}
	case v2.MessageType_FIFO:
		if c.group == "" {
			return c, bad(v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "a FIFO message needs a message_group")
		}
	case v2.MessageType_DELAY:
		if sp.DeliveryTimestamp == nil {
			return c, bad(v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "a DELAY message needs a delivery_timestamp")
		}
	case v2.MessageType_LITE, v2.MessageType_PRIORITY:
		return c, bad(v2.Code_UNSUPPORTED, "message type %s is not supported", sp.GetMessageType())
	}
	if sp.DeliveryTimestamp != nil {
		if c.group != "" {
			return c, bad(v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "a message has either a message_group (FIFO) or a delivery_timestamp (DELAY), not both")
		}
		ts := sp.GetDeliveryTimestamp()
		if err := ts.CheckValid(); err != nil {
			return c, bad(v2.Code_ILLEGAL_DELIVERY_TIME, "delivery_timestamp: %v", err)
		}
		at := ts.AsTime()
		if wait := at.Sub(now); wait > MaxDelay {
			return c, bad(v2.Code_ILLEGAL_DELIVERY_TIME, "delivery_timestamp %s is %s ahead; a delivery time may be at most %s ahead",
				at.UTC().Format(time.RFC3339), wait.Round(time.Second), MaxDelay)
		}
		props[message.PropTimerDeliverMS] = strconv.FormatInt(at.UnixMilli(), 10)
	}
	c.msg = message.Message{Topic: name, QueueID: -1, BornHost: born, Body: body,
		Properties: string(message.AppendProperties(nil, props))}
	if c.tx {
		c.msg.SysFlag |= message.TxPrepared
	}
	if len(c.msg.Properties) > message.MaxPropertiesLen {
		return c, bad(v2.Code_MESSAGE_PROPERTIES_TOO_LARGE, "the message's properties take %d bytes; at most %d",
			len(c.msg.Properties), message.MaxPropertiesLen)
	}
	c.msg.BornTimestamp = now.UnixMilli()
	if bt := sp.GetBornTimestamp(); bt != nil && bt.CheckValid() == nil {
		c.msg.BornTimestamp = bt.AsTime().UnixMilli()
	}
	return c, nil
}

// decodeBody returns the stored form of a body: GZIP decoded, at most
// maxBody bytes.
func decodeBody(body []byte, enc v2.Encoding, maxBody int32) ([]byte, *badInput) {
	switch enc {
	case v2.Encoding_ENCODING_UNSPECIFIED, v2.Encoding_IDENTITY:
	case v2.Encoding_GZIP:
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, bad(v2.Code_MESSAGE_CORRUPTED, "the GZIP body does not decode: %v", err)
		}
		out, err := io.ReadAll(io.LimitReader(zr, int64(maxBody)+1))
		if err != nil {
			return nil, bad(v2.Code_MESSAGE_CORRUPTED, "the GZIP body does not decode: %v", err)
		}
		body = out
	default:
		return nil, bad(v2.Code_BAD_REQUEST, "body_encoding %d is not IDENTITY or GZIP", enc)
	}
	if len(body) == 0 {
		return nil, bad(v2.Code_MESSAGE_BODY_EMPTY, "the message body is empty")
	}
	if len(body) > int(maxBody) {
		return nil, bad(v2.Code_MESSAGE_BODY_TOO_LARGE, "the message body takes more than %d bytes, the broker's limit (store.max_message_size)", maxBody)
	}
	return body, nil
}

// checkDigest verifies a body digest the client sent (hex, any case).
func checkDigest(body []byte, d *v2.Digest) *badInput {
	var want string
	switch d.GetType() {
	case v2.DigestType_CRC32:
		want = strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 16)
	case v2.DigestType_MD5:
		s := md5.Sum(body)
		want = hex.EncodeToString(s[:])
	case v2.DigestType_SHA1:
		s := sha1.Sum(body)
		want = hex.EncodeToString(s[:])
	default:
		return bad(v2.Code_BAD_REQUEST, "body_digest type %d is not CRC32, MD5 or SHA1", d.GetType())
	}
	got := strings.TrimLeft(strings.ToLower(d.GetChecksum()), "0")
	if got != strings.TrimLeft(want, "0") {
		return bad(v2.Code_MESSAGE_CORRUPTED, "the body's %s digest is %s, the message says %s", d.GetType(), strings.ToUpper(want), clip(d.GetChecksum()))
	}
	return nil
}

// clip shortens what a status message repeats of the client's input.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
