package protocol

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// goldenHeader reads the JSON header of a captured frame in
// testdata/rocketmq-client-go (see testdata/README.md).
type goldenHeader struct {
	Code      int16             `json:"code"`
	Flag      int32             `json:"flag"`
	ExtFields map[string]string `json:"extFields"`
}

func loadGolden(t testing.TB, name string) goldenHeader {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "rocketmq-client-go", name))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(b), 8)
	require.Equal(t, len(b)-4, int(binary.BigEndian.Uint32(b)))
	hl := int(binary.BigEndian.Uint32(b[4:]) & 0xFFFFFF)
	require.Zero(t, b[4], "serialize type JSON")
	var h goldenHeader
	require.NoError(t, json.Unmarshal(b[8:8+hl], &h))
	return h
}

func goldenFiles(t testing.TB) []string {
	m, err := filepath.Glob(filepath.Join("testdata", "rocketmq-client-go", "*.bin"))
	require.NoError(t, err)
	require.NotEmpty(t, m)
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

func TestGolden_SendMessage(t *testing.T) {
	g := loadGolden(t, "02-send-message.bin")
	require.EqualValues(t, SendMessage, g.Code)
	h, err := DecodeSendMessageRequestHeader(g.Code, g.ExtFields)
	require.NoError(t, err)
	require.Equal(t, SendMessageRequestHeader{
		ProducerGroup: "pg-sluice", Topic: "SluiceTopic", DefaultTopic: "TBW102",
		DefaultTopicQueueNums: 4, QueueID: 1, SysFlag: 0, BornTimestamp: 1795993369620,
		Flag:              0,
		Properties:        "TAGS\x01TagA\x02KEYS\x01order-1001 user-42\x02region\x01eu-west-1\x02UNIQ_KEY\x01C000020272AC00000000952411a80001\x02",
		MaxReconsumeTimes: i32p(0), BrokerName: "broker-a",
	}, h)
	// Re-encoding gives back exactly the captured map.
	require.Equal(t, g.ExtFields, Ext(&h))

	g = loadGolden(t, "05-send-message-delay-level-3.bin")
	require.NoError(t, h.FromExt(g.ExtFields))
	require.Equal(t, "DELAY\x013\x02UNIQ_KEY\x01C000020272AC00000000952415900003\x02TAGS\x01TagD\x02", h.Properties)

	g = loadGolden(t, "20-send-message-transaction-half-commit.bin")
	require.NoError(t, h.FromExt(g.ExtFields))
	require.Equal(t, int32(TransactionPreparedType), h.SysFlag)
	require.Equal(t, "pg-tx", h.ProducerGroup)
}

func TestGolden_SendBatchV2(t *testing.T) {
	g := loadGolden(t, "04-send-batch-message.bin")
	require.EqualValues(t, SendBatchMessage, g.Code)
	h, err := DecodeSendMessageRequestHeader(g.Code, g.ExtFields)
	require.NoError(t, err)
	require.Equal(t, SendMessageRequestHeader{
		ProducerGroup: "pg-sluice", Topic: "SluiceTopic", DefaultTopic: "TBW102",
		DefaultTopicQueueNums: 4, QueueID: 1, BornTimestamp: 1795993370223,
		MaxReconsumeTimes: i32p(0), Batch: true, BrokerName: "broker-a",
	}, h)
	v2 := h.V2()
	require.Equal(t, g.ExtFields, Ext(&v2))

	// The long form of the same header uses the long names.
	long := Ext(&h)
	require.Equal(t, "SluiceTopic", long["topic"])
	require.Equal(t, "true", long["batch"])
}

func TestGolden_SendResponse(t *testing.T) {
	g := loadGolden(t, "04-send-batch-message.response.bin")
	var h SendMessageResponseHeader
	require.NoError(t, h.FromExt(g.ExtFields))
	require.Equal(t, SendMessageResponseHeader{
		MsgID:   "7F000001000051AF00000000000001CF,7F000001000051AF0000000000000250,7F000001000051AF00000000000002D1",
		QueueID: 1, QueueOffset: 1, Region: "DefaultRegion", TraceOn: true,
	}, h)
	require.Equal(t, g.ExtFields, Ext(&h))
}

func TestGolden_Pull(t *testing.T) {
	g := loadGolden(t, "10-pull-message-queue0.bin")
	require.EqualValues(t, PullMessage, g.Code)
	var h PullMessageRequestHeader
	require.NoError(t, h.FromExt(g.ExtFields))
	require.Equal(t, PullMessageRequestHeader{
		ConsumerGroup: "cg-push", Topic: "SluiceTopic", QueueID: 0, QueueOffset: 0,
		MaxMsgNums: 32, SysFlag: PullFlagSuspend, CommitOffset: 0, SuspendTimeoutMillis: 20000,
		Subscription: "", SubVersion: 0, ExpressionType: "TAG", BrokerName: "broker-a",
	}, h)
	require.Equal(t, g.ExtFields, Ext(&h))

	g = loadGolden(t, "13-pull-message-commit-offset.bin")
	require.NoError(t, h.FromExt(g.ExtFields))
	require.Equal(t, int32(PullFlagCommitOffset|PullFlagSuspend), h.SysFlag)
	require.Equal(t, int64(2), h.CommitOffset)
	require.Equal(t, int64(2), h.QueueOffset)

	var resp PullMessageResponseHeader
	require.NoError(t, resp.FromExt(loadGolden(t, "10-pull-message-queue0.response.bin").ExtFields))
	require.Equal(t, PullMessageResponseHeader{NextBeginOffset: 2, MinOffset: 0, MaxOffset: 2}, resp)
	require.NoError(t, resp.FromExt(loadGolden(t, "12-pull-message-long-poll.response.bin").ExtFields))
	require.Equal(t, int64(2), resp.NextBeginOffset)
}

func TestGolden_Offsets(t *testing.T) {
	g := loadGolden(t, "09-query-consumer-offset.bin")
	require.EqualValues(t, QueryConsumerOffset, g.Code)
	var q QueryConsumerOffsetRequestHeader
	require.NoError(t, q.FromExt(g.ExtFields))
	require.Equal(t, QueryConsumerOffsetRequestHeader{ConsumerGroup: "cg-push", Topic: "SluiceTopic", QueueID: 0, BrokerName: "broker-a"}, q)
	require.Equal(t, g.ExtFields, Ext(&q))

	var qr QueryConsumerOffsetResponseHeader
	require.NoError(t, qr.FromExt(loadGolden(t, "09-query-consumer-offset.response.bin").ExtFields))
	require.Equal(t, int64(0), qr.Offset)

	g = loadGolden(t, "15-update-consumer-offset.bin")
	var u UpdateConsumerOffsetRequestHeader
	require.NoError(t, u.FromExt(g.ExtFields))
	require.Equal(t, UpdateConsumerOffsetRequestHeader{ConsumerGroup: "cg-push", Topic: "SluiceTopic", QueueID: 1, CommitOffset: 4, BrokerName: "broker-a"}, u)
	require.Equal(t, g.ExtFields, Ext(&u))

	g = loadGolden(t, "17-get-max-offset.bin")
	var m GetMaxOffsetRequestHeader
	require.NoError(t, m.FromExt(g.ExtFields))
	require.Equal(t, GetMaxOffsetRequestHeader{Topic: "SluiceTopic", QueueID: 0, BrokerName: "broker-a"}, m)
	var mr GetMaxOffsetResponseHeader
	require.NoError(t, mr.FromExt(loadGolden(t, "17-get-max-offset.response.bin").ExtFields))
	require.Equal(t, int64(2), mr.Offset)
}

func TestGolden_SendBack(t *testing.T) {
	g := loadGolden(t, "14-consumer-send-msg-back.bin")
	require.EqualValues(t, ConsumerSendMsgBack, g.Code)
	var h ConsumerSendMsgBackRequestHeader
	require.NoError(t, h.FromExt(g.ExtFields))
	require.Equal(t, ConsumerSendMsgBackRequestHeader{
		Offset: 207, Group: "cg-push", DelayLevel: 0, OriginMsgID: "C000020272AC00000000952411a80002",
		OriginTopic: "SluiceTopic", UnitMode: false, MaxReconsumeTimes: i32p(16), BrokerName: "broker-a",
	}, h)
	require.Equal(t, g.ExtFields, Ext(&h))
}

func TestGolden_EndTransaction(t *testing.T) {
	g := loadGolden(t, "21-end-transaction-commit.bin")
	var h EndTransactionRequestHeader
	require.NoError(t, h.FromExt(g.ExtFields))
	require.Equal(t, EndTransactionRequestHeader{
		ProducerGroup: "pg-tx", TranStateTableOffset: 4, CommitLogOffset: 1031,
		CommitOrRollback: TransactionCommitType, MsgID: "C000020272DB000000009524c5580001",
		BrokerName: "broker-a",
	}, h)
	require.Equal(t, g.ExtFields, Ext(&h))

	require.NoError(t, h.FromExt(loadGolden(t, "23-end-transaction-rollback.bin").ExtFields))
	require.Equal(t, int32(TransactionRollbackType), h.CommitOrRollback)
	require.Equal(t, int64(1238), h.CommitLogOffset)
}

func TestGolden_RouteAndConsumerList(t *testing.T) {
	g := loadGolden(t, "01-get-routeinfo-by-topic.bin")
	require.EqualValues(t, GetRouteInfoByTopic, g.Code)
	var r GetRouteInfoRequestHeader
	require.NoError(t, r.FromExt(g.ExtFields))
	require.Equal(t, GetRouteInfoRequestHeader{Topic: "SluiceTopic"}, r)
	require.Equal(t, g.ExtFields, Ext(&r))

	g = loadGolden(t, "08-get-consumer-list-by-group.bin")
	var c GetConsumerListByGroupRequestHeader
	require.NoError(t, c.FromExt(g.ExtFields))
	require.Equal(t, "cg-push", c.ConsumerGroup)
}

// TestGolden_EveryRequestHasAName checks the code of every captured frame
// against the code table.
func TestGolden_EveryRequestHasAName(t *testing.T) {
	for _, f := range goldenFiles(t) {
		g := loadGolden(t, f)
		if g.Flag&1 == 0 {
			require.True(t, IsKnownRequestCode(g.Code), f)
		}
	}
}
