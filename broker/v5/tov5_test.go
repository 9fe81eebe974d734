package v5

import (
	"crypto/md5"
	"encoding/hex"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluicemq/sluice/internal/message"
)

// toV5Reference is toV5 as first written (a map of every property, then a
// copy of the user ones; the digest through two strings): the one-pass
// toV5 must give the same message.
func toV5Reference(p Popped, inv time.Duration) *v2.Message {
	r := &p.Rec
	props := message.ParseProperties(string(r.Properties))
	user := map[string]string{}
	for k, v := range props {
		if !reservedProps[k] {
			user[k] = v
		}
	}
	body := deliveredBody(r)
	sum := md5.Sum(body)
	id := props[message.PropUniqKey]
	if id == "" {
		id = string(message.AppendOffsetMsgID(nil, r.StoreHost, r.PhysicalOffset))
	}
	attempt, off := p.Attempt, r.QueueOffset
	handle := p.Handle
	sp := &v2.SystemProperties{
		MessageId:         id,
		BodyDigest:        &v2.Digest{Type: v2.DigestType_MD5, Checksum: strings.ToUpper(hex.EncodeToString(sum[:]))},
		BodyEncoding:      v2.Encoding_IDENTITY,
		MessageType:       v2.MessageType_NORMAL,
		BornTimestamp:     timestamppb.New(time.UnixMilli(r.BornTimestamp)),
		BornHost:          r.BornHost.Addr().String(),
		StoreTimestamp:    timestamppb.New(time.UnixMilli(r.StoreTimestamp)),
		StoreHost:         r.StoreHost.String(),
		ReceiptHandle:     &handle,
		QueueId:           r.QueueID,
		QueueOffset:       &off,
		InvisibleDuration: durationpb.New(inv),
		DeliveryAttempt:   &attempt,
	}
	if t, ok := props[message.PropTags]; ok {
		sp.Tag = &t
	}
	if k := props[message.PropKeys]; k != "" {
		sp.Keys = strings.Fields(k)
	}
	if g, ok := props[PropShardingKey]; ok {
		sp.MessageGroup, sp.MessageType = &g, v2.MessageType_FIFO
	}
	if ms, err := strconv.ParseInt(props[message.PropTimerDeliverMS], 10, 64); err == nil {
		sp.DeliveryTimestamp, sp.MessageType = timestamppb.New(time.UnixMilli(ms)), v2.MessageType_DELAY
	}
	return &v2.Message{Topic: &v2.Resource{Name: string(r.Topic)}, UserProperties: user, SystemProperties: sp, Body: body}
}

// randomProps is a properties string of random user and system pairs,
// names repeated at times (the last one wins).
func randomProps(r *rand.Rand) string {
	names := []string{message.PropUniqKey, message.PropTags, message.PropKeys, PropShardingKey, message.PropTimerDeliverMS,
		message.PropReconsumeTime, "orderId", "region", "k", "TIMER_DELAY_SEC"}
	var b strings.Builder
	for range r.IntN(12) {
		n := names[r.IntN(len(names))]
		v := strconv.Itoa(r.IntN(1000))
		if n == message.PropKeys && r.IntN(2) == 0 {
			v = "a b  c"
		}
		b.WriteString(n)
		b.WriteByte(message.NameValueSeparator)
		b.WriteString(v)
		b.WriteByte(message.PropertySeparator)
	}
	return b.String()
}

// TestToV5_SameAsReference: for random properties (user and system, names
// repeated) toV5 gives the message the map-based conversion gave.
func TestToV5_SameAsReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		p := Popped{Rec: message.Record{Topic: []byte("T"), Body: []byte("body " + strconv.Itoa(i)),
			StoreHost: netip.MustParseAddrPort("127.0.0.1:10911"), PhysicalOffset: int64(i) * 100,
			BornHost: netip.MustParseAddrPort("10.0.0.1:5000"), Properties: []byte(randomProps(r))}, Attempt: 2, Handle: "h"}
		want, got := toV5Reference(p, time.Minute), toV5(p, time.Minute)
		require.True(t, proto.Equal(want, got), "properties %q:\nwant %v\ngot  %v", p.Rec.Properties, want, got)
	}
}

// BenchmarkToV5: one stored 1 KiB message with a key, a tag and two user
// properties converted for a v5 consumer, by toV5 and by the map-based
// reference side by side.
func BenchmarkToV5(b *testing.B) {
	p := Popped{Rec: message.Record{Topic: []byte("orders"), Body: make([]byte, 1024),
		StoreHost: netip.MustParseAddrPort("127.0.0.1:10911"), BornHost: netip.MustParseAddrPort("10.0.0.1:5000"),
		Properties: []byte("UNIQ_KEY\x01AC11000100002A9F0000000000000001\x02KEYS\x01order-42\x02TAGS\x01created\x02orderId\x0142\x02region\x01eu\x02WAIT\x01true")},
		Attempt: 1, Handle: "handle"}
	b.Run("one-pass", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			toV5(p, time.Minute)
		}
	})
	b.Run("reference", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			toV5Reference(p, time.Minute)
		}
	})
}
