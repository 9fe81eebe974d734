package v5

import (
	"math"
	"strconv"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicemq/sluice/internal/message"
)

// TestToMessage_Transaction: a TRANSACTION message carries the 4.x half
// marks (TRAN_MSG, the prepared flag), its topic as its producer group,
// and its recovery duration as CHECK_IMMUNITY_TIME_IN_SECONDS.
func TestToMessage_Transaction(t *testing.T) {
	m := base()
	m.SystemProperties.MessageType = v2.MessageType_TRANSACTION
	m.SystemProperties.OrphanedTransactionRecoveryDuration = durationpb.New(30 * time.Second)
	c, b := toMessage(m, born, 1024, time.Unix(1_800_000_000, 0))
	require.Nil(t, b)
	require.True(t, c.tx)
	require.Equal(t, message.TxPrepared, message.TxType(c.msg.SysFlag))
	require.Equal(t, map[string]string{"UNIQ_KEY": "01ABC", message.PropTranMsg: "true", message.PropProducerGroup: "T",
		message.PropCheckImmunityTime: "30"}, message.ParseProperties(c.msg.Properties))

	n := base()
	c, b = toMessage(n, born, 1024, time.Unix(1_800_000_000, 0))
	require.Nil(t, b)
	require.False(t, c.tx)
	require.Equal(t, message.TxNot, message.TxType(c.msg.SysFlag))
}

// TestTransactionID: an id names its offsets back; anything else is
// refused, never misread.
func TestTransactionID(t *testing.T) {
	for _, tc := range [][2]int64{{0, 0}, {1 << 40, 7}, {math.MaxInt64, math.MaxInt64}} {
		id := TransactionID(tc[0], tc[1])
		require.Len(t, id, 34)
		p, h, ok := ParseTransactionID(id)
		require.True(t, ok, id)
		require.Equal(t, tc, [2]int64{p, h})
	}
	for _, bad := range []string{"", "01", "not an id", "02" + "0000000000000001" + "0000000000000002",
		"01" + "000000000000000G" + "0000000000000002", "01" + "8000000000000000" + "0000000000000002",
		"01" + "0000000000000001" + "FFFFFFFFFFFFFFFF", "01" + "+000000000000001" + "0000000000000002",
		"01" + "0000000000000001" + "00000000000000023", "7F3A2B1C0D0E0F101112131415161718"} {
		_, _, ok := ParseTransactionID(bad)
		require.False(t, ok, bad)
	}
}

func FuzzParseTransactionID(f *testing.F) {
	f.Add(TransactionID(123, 4))
	f.Add("01-1-2")
	f.Fuzz(func(t *testing.T, id string) {
		p, h, ok := ParseTransactionID(id)
		if ok {
			require.GreaterOrEqual(t, p, int64(0))
			require.GreaterOrEqual(t, h, int64(0))
			require.Equal(t, TransactionID(p, h), id, "one id per offsets")
		}
	})
}

// TestStreamRegistry: a check goes to an open stream of a producer of
// the group only (its settings' topics or its transactional sends), one
// stream per check, a full stream passed over, a closed one never.
func TestStreamRegistry(t *testing.T) {
	var tab clientTable
	cmd := &v2.TelemetryCommand{}
	require.False(t, tab.tellProducer("T", cmd), "no stream")
	a := &telemetryStream{client: "a", out: make(chan *v2.TelemetryCommand, 1)}
	b := &telemetryStream{client: "b", out: make(chan *v2.TelemetryCommand, 1)}
	tab.openStream(a)
	tab.openStream(b)
	tab.publishes(a, &v2.Publishing{Topics: []*v2.Resource{{Name: "T"}, {Name: ""}}})
	tab.producesFor("b", "U")
	tab.producesFor("nobody", "T")
	require.False(t, tab.tellProducer("V", cmd), "no producer of V")

	require.True(t, tab.tellProducer("T", cmd))
	require.Len(t, a.out, 1)
	require.False(t, tab.tellProducer("T", cmd), "a's queue is full")
	require.True(t, tab.tellProducer("U", cmd))
	require.Len(t, b.out, 1)
	<-a.out

	tab.closeStream(a)
	require.False(t, tab.tellProducer("T", cmd), "a closed")
	tab.publishes(a, &v2.Publishing{Topics: []*v2.Resource{{Name: "T"}}})
	require.False(t, tab.tellProducer("T", cmd), "a closed stream is not listed again")
	tab.closeStream(b)
	require.Empty(t, tab.streams)
	require.Empty(t, tab.producers)

	c := &telemetryStream{client: "c", out: make(chan *v2.TelemetryCommand, 1)}
	tab.openStream(c)
	for i := range maxStreamGroups + 10 {
		tab.producesFor("c", "G"+strconv.Itoa(i))
	}
	require.Len(t, c.groups, maxStreamGroups, "bounded")
	tab.closeStream(c)
	require.Empty(t, tab.producers)
}
