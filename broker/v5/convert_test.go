package v5

import (
	"bytes"
	"compress/gzip"
	"net/netip"
	"strconv"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluicemq/sluice/internal/message"
)

var born = netip.MustParseAddrPort("10.0.0.1:5000")

func base() *v2.Message {
	return &v2.Message{Topic: &v2.Resource{Name: "T"}, Body: []byte("body"),
		SystemProperties: &v2.SystemProperties{MessageId: "01ABC"}}
}

func TestToMessage_Properties(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	m := base()
	tag, group := "TagA", "g1"
	m.SystemProperties.Tag = &tag
	m.SystemProperties.Keys = []string{"k1", "k2"}
	m.SystemProperties.MessageGroup = &group
	m.SystemProperties.MessageType = v2.MessageType_FIFO
	m.UserProperties = map[string]string{"color": "red"}
	c, b := toMessage(m, born, 1024, now)
	require.Nil(t, b)
	require.Equal(t, "g1", c.group)
	p := message.ParseProperties(c.msg.Properties)
	require.Equal(t, map[string]string{"UNIQ_KEY": "01ABC", "TAGS": "TagA", "KEYS": "k1 k2", PropShardingKey: "g1", "color": "red"}, p)
	require.Equal(t, int32(-1), c.msg.QueueID)
	require.Equal(t, born, c.msg.BornHost)

	d := base()
	at := now.Add(time.Hour)
	d.SystemProperties.DeliveryTimestamp = timestamppb.New(at)
	c, b = toMessage(d, born, 1024, now)
	require.Nil(t, b)
	v, _ := message.PropertyValue(c.msg.Properties, message.PropTimerDeliverMS)
	require.Equal(t, strconv.FormatInt(at.UnixMilli(), 10), v)

	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, _ = zw.Write([]byte("unzipped"))
	require.NoError(t, zw.Close())
	g := base()
	g.Body, g.SystemProperties.BodyEncoding = zb.Bytes(), v2.Encoding_GZIP
	c, b = toMessage(g, born, 1024, now)
	require.Nil(t, b)
	require.Equal(t, "unzipped", string(c.msg.Body))
}

func TestToMessage_Refusals(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name string
		edit func(m *v2.Message)
		want v2.Code
	}{
		{"no topic", func(m *v2.Message) { m.Topic = nil }, v2.Code_ILLEGAL_TOPIC},
		{"no system properties", func(m *v2.Message) { m.SystemProperties = nil }, v2.Code_BAD_REQUEST},
		{"no id", func(m *v2.Message) { m.SystemProperties.MessageId = "" }, v2.Code_ILLEGAL_MESSAGE_ID},
		{"id with separator", func(m *v2.Message) { m.SystemProperties.MessageId = "a\x02b" }, v2.Code_ILLEGAL_MESSAGE_ID},
		{"empty body", func(m *v2.Message) { m.Body = nil }, v2.Code_MESSAGE_BODY_EMPTY},
		{"large body", func(m *v2.Message) { m.Body = make([]byte, 1025) }, v2.Code_MESSAGE_BODY_TOO_LARGE},
		{"bad gzip", func(m *v2.Message) { m.SystemProperties.BodyEncoding = v2.Encoding_GZIP }, v2.Code_MESSAGE_CORRUPTED},
		{"bad digest", func(m *v2.Message) {
			m.SystemProperties.BodyDigest = &v2.Digest{Type: v2.DigestType_MD5, Checksum: "00"}
		}, v2.Code_MESSAGE_CORRUPTED},
		{"reserved property", func(m *v2.Message) { m.UserProperties = map[string]string{"UNIQ_KEY": "x"} }, v2.Code_ILLEGAL_MESSAGE_PROPERTY_KEY},
		{"property separator", func(m *v2.Message) { m.UserProperties = map[string]string{"a": "b\x02c"} }, v2.Code_ILLEGAL_MESSAGE_PROPERTY_KEY},
		{"tag bar", func(m *v2.Message) { m.SystemProperties.Tag = str("a|b") }, v2.Code_ILLEGAL_MESSAGE_TAG},
		{"key space", func(m *v2.Message) { m.SystemProperties.Keys = []string{"a b"} }, v2.Code_ILLEGAL_MESSAGE_KEY},
		{"empty group", func(m *v2.Message) { m.SystemProperties.MessageGroup = str("") }, v2.Code_ILLEGAL_MESSAGE_GROUP},
		{"fifo without group", func(m *v2.Message) { m.SystemProperties.MessageType = v2.MessageType_FIFO }, v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
		{"group and delay", func(m *v2.Message) {
			m.SystemProperties.MessageGroup = str("g")
			m.SystemProperties.DeliveryTimestamp = timestamppb.New(now)
		}, v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
		{"delay past 3 days", func(m *v2.Message) {
			m.SystemProperties.DeliveryTimestamp = timestamppb.New(now.Add(MaxDelay + time.Minute))
		}, v2.Code_ILLEGAL_DELIVERY_TIME},
		{"transaction with a group", func(m *v2.Message) {
			m.SystemProperties.MessageType = v2.MessageType_TRANSACTION
			m.SystemProperties.MessageGroup = str("g")
		}, v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
		{"transaction with a delivery time", func(m *v2.Message) {
			m.SystemProperties.MessageType = v2.MessageType_TRANSACTION
			m.SystemProperties.DeliveryTimestamp = timestamppb.New(now)
		}, v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := base()
			tc.edit(m)
			_, b := toMessage(m, born, 1024, now)
			require.NotNil(t, b)
			require.Equal(t, tc.want, b.code, b.msg)
			require.NotEmpty(t, b.msg)
		})
	}
}

// FuzzToMessage: whatever a client sends, the conversion answers a code
// or a message whose properties parse back and whose record encodes.
func FuzzToMessage(f *testing.F) {
	f.Add("T", "01ABC", "TagA", "k1", "g", "color", "red", []byte("body"), int64(0), uint8(0), uint8(1))
	f.Add("T", "id", "", "", "", "", "", []byte{}, int64(1<<40), uint8(2), uint8(3))
	now := time.Unix(1_800_000_000, 0)
	f.Fuzz(func(t *testing.T, topic, id, tag, key, group, pk, pv string, body []byte, delaySec int64, enc, typ uint8) {
		m := &v2.Message{Topic: &v2.Resource{Name: topic}, Body: body,
			SystemProperties: &v2.SystemProperties{MessageId: id, BodyEncoding: v2.Encoding(enc % 4), MessageType: v2.MessageType(typ % 8)}}
		if tag != "" {
			m.SystemProperties.Tag = &tag
		}
		if key != "" {
			m.SystemProperties.Keys = []string{key}
		}
		if group != "" {
			m.SystemProperties.MessageGroup = &group
		}
		if pk != "" || pv != "" {
			m.UserProperties = map[string]string{pk: pv}
		}
		if delaySec != 0 {
			m.SystemProperties.DeliveryTimestamp = &timestamppb.Timestamp{Seconds: now.Unix() + delaySec}
		}
		c, b := toMessage(m, born, 4096, now)
		if b != nil {
			require.NotEqual(t, v2.Code_OK, b.code)
			require.NotEmpty(t, b.msg)
			return
		}
		p := message.ParseProperties(c.msg.Properties)
		require.Equal(t, id, p[message.PropUniqKey])
		if group != "" {
			require.Equal(t, group, p[PropShardingKey])
		}
		c.msg.QueueID, c.msg.StoreHost = 0, born
		require.NoError(t, c.msg.Encode(make([]byte, c.msg.EncodedSize()), 0, 0))
	})
}
