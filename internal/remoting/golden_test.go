package remoting

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
)

// goldenIndex is the index of testdata/rocketmq-client-go/README.md:
// file, code, opaque, body length.
var goldenIndex = []struct {
	file    string
	code    int16
	opaque  int32
	bodyLen int
}{
	{"01-get-routeinfo-by-topic.bin", 105, 1, 0},
	{"02-send-message.bin", 10, 2, 12},
	{"03-send-message-compressed.bin", 10, 4, 89},
	{"04-send-batch-message.bin", 320, 5, 153},
	{"05-send-message-delay-level-3.bin", 10, 6, 13},
	{"06-heart-beat-producer.bin", 34, 7, 97},
	{"07-heart-beat-push-consumer.bin", 34, 3, 616},
	{"08-get-consumer-list-by-group.bin", 38, 4, 0},
	{"09-query-consumer-offset.bin", 14, 9, 0},
	{"10-pull-message-queue0.bin", 11, 11, 0},
	{"11-pull-message-queue1.bin", 11, 15, 0},
	{"12-pull-message-long-poll.bin", 11, 12, 0},
	{"13-pull-message-commit-offset.bin", 11, 32, 0},
	{"14-consumer-send-msg-back.bin", 36, 13, 0},
	{"15-update-consumer-offset.bin", 15, 20, 0},
	{"16-query-consumer-offset-not-found.bin", 14, 5, 0},
	{"17-get-max-offset.bin", 30, 6, 0},
	{"18-lock-batch-mq.bin", 41, 20, 255},
	{"19-unlock-batch-mq.bin", 42, 29, 255},
	{"20-send-message-transaction-half-commit.bin", 10, 2, 9},
	{"21-end-transaction-commit.bin", 37, 3, 0},
	{"22-send-message-transaction-half-rollback.bin", 10, 5, 11},
	{"23-end-transaction-rollback.bin", 37, 6, 0},
	{"01-get-routeinfo-by-topic.response.bin", 0, 1, 235},
	{"02-send-message.response.bin", 0, 2, 0},
	{"03-send-message-compressed.response.bin", 0, 4, 0},
	{"04-send-batch-message.response.bin", 0, 5, 0},
	{"05-send-message-delay-level-3.response.bin", 0, 6, 0},
	{"06-heart-beat-producer.response.bin", 0, 7, 0},
	{"07-heart-beat-push-consumer.response.bin", 0, 3, 0},
	{"08-get-consumer-list-by-group.response.bin", 0, 4, 38},
	{"09-query-consumer-offset.response.bin", 0, 9, 0},
	{"10-pull-message-queue0.response.bin", 0, 11, 431},
	{"11-pull-message-queue1.response.bin", 0, 15, 600},
	{"12-pull-message-long-poll.response.bin", 19, 12, 0},
	{"14-consumer-send-msg-back.response.bin", 0, 13, 0},
	{"16-query-consumer-offset-not-found.response.bin", 22, 5, 0},
	{"17-get-max-offset.response.bin", 0, 6, 0},
	{"18-lock-batch-mq.response.bin", 0, 20, 203},
	{"19-unlock-batch-mq.response.bin", 0, 29, 0},
	{"20-send-message-transaction-half-commit.response.bin", 0, 2, 0},
	{"22-send-message-transaction-half-rollback.response.bin", 0, 5, 0},
}

func TestGolden_DecodeEveryFrame(t *testing.T) {
	require.Len(t, goldenIndex, len(goldenFiles(t)))
	for _, g := range goldenIndex {
		t.Run(g.file, func(t *testing.T) {
			b := loadFrame(t, g.file)
			cmd, n, err := DecodeFrame(b, 0)
			require.NoError(t, err)
			require.Equal(t, len(b), n, "one frame per file")
			require.Equal(t, SerializeJSON, cmd.SerializeType)
			require.Equal(t, g.code, cmd.Code)
			require.Equal(t, g.opaque, cmd.Opaque)
			require.Len(t, cmd.Body, g.bodyLen)
			if strings.Contains(g.file, ".response.") {
				require.True(t, cmd.IsResponse())
				require.Equal(t, FlagResponse, cmd.Flag)
				require.Equal(t, protocol.LanguageJava, cmd.Language)
				require.EqualValues(t, protocol.Version498, cmd.Version)
			} else {
				require.False(t, cmd.IsResponse())
				require.False(t, cmd.IsOneway(), "the Go client never sets the oneway bit")
				require.Zero(t, cmd.Flag)
				require.Equal(t, protocol.LanguageGo, cmd.Language)
				require.EqualValues(t, protocol.Version452, cmd.Version)
				require.Empty(t, cmd.Remark)
			}
			// Re-encoding with every codec decodes to the same command.
			for _, st := range serializeTypes {
				c2 := *cmd
				c2.SerializeType = st
				frame, err := EncodeFrame(&c2)
				require.NoError(t, err)
				got, n, err := DecodeFrame(frame, 0)
				require.NoError(t, err)
				require.Equal(t, len(frame), n)
				c2.Header, got.Header = normal(c2.Header), normal(got.Header)
				require.Equal(t, &c2, got, st.String())
			}
		})
	}
}

// TestGolden_ExtFields checks decoded extFields against the README.
func TestGolden_ExtFields(t *testing.T) {
	decode := func(name string) *Command {
		cmd, _, err := DecodeFrame(loadFrame(t, name), 0)
		require.NoError(t, err)
		return cmd
	}
	cmd := decode("02-send-message.bin")
	require.Equal(t, map[string]string{
		"defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "topic": "SluiceTopic", "flag": "0",
		"reconsumeTimes": "0", "batch": "false",
		"properties": "TAGS\x01TagA\x02KEYS\x01order-1001 user-42\x02region\x01eu-west-1\x02UNIQ_KEY\x01C000020272AC00000000952411a80001\x02",
		"bname":      "broker-a", "producerGroup": "pg-sluice", "queueId": "1", "sysFlag": "0",
		"bornTimestamp": "1795993369620", "unitMode": "false", "maxReconsumeTimes": "0",
	}, cmd.ExtFields)
	require.Equal(t, "hello sluice", string(cmd.Body))

	cmd = decode("04-send-batch-message.bin")
	require.Equal(t, "SluiceTopic", cmd.ExtFields["b"])
	require.Equal(t, "true", cmd.ExtFields["m"])
	require.Equal(t, "", cmd.ExtFields["i"])
	require.Len(t, cmd.ExtFields, 14)

	cmd = decode("06-heart-beat-producer.bin")
	require.Nil(t, cmd.ExtFields, `"extFields":{} decodes as nil`)
	require.Contains(t, string(cmd.Body), `"producerDataSet":[{"groupName":"pg-sluice"}]`)

	cmd = decode("10-pull-message-queue0.bin")
	require.Equal(t, "20000", cmd.ExtFields["suspendTimeoutMillis"])
	require.Equal(t, "2", cmd.ExtFields["sysFlag"])
	require.Equal(t, "", cmd.ExtFields["subscription"])

	cmd = decode("16-query-consumer-offset-not-found.response.bin")
	require.EqualValues(t, protocol.QueryNotFound, cmd.Code)
	require.Equal(t, "Not found, maybe this group consumer boot first", cmd.Remark)
	require.Nil(t, cmd.ExtFields)

	cmd = decode("02-send-message.response.bin")
	require.Equal(t, map[string]string{"MSG_REGION": "DefaultRegion", "TRACE_ON": "true",
		"msgId": "7F000001000051AF0000000000000000", "queueId": "1", "queueOffset": "0"}, cmd.ExtFields)

	cmd = decode("21-end-transaction-commit.bin")
	require.Equal(t, "8", cmd.ExtFields["commitOrRollback"])
	require.Equal(t, "", cmd.ExtFields["transactionId"])
}

// TestGolden_JSONReencode: decode → our JSON encoder → decode gives an
// equal Header (maps compared, since key order is random on the wire).
func TestGolden_JSONReencode(t *testing.T) {
	for _, name := range goldenFiles(t) {
		var h, again Header
		require.NoError(t, JSONCodec.DecodeHeader(goldenHeaderBytes(t, name), &h))
		b, err := JSONCodec.AppendHeader(nil, &h)
		require.NoError(t, err)
		require.NoError(t, JSONCodec.DecodeHeader(b, &again))
		require.Equal(t, h, again, name)
	}
}

// TestGolden_ResponsesLikeCaptured: our JSON for a response has the shape
// of the captured responses the Go client accepted: no remark or
// extFields keys when empty.
func TestGolden_ResponsesLikeCaptured(t *testing.T) {
	req, _, err := DecodeFrame(loadFrame(t, "06-heart-beat-producer.bin"), 0)
	require.NoError(t, err)
	resp := NewResponse(req, protocol.Success, "")
	resp.Language = protocol.LanguageJava
	frame, err := EncodeFrame(resp)
	require.NoError(t, err)
	require.Equal(t, `{"code":0,"language":"JAVA","version":409,"opaque":7,"flag":1}`, string(frame[8:]))
	// Same bytes as the captured one modulo key order: same length.
	require.Len(t, frame, len(loadFrame(t, "06-heart-beat-producer.response.bin")))
}

// TestGolden_LenientJSON decodes the hand-made frames of testdata/lenient-json
// (JSON headers as other RocketMQ clients write them: numbers, booleans and
// nulls in extFields, a null remark, unknown top-level keys) as the Java
// broker reads them.
func TestGolden_LenientJSON(t *testing.T) {
	want := map[string]struct {
		code     int16
		language protocol.LanguageCode
		ext      map[string]string
	}{
		"01-heart-beat-consumer.bin": {protocol.HeartBeat, protocol.LanguagePython, nil},
		"02-send-message.bin": {protocol.SendMessage, protocol.LanguageOther, map[string]string{
			"producerGroup": "pg-node", "topic": "LenientTopic", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
			"queueId": "0", "sysFlag": "0", "bornTimestamp": "1764590000000", "flag": "0",
			"properties": "TAGS\x01TagA\x02KEYS\x01order-7\x02", "reconsumeTimes": "0", "unitMode": "false", "batch": "false",
		}},
		"03-pull-message.bin": {protocol.PullMessage, protocol.LanguagePython, map[string]string{
			"consumerGroup": "cg-lenient", "topic": "LenientTopic", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
			"sysFlag": "2", "commitOffset": "0", "suspendTimeoutMillis": "1000", "subVersion": "1764590000000",
			"expressionType": "TAG",
		}},
		"04-get-routeinfo-by-topic.bin": {protocol.GetRouteInfoByTopic, protocol.LanguageNodeJS, map[string]string{
			"topic": "LenientTopic", "acceptStandardJsonOnly": "true",
		}},
	}
	for _, name := range lenientFiles(t) {
		w, ok := want[name]
		require.True(t, ok, name)
		b := loadFrameIn(t, lenientDir, name)
		cmd, n, err := DecodeFrame(b, 0)
		require.NoError(t, err, name)
		require.Equal(t, len(b), n)
		require.Equal(t, w.code, cmd.Code, name)
		require.Equal(t, w.language, cmd.Language, name)
		require.Empty(t, cmd.Remark, name)
		require.Equal(t, w.ext, cmd.ExtFields, name)
		checkAgainstEncodingJSON(t, goldenHeaderBytesIn(t, lenientDir, name), &cmd.Header, nil)
	}
}
