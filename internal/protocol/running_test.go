package protocol

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func sampleRunningInfo() ConsumerRunningInfo {
	return ConsumerRunningInfo{
		Properties: map[string]string{PropConsumeType: "CONSUME_PASSIVELY", PropConsumeOrderly: "false"},
		SubscriptionSet: []SubscriptionData{{Topic: "orders", SubString: "a || b", TagsSet: []string{"a", "b"},
			CodeSet: []any{"97", "98"}, SubVersion: 7, ExpressionType: "TAG"}},
		MQTable: map[MessageQueue]ProcessQueueInfo{
			{Topic: "orders", BrokerName: "b-1", QueueID: 1}: {CommitOffset: 10, CachedMsgCount: 3, CachedMsgMinOffset: 10, CachedMsgMaxOffset: 12},
			{Topic: "orders", BrokerName: "b-0", QueueID: 2}: {CommitOffset: 4, Locked: true, LastLockTimestamp: 99},
		},
		StatusTable: map[string]ConsumeStatus{"orders": {PullTPS: 1.5, ConsumeOKTPS: 2, ConsumeFailedMsgs: 3}},
		JStack:      "goroutine 1 [running]:\n\"quoted\" {braces} [brackets]",
	}
}

func TestConsumerRunningInfo_RoundTrip(t *testing.T) {
	in := sampleRunningInfo()
	b, err := in.Encode()
	require.NoError(t, err)
	// The queue keys are objects, as Java's fastjson and the official Go
	// client write them, sorted by topic, broker and queue.
	require.Contains(t, string(b), `"mqTable":{{"topic":"orders","brokerName":"b-0","queueId":2}:{"commitOffset":4,`)
	require.False(t, json.Valid(b), "object keys are not JSON")
	out, err := DecodeConsumerRunningInfo(b)
	require.NoError(t, err)
	require.Equal(t, in, out)
}

// TestConsumerRunningInfo_OfficialClientForm reads the body the official Go
// client writes (internal/model.go, ConsumerRunningInfo.Encode): fields in
// its order, a space before jstack and before the closing brace.
func TestConsumerRunningInfo_OfficialClientForm(t *testing.T) {
	body := `{"properties":{"PROP_CONSUMEORDERLY":"false","PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"},` +
		`"statusTable":{"orders":{"pullRT":1.25,"pullTPS":0,"consumeRT":0,"consumeOKTPS":3.5,"consumeFailedTPS":0,"consumeFailedMsgs":0}},` +
		`"subscriptionSet":[{"classFilterMode":false,"topic":"orders","subString":"*","tagsSet":[],"codeSet":[],"subVersion":1,"expressionType":"TAG"}],` +
		`"mqTable":{{"topic":"orders","brokerName":"b","queueId":0}:{"commitOffset":5,"cachedMsgMinOffset":0,"cachedMsgMaxOffset":0,` +
		`"cachedMsgCount":0,"cachedMsgSizeInMiB":0,"transactionMsgMinOffset":0,"transactionMsgMaxOffset":0,"transactionMsgCount":0,` +
		`"locked":false,"tryUnlockTimes":0,"lastLockTimestamp":0,"dropped":false,"lastPullTimestamp":1700000000000,"lastConsumeTimestamp":0},` +
		`{"topic":"orders","brokerName":"b","queueId":1}:{"commitOffset":6}}, "jstack":"" }`
	r, err := DecodeConsumerRunningInfo([]byte(body))
	require.NoError(t, err)
	require.Equal(t, "CONSUME_PASSIVELY", r.Properties[PropConsumeType])
	require.Equal(t, 3.5, r.StatusTable["orders"].ConsumeOKTPS)
	require.Len(t, r.SubscriptionSet, 1)
	require.Equal(t, map[MessageQueue]ProcessQueueInfo{
		{Topic: "orders", BrokerName: "b", QueueID: 0}: {CommitOffset: 5, LastPullTimestamp: 1700000000000},
		{Topic: "orders", BrokerName: "b", QueueID: 1}: {CommitOffset: 6},
	}, r.MQTable)
}

// TestConsumerRunningInfo_RawStacks reads the official client's stacks,
// which it writes unescaped.
func TestConsumerRunningInfo_RawStacks(t *testing.T) {
	r, err := DecodeConsumerRunningInfo([]byte("{\"properties\":{},\"mqTable\":{}, \"jstack\":\"goroutine 1 [running]:\n\tmain.main()\" }"))
	require.NoError(t, err)
	require.Equal(t, "goroutine 1 [running]:\n\tmain.main()", r.JStack)
}

func TestConsumerRunningInfo_Bad(t *testing.T) {
	for _, body := range []string{
		``, `[]`, `{`, `{"mqTable":{{"topic":"t"}}}`, `{"mqTable":{{"topic":"t"}:}}`, `{"mqTable":{{"topic":"t"}:{}`,
		`{"mqTable":{"x":{}}}`, `{"properties":[1]}`, `{"jstack":"unterminated}`, `{"a":1 "b":2}`, `{"a":1}x`,
		`{"mqTable":{{"topic":"t","queueId":"x"}:{}}}`, `{:1}`, `{"a":]}`,
	} {
		_, err := DecodeConsumerRunningInfo([]byte(body))
		require.Error(t, err, "%q", body)
	}
	r, err := DecodeConsumerRunningInfo([]byte(` { } `))
	require.NoError(t, err)
	require.Empty(t, r.MQTable)
}

func TestConsumeResultCode_JSON(t *testing.T) {
	b, err := json.Marshal(ConsumeMessageDirectlyResult{ConsumeResult: CRLater, AutoCommit: true, SpentTimeMills: 3})
	require.NoError(t, err)
	require.JSONEq(t, `{"order":false,"autoCommit":true,"consumeResult":"CR_LATER","remark":"","spentTimeMills":3}`, string(b))
	var r ConsumeMessageDirectlyResult
	require.NoError(t, json.Unmarshal(b, &r))
	require.Equal(t, CRLater, r.ConsumeResult)
	// The official Go client writes the number.
	require.NoError(t, json.Unmarshal([]byte(`{"consumeResult":4}`), &r))
	require.Equal(t, CRThrowException, r.ConsumeResult)
	require.Error(t, json.Unmarshal([]byte(`{"consumeResult":"CR_MAYBE"}`), &r))
	require.Error(t, json.Unmarshal([]byte(`{"consumeResult":6}`), &r))
	_, err = json.Marshal(ConsumeResultCode(9))
	require.Error(t, err)
}

// FuzzConsumerRunningInfo: no panic; what decodes encodes to a body that
// decodes and encodes to the same bytes.
func FuzzConsumerRunningInfo(f *testing.F) {
	b, err := sampleRunningInfo().Encode()
	require.NoError(f, err)
	f.Add(b)
	f.Add([]byte(`{"mqTable":{{"topic":"t","brokerName":"b","queueId":0}:{"commitOffset":5}}, "jstack":"" }`))
	f.Add([]byte(`{"properties":{"a":"b"},"statusTable":{},"subscriptionSet":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeConsumerRunningInfo(data)
		if err != nil {
			return
		}
		enc, err := r.Encode()
		require.NoError(t, err)
		r2, err := DecodeConsumerRunningInfo(enc)
		require.NoError(t, err, "%s", enc)
		enc2, err := r2.Encode()
		require.NoError(t, err)
		require.Equal(t, string(enc), string(enc2))
	})
}

// FuzzResetOffsetBody: no panic; what decodes (gson pairs or fastjson
// object keys) re-encodes to gson pairs that decode to the same table.
func FuzzResetOffsetBody(f *testing.F) {
	f.Add([]byte(`{"offsetTable":[[{"topic":"t","brokerName":"b","queueId":1},5]]}`))
	f.Add([]byte(`{"offsetTable":{{"topic":"t","brokerName":"b","queueId":1}:5,{"topic":"t","brokerName":"b","queueId":2}:-1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var b ResetOffsetBody
		if b.UnmarshalJSON(data) != nil {
			return
		}
		enc, err := b.MarshalJSON()
		require.NoError(t, err)
		var b2 ResetOffsetBody
		require.NoError(t, b2.UnmarshalJSON(enc), "%s", enc)
		require.Equal(t, b.OffsetTable, b2.OffsetTable)
	})
}

func TestConsumerStatusBodies(t *testing.T) {
	q := func(id int32) MessageQueue { return MessageQueue{Topic: "t", BrokerName: "b", QueueID: id} }
	// The official Go client's answer to GET_CONSUMER_STATUS_FROM_CLIENT.
	st, err := DecodeConsumerStatusBody([]byte(`{"messageQueueTable":{{"topic":"t","brokerName":"b","queueId":1}:7,{"topic":"t","brokerName":"b","queueId":0}:5}}`))
	require.NoError(t, err)
	require.Equal(t, map[MessageQueue]int64{q(0): 5, q(1): 7}, st.MessageQueueTable)
	enc, err := st.Encode()
	require.NoError(t, err)
	require.Equal(t, `{"messageQueueTable":{{"topic":"t","brokerName":"b","queueId":0}:5,{"topic":"t","brokerName":"b","queueId":1}:7}}`, string(enc))

	all := GetConsumerStatusBody{ConsumerTable: map[string]map[MessageQueue]int64{"c2": {q(1): 7}, "c1": {q(0): 5}, "idle": {}}}
	enc, err = all.Encode()
	require.NoError(t, err)
	back, err := DecodeGetConsumerStatusBody(enc)
	require.NoError(t, err)
	require.Equal(t, all, back)
	for _, bad := range []string{`{"consumerTable":{"c":{{"topic":"t"}:"x"}}}`, `{"consumerTable":[1]}`, `{"consumerTable":{1:{}}}`, `[`} {
		_, err := DecodeGetConsumerStatusBody([]byte(bad))
		require.Error(t, err, bad)
	}
	for _, bad := range []string{`{"messageQueueTable":{1:2}}`, `{"messageQueueTable":{{"topic":"t"}:"x"}}`, `{"messageQueueTable":[]}`, `{`} {
		_, err := DecodeConsumerStatusBody([]byte(bad))
		require.Error(t, err, bad)
	}
}

// FuzzConsumerStatusBody: no panic; what decodes re-encodes to a body that
// decodes the same.
func FuzzConsumerStatusBody(f *testing.F) {
	f.Add([]byte(`{"messageQueueTable":{},"consumerTable":{"c1":{{"topic":"t","brokerName":"b","queueId":0}:5}}}`))
	f.Add([]byte(`{"messageQueueTable":{{"topic":"t","brokerName":"b","queueId":1}:7}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if st, err := DecodeConsumerStatusBody(data); err == nil {
			enc, err := st.Encode()
			require.NoError(t, err)
			back, err := DecodeConsumerStatusBody(enc)
			require.NoError(t, err)
			require.Equal(t, st, back)
		}
		if all, err := DecodeGetConsumerStatusBody(data); err == nil {
			enc, err := all.Encode()
			require.NoError(t, err)
			back, err := DecodeGetConsumerStatusBody(enc)
			require.NoError(t, err)
			require.Equal(t, all, back)
		}
	})
}
