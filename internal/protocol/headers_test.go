package protocol

import (
	"errors"
	"reflect"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

func i32p(n int32) *int32 { return &n }

// headerCase describes one header type for the table tests: a filled
// sample, a constructor for an empty value, and which keys FromExt must
// insist on.
type headerCase struct {
	name     string
	sample   ExtHeader
	empty    func() ExtHeader
	required []string
}

// headerCases lists every typed header. The fuzz target uses it too.
func headerCases() []headerCase {
	return append([]headerCase{
		{"SendMessageRequestHeader", &SendMessageRequestHeader{
			ProducerGroup: "pg", Topic: "T", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
			QueueID: -1, SysFlag: 1, BornTimestamp: 1795993369620, Flag: 7,
			Properties: "TAGS\x01a\x02", ReconsumeTimes: 2, UnitMode: true,
			MaxReconsumeTimes: i32p(16), Batch: true, BrokerName: "broker-a",
		}, func() ExtHeader { return new(SendMessageRequestHeader) },
			[]string{"producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag", "bornTimestamp", "flag"}},
		{"SendMessageRequestHeaderV2", &SendMessageRequestHeaderV2{
			ProducerGroup: "pg", Topic: "T", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
			QueueID: 3, BornTimestamp: -5, Properties: "", MaxReconsumeTimes: i32p(0), Batch: true,
		}, func() ExtHeader { return new(SendMessageRequestHeaderV2) },
			[]string{"a", "b", "c", "d", "e", "f", "g", "h"}},
		{"SendMessageResponseHeader", &SendMessageResponseHeader{
			MsgID: "7F000001000051AF0000000000000000", QueueID: 1, QueueOffset: 9,
			TransactionID: "tx", Region: "DefaultRegion", TraceOn: true, Duplicates: 2,
		}, func() ExtHeader { return new(SendMessageResponseHeader) },
			[]string{"msgId", "queueId", "queueOffset"}},
		{"PullMessageRequestHeader", &PullMessageRequestHeader{
			ConsumerGroup: "cg", Topic: "T", QueueID: 1, QueueOffset: 1 << 40, MaxMsgNums: 32,
			SysFlag: 6, CommitOffset: 3, SuspendTimeoutMillis: 20000, Subscription: "a || b",
			SubVersion: 1795993371034374889, ExpressionType: "TAG", BrokerName: "b",
		}, func() ExtHeader { return new(PullMessageRequestHeader) },
			[]string{"consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset", "suspendTimeoutMillis", "subVersion"}},
		{"PullMessageResponseHeader", &PullMessageResponseHeader{SuggestWhichBrokerID: 1, NextBeginOffset: 2, MinOffset: 3, MaxOffset: 4},
			func() ExtHeader { return new(PullMessageResponseHeader) },
			[]string{"suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"}},
		{"QueryConsumerOffsetRequestHeader", &QueryConsumerOffsetRequestHeader{ConsumerGroup: "cg", Topic: "T", QueueID: 2, BrokerName: "b"},
			func() ExtHeader { return new(QueryConsumerOffsetRequestHeader) },
			[]string{"consumerGroup", "topic", "queueId"}},
		{"QueryConsumerOffsetResponseHeader", &QueryConsumerOffsetResponseHeader{Offset: 12},
			func() ExtHeader { return new(QueryConsumerOffsetResponseHeader) }, []string{"offset"}},
		{"UpdateConsumerOffsetRequestHeader", &UpdateConsumerOffsetRequestHeader{ConsumerGroup: "cg", Topic: "T", QueueID: 2, CommitOffset: 99, BrokerName: "b"},
			func() ExtHeader { return new(UpdateConsumerOffsetRequestHeader) },
			[]string{"consumerGroup", "topic", "queueId", "commitOffset"}},
		{"GetMaxOffsetRequestHeader", &GetMaxOffsetRequestHeader{Topic: "T", QueueID: 1, BrokerName: "b"},
			func() ExtHeader { return new(GetMaxOffsetRequestHeader) }, []string{"topic", "queueId"}},
		{"GetMaxOffsetResponseHeader", &GetMaxOffsetResponseHeader{Offset: 2},
			func() ExtHeader { return new(GetMaxOffsetResponseHeader) }, []string{"offset"}},
		{"GetMinOffsetRequestHeader", &GetMinOffsetRequestHeader{Topic: "T", QueueID: 1},
			func() ExtHeader { return new(GetMinOffsetRequestHeader) }, []string{"topic", "queueId"}},
		{"GetMinOffsetResponseHeader", &GetMinOffsetResponseHeader{Offset: 2},
			func() ExtHeader { return new(GetMinOffsetResponseHeader) }, []string{"offset"}},
		{"SearchOffsetByTimestampRequestHeader", &SearchOffsetByTimestampRequestHeader{Topic: "T", QueueID: 1, Timestamp: 1700000000000},
			func() ExtHeader { return new(SearchOffsetByTimestampRequestHeader) }, []string{"topic", "queueId", "timestamp"}},
		{"SearchOffsetByTimestampResponseHeader", &SearchOffsetByTimestampResponseHeader{Offset: 5},
			func() ExtHeader { return new(SearchOffsetByTimestampResponseHeader) }, []string{"offset"}},
		{"GetEarliestMsgStoretimeRequestHeader", &GetEarliestMsgStoretimeRequestHeader{Topic: "T", QueueID: 1},
			func() ExtHeader { return new(GetEarliestMsgStoretimeRequestHeader) }, []string{"topic", "queueId"}},
		{"GetEarliestMsgStoretimeResponseHeader", &GetEarliestMsgStoretimeResponseHeader{Timestamp: 1700000000000},
			func() ExtHeader { return new(GetEarliestMsgStoretimeResponseHeader) }, []string{"timestamp"}},
		{"ConsumerSendMsgBackRequestHeader", &ConsumerSendMsgBackRequestHeader{
			Offset: 207, Group: "cg", DelayLevel: -1, OriginMsgID: "id", OriginTopic: "T",
			UnitMode: true, MaxReconsumeTimes: i32p(16), BrokerName: "b",
		}, func() ExtHeader { return new(ConsumerSendMsgBackRequestHeader) }, []string{"offset", "group", "delayLevel"}},
		{"GetConsumerListByGroupRequestHeader", &GetConsumerListByGroupRequestHeader{ConsumerGroup: "cg"},
			func() ExtHeader { return new(GetConsumerListByGroupRequestHeader) }, []string{"consumerGroup"}},
		{"GetProducerConnectionListRequestHeader", &GetProducerConnectionListRequestHeader{ProducerGroup: "pg"},
			func() ExtHeader { return new(GetProducerConnectionListRequestHeader) }, []string{"producerGroup"}},
		{"NotifyConsumerIDsChangedRequestHeader", &NotifyConsumerIDsChangedRequestHeader{ConsumerGroup: "cg"},
			func() ExtHeader { return new(NotifyConsumerIDsChangedRequestHeader) }, []string{"consumerGroup"}},
		{"UnregisterClientRequestHeader", &UnregisterClientRequestHeader{ClientID: "1.2.3.4@1", ProducerGroup: "pg", ConsumerGroup: "cg"},
			func() ExtHeader { return new(UnregisterClientRequestHeader) }, []string{"clientID"}},
		{"ResetOffsetRequestHeader", &ResetOffsetRequestHeader{Topic: "T", Group: "g", Timestamp: 1, IsForce: true},
			func() ExtHeader { return new(ResetOffsetRequestHeader) }, []string{"topic", "group", "timestamp", "isForce"}},
		{"GetConsumerRunningInfoRequestHeader", &GetConsumerRunningInfoRequestHeader{ConsumerGroup: "cg", ClientID: "c", JstackEnable: true},
			func() ExtHeader { return new(GetConsumerRunningInfoRequestHeader) }, []string{"consumerGroup", "clientId"}},
		{"ReplyMessageRequestHeader", &ReplyMessageRequestHeader{ProducerGroup: "pg", Topic: "c_REPLY_TOPIC", QueueID: 0,
			BornTimestamp: 1700000000000, Properties: "CORRELATION_ID\u0001x\u0002", BornHost: "127.0.0.1:1", StoreHost: "127.0.0.1:10911",
			StoreTimestamp: 1700000000001},
			func() ExtHeader { return new(ReplyMessageRequestHeader) }, []string{"topic", "queueId"}},
		{"ConsumeMessageDirectlyRequestHeader", &ConsumeMessageDirectlyRequestHeader{ConsumerGroup: "cg", ClientID: "c", MsgID: "m", BrokerName: "b"},
			func() ExtHeader { return new(ConsumeMessageDirectlyRequestHeader) }, []string{"consumerGroup"}},
		{"GetConsumerStatusRequestHeader", &GetConsumerStatusRequestHeader{Topic: "T", Group: "g", ClientAddr: "1.2.3.4:5"},
			func() ExtHeader { return new(GetConsumerStatusRequestHeader) }, []string{"topic", "group"}},
		{"EndTransactionRequestHeader", &EndTransactionRequestHeader{
			ProducerGroup: "pg", TranStateTableOffset: 4, CommitLogOffset: 1031,
			CommitOrRollback: TransactionCommitType, FromTransactionCheck: true, MsgID: "u", TransactionID: "t", BrokerName: "b",
		}, func() ExtHeader { return new(EndTransactionRequestHeader) },
			[]string{"producerGroup", "tranStateTableOffset", "commitLogOffset", "commitOrRollback", "msgId"}},
		{"CheckTransactionStateRequestHeader", &CheckTransactionStateRequestHeader{
			TranStateTableOffset: 4, CommitLogOffset: 1031, MsgID: "u", TransactionID: "u", OffsetMsgID: "o",
		}, func() ExtHeader { return new(CheckTransactionStateRequestHeader) },
			[]string{"tranStateTableOffset", "commitLogOffset"}},
		{"GetRouteInfoRequestHeader", &GetRouteInfoRequestHeader{Topic: "T", AcceptStandardJSONOnly: true, WithGrpc: true},
			func() ExtHeader { return new(GetRouteInfoRequestHeader) }, []string{"topic"}},
		{"RegisterBrokerRequestHeader", &RegisterBrokerRequestHeader{
			BrokerName: "broker-a", BrokerAddr: "127.0.0.1:10911", ClusterName: "DefaultCluster",
			HAServerAddr: "127.0.0.1:10912", BrokerID: 0, Compressed: true, BodyCrc32: -7,
		}, func() ExtHeader { return new(RegisterBrokerRequestHeader) },
			[]string{"brokerName", "brokerAddr", "clusterName", "haServerAddr", "brokerId"}},
		{"RegisterBrokerResponseHeader", &RegisterBrokerResponseHeader{HAServerAddr: "h", MasterAddr: "m"},
			func() ExtHeader { return new(RegisterBrokerResponseHeader) }, nil},
		{"UnregisterBrokerRequestHeader", &UnregisterBrokerRequestHeader{BrokerName: "b", BrokerAddr: "a", ClusterName: "c", BrokerID: 1},
			func() ExtHeader { return new(UnregisterBrokerRequestHeader) },
			[]string{"brokerName", "brokerAddr", "clusterName", "brokerId"}},
		{"QueryDataVersionRequestHeader", &QueryDataVersionRequestHeader{BrokerName: "b", BrokerAddr: "a", ClusterName: "c", BrokerID: 1},
			func() ExtHeader { return new(QueryDataVersionRequestHeader) },
			[]string{"brokerName", "brokerAddr", "clusterName", "brokerId"}},
		{"QueryDataVersionResponseHeader", &QueryDataVersionResponseHeader{Changed: true},
			func() ExtHeader { return new(QueryDataVersionResponseHeader) }, []string{"changed"}},
		{"DeleteTopicFromNamesrvRequestHeader", &DeleteTopicFromNamesrvRequestHeader{Topic: "T", ClusterName: "c"},
			func() ExtHeader { return new(DeleteTopicFromNamesrvRequestHeader) }, []string{"topic"}},
		{"GetTopicsByClusterRequestHeader", &GetTopicsByClusterRequestHeader{Cluster: "c"},
			func() ExtHeader { return new(GetTopicsByClusterRequestHeader) }, []string{"cluster"}},
		{"KVConfigRequestHeader", &KVConfigRequestHeader{Namespace: "ORDER_TOPIC_CONFIG", Key: "T", Value: "broker-a:4"},
			func() ExtHeader { return new(KVConfigRequestHeader) }, []string{"namespace", "key"}},
		{"GetKVConfigResponseHeader", &GetKVConfigResponseHeader{Value: "v"},
			func() ExtHeader { return new(GetKVConfigResponseHeader) }, []string{"value"}},
		{"GetKVListByNamespaceRequestHeader", &GetKVListByNamespaceRequestHeader{Namespace: "n"},
			func() ExtHeader { return new(GetKVListByNamespaceRequestHeader) }, []string{"namespace"}},
		{"BrokerPermRequestHeader", &BrokerPermRequestHeader{BrokerName: "b"},
			func() ExtHeader { return new(BrokerPermRequestHeader) }, []string{"brokerName"}},
		{"CreateTopicRequestHeader", &CreateTopicRequestHeader{
			Topic: "T", DefaultTopic: "TBW102", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6,
			TopicFilterType: "SINGLE_TAG", TopicSysFlag: 1, Order: true,
		}, func() ExtHeader { return new(CreateTopicRequestHeader) },
			[]string{"topic", "defaultTopic", "readQueueNums", "writeQueueNums", "perm", "topicFilterType"}},
		{"DeleteTopicRequestHeader", &DeleteTopicRequestHeader{Topic: "T"},
			func() ExtHeader { return new(DeleteTopicRequestHeader) }, []string{"topic"}},
		{"ViewMessageByIDRequestHeader", &ViewMessageByIDRequestHeader{Offset: 1 << 33},
			func() ExtHeader { return new(ViewMessageByIDRequestHeader) }, []string{"offset"}},
		{"QueryMessageRequestHeader", &QueryMessageRequestHeader{Topic: "T", Key: "k", MaxNum: 32, BeginTimestamp: 1, EndTimestamp: 2},
			func() ExtHeader { return new(QueryMessageRequestHeader) },
			[]string{"topic", "key", "maxNum", "beginTimestamp", "endTimestamp"}},
		{"QueryMessageResponseHeader", &QueryMessageResponseHeader{IndexLastUpdateTimestamp: 1, IndexLastUpdatePhyoffset: 2},
			func() ExtHeader { return new(QueryMessageResponseHeader) },
			[]string{"indexLastUpdateTimestamp", "indexLastUpdatePhyoffset"}},
	}, controllerHeaderCases()...)
}

func TestHeaders_RoundTrip(t *testing.T) {
	for _, tc := range headerCases() {
		t.Run(tc.name, func(t *testing.T) {
			ext := Ext(tc.sample)
			for k, v := range ext {
				require.NotEmpty(t, k)
				_ = v
			}
			got := tc.empty()
			require.NoError(t, got.FromExt(ext))
			require.Equal(t, tc.sample, got)

			// FromExt replaces every field, even from a dirty value.
			require.NoError(t, tc.sample.FromExt(ext))
			require.Equal(t, got, tc.sample)

			// Unknown keys are ignored.
			ext["bname-unknown"] = "x"
			ext["serializeTypeCurrentRPC"] = "JSON"
			require.NoError(t, got.FromExt(ext))
		})
	}
}

// TestHeaders_MissingField deletes each key ToExt writes: FromExt must fail
// naming the key exactly when it is required.
func TestHeaders_MissingField(t *testing.T) {
	for _, tc := range headerCases() {
		t.Run(tc.name, func(t *testing.T) {
			req := map[string]bool{}
			for _, k := range tc.required {
				req[k] = true
			}
			full := Ext(tc.sample)
			for _, k := range tc.required {
				require.Contains(t, full, k, "ToExt must write required key")
			}
			for k := range full {
				ext := Ext(tc.sample)
				delete(ext, k)
				err := tc.empty().FromExt(ext)
				if !req[k] {
					require.NoError(t, err, "optional key %q", k)
					continue
				}
				require.ErrorIs(t, err, ErrMissingField, k)
				var fe *FieldError
				require.True(t, errors.As(err, &fe))
				require.Equal(t, k, fe.Field)
				require.Equal(t, tc.name, fe.Header)
				require.Contains(t, err.Error(), `"`+k+`"`)
				require.Contains(t, err.Error(), tc.name)
			}
			// Empty map: the first required field is reported.
			if len(tc.required) > 0 {
				require.ErrorIs(t, tc.empty().FromExt(map[string]string{}), ErrMissingField)
				require.ErrorIs(t, tc.empty().FromExt(nil), ErrMissingField)
			}
		})
	}
}

// TestHeaders_BadValue puts garbage into each numeric or boolean key.
func TestHeaders_BadValue(t *testing.T) {
	for _, tc := range headerCases() {
		t.Run(tc.name, func(t *testing.T) {
			full := Ext(tc.sample)
			keys := make([]string, 0, len(full))
			for k := range full {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			typed := 0
			for _, k := range keys {
				ext := Ext(tc.sample)
				ext[k] = "12x"
				err := tc.empty().FromExt(ext)
				if err == nil {
					continue // a string field
				}
				typed++
				require.ErrorIs(t, err, ErrBadField, k)
				var fe *FieldError
				require.True(t, errors.As(err, &fe))
				require.Equal(t, k, fe.Field)
				require.Equal(t, "12x", fe.Value)
				require.Contains(t, err.Error(), `"12x"`)
			}
			want := countTyped(tc.sample)
			require.Equal(t, want, typed, "every numeric and boolean field rejects garbage")
		})
	}
}

// countTyped counts the non-string fields of a header struct (a []byte
// field is a string's value written from bytes).
func countTyped(h ExtHeader) int {
	v := reflect.ValueOf(h).Elem()
	n := 0
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if f.Kind() != reflect.String && (f.Kind() != reflect.Slice || f.Type().Elem().Kind() != reflect.Uint8) {
			n++
		}
	}
	return n
}

func TestHeaders_NumberRanges(t *testing.T) {
	var h PullMessageRequestHeader
	ext := Ext(&PullMessageRequestHeader{ConsumerGroup: "g", Topic: "t"})
	ext["queueId"] = "2147483648" // int32 overflow
	require.ErrorIs(t, h.FromExt(ext), ErrBadField)
	ext["queueId"] = "-2147483648"
	ext["queueOffset"] = "9223372036854775807"
	require.NoError(t, h.FromExt(ext))
	require.Equal(t, int32(-2147483648), h.QueueID)
	ext["queueOffset"] = "9223372036854775808"
	require.ErrorIs(t, h.FromExt(ext), ErrBadField)
	ext["queueOffset"] = "+7" // Java's Long.parseLong accepts a sign
	require.NoError(t, h.FromExt(ext))
	require.Equal(t, int64(7), h.QueueOffset)
	ext["queueOffset"] = " 7"
	require.ErrorIs(t, h.FromExt(ext), ErrBadField)

	long := make([]byte, 200)
	for i := range long {
		long[i] = '9'
	}
	ext["queueOffset"] = string(long)
	err := h.FromExt(ext)
	require.ErrorIs(t, err, ErrBadField)
	require.Less(t, len(err.Error()), 160, "remark quotes at most 64 bytes of the value")
}

func TestSendHeader_V1V2(t *testing.T) {
	v1 := SendMessageRequestHeader{ProducerGroup: "pg", Topic: "T", DefaultTopic: "TBW102",
		DefaultTopicQueueNums: 4, QueueID: 1, BornTimestamp: 9, Properties: "p", Batch: true, BrokerName: "b"}
	v2 := v1.V2()
	ext := Ext(&v2)
	require.Equal(t, "pg", ext["a"])
	require.Equal(t, "T", ext["b"])
	require.Equal(t, "true", ext["m"])
	require.Equal(t, "b", ext["n"])
	require.NotContains(t, ext, "l", "absent maxReconsumeTimes stays absent")
	require.NotContains(t, ext, "topic")

	for _, code := range []int16{SendMessageV2, SendBatchMessage, SendReplyMessageV2} {
		got, err := DecodeSendMessageRequestHeader(code, ext)
		require.NoError(t, err)
		require.Equal(t, v1, got)
	}
	_, err := DecodeSendMessageRequestHeader(SendMessage, ext)
	require.ErrorIs(t, err, ErrMissingField, "long names for code 10")

	long := Ext(&v1)
	got, err := DecodeSendMessageRequestHeader(SendMessage, long)
	require.NoError(t, err)
	require.Equal(t, v1, got)
	back := got.V2()
	require.Equal(t, v1, back.V1())

	_, err = DecodeSendMessageRequestHeader(PullMessage, long)
	require.ErrorIs(t, err, ErrNotSendCode)
	require.Contains(t, err.Error(), "PULL_MESSAGE")
}

// TestExt_Sized: Ext sizes a header's map for all its fields (a map that
// grows past its hint rehashes): a header with more than smallExt fields
// says how many.
func TestExt_Sized(t *testing.T) {
	maxRe := int32(3)
	full := []interface{ ToExt(map[string]string) }{
		&SendMessageRequestHeader{Properties: "p", MaxReconsumeTimes: &maxRe, BrokerName: "b"},
		&SendMessageRequestHeaderV2{Properties: "p", MaxReconsumeTimes: &maxRe, BrokerName: "b"},
	}
	for _, tc := range headerCases() {
		full = append(full, tc.sample)
	}
	for _, h := range full {
		require.LessOrEqual(t, len(Ext(h)), extHint(h), "%T", h)
	}
}

// TestExtWriter: a header that writes its fields without a map writes
// exactly ExtLen of them, the same keys and values as ToExt, whichever
// optional fields are set.
func TestExtWriter(t *testing.T) {
	maxRe := int32(0)
	for _, w := range []ExtWriter{
		&SendMessageRequestHeader{ProducerGroup: "g", Topic: "T", QueueID: -1, BornTimestamp: 1 << 40},
		&SendMessageRequestHeader{Properties: "p", MaxReconsumeTimes: &maxRe, BrokerName: "b", Batch: true, UnitMode: true},
		&SendMessageRequestHeaderV2{ProducerGroup: "g", Topic: "T", SysFlag: -5, Flag: 7},
		&SendMessageRequestHeaderV2{MaxReconsumeTimes: &maxRe, BrokerName: "b", ReconsumeTimes: 3},
		&SendMessageResponseHeader{MsgID: "m", QueueID: 2, QueueOffset: 1 << 40},
		&SendMessageResponseHeader{MsgID: "m", TransactionID: "tx", Region: "r", TraceOn: true},
		&SendMessageResponseHeader{MsgID: "m", Duplicates: 1},
		&SendMessageResponseHeader{MsgIDBytes: []byte("id1,id2"), QueueID: 1},
		&PullMessageRequestHeader{ConsumerGroup: "g", Topic: "T", QueueID: 3, QueueOffset: 1 << 40, MaxMsgNums: 32,
			SysFlag: PullFlagSuspend | PullFlagSubscription, CommitOffset: -1, SuspendTimeoutMillis: 20000, Subscription: "a || b", SubVersion: 9},
		&PullMessageRequestHeader{ConsumerGroup: "g", Topic: "T", ExpressionType: "SQL92", BrokerName: "b"},
		&PullMessageRequestHeader{ConsumerGroup: "g", Topic: "T", BrokerName: "b"},
		&PullMessageResponseHeader{SuggestWhichBrokerID: 1, NextBeginOffset: 1 << 40, MinOffset: -1, MaxOffset: 7},
	} {
		var c countingEncoder
		w.WriteExt(&c)
		require.Equal(t, w.ExtLen(), c.n, "%T %+v", w, w)
		require.Equal(t, Ext(w.(ExtHeader)), ExtMap(w), "%T", w)
	}
}

type countingEncoder struct{ n int }

func (c *countingEncoder) Str(string, string)   { c.n++ }
func (c *countingEncoder) Int(string, int64)    { c.n++ }
func (c *countingEncoder) Bytes(string, []byte) { c.n++ }

// TestSendResponse_MsgIDBytes: an id written from bytes reads back as the
// string, and takes MsgID's place.
func TestSendResponse_MsgIDBytes(t *testing.T) {
	h := SendMessageResponseHeader{MsgID: "ignored", MsgIDBytes: []byte("7F00000100002A9F0000000000A3C2D1"), QueueID: 3}
	var got SendMessageResponseHeader
	require.NoError(t, got.FromExt(ExtMap(&h)))
	require.Equal(t, "7F00000100002A9F0000000000A3C2D1", got.MsgID)
	require.Equal(t, int32(3), got.QueueID)
}

// TestSendHeader_FromExtPairs: a V2 send header read from a pair list is
// the one read from the map of the same fields; a repeated key counts
// last, as in a map; a missing or bad field fails the same way.
func TestSendHeader_FromExtPairs(t *testing.T) {
	maxRe := int32(4)
	for _, h := range []SendMessageRequestHeaderV2{
		{ProducerGroup: "g", Topic: "T", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4, QueueID: 3, SysFlag: 1,
			BornTimestamp: 1 << 40, Flag: -2, Properties: "a\x01b\x02", ReconsumeTimes: 1, UnitMode: true,
			MaxReconsumeTimes: &maxRe, Batch: true, BrokerName: "b"},
		{ProducerGroup: "g", Topic: "T", QueueID: -1},
	} {
		kv := requireReadsAlike(t, &h)

		var dup SendMessageRequestHeaderV2
		require.NoError(t, dup.FromExtPairs(ExtPairsOf(append(kv, "b", "Later")...)))
		require.Equal(t, "Later", dup.Topic)

		var bad SendMessageRequestHeaderV2
		err := bad.FromExtPairs(ExtPairsOf(append(kv, "e", "x")...))
		var fe *FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "e", fe.Field)
	}
	var missing SendMessageRequestHeaderV2
	require.ErrorIs(t, missing.FromExtPairs(ExtPairsOf("a", "g")), ErrMissingField)
}

// TestPullHeaders_FromExtPairs: a pull's request and answer read from a
// pair list are the ones read from the map of the same fields; a missing
// or bad field fails the same way.
func TestPullHeaders_FromExtPairs(t *testing.T) {
	for _, h := range []PullMessageRequestHeader{
		{ConsumerGroup: "g", Topic: "T", QueueID: 3, QueueOffset: 1 << 40, MaxMsgNums: 32, SysFlag: PullFlagSuspend | PullFlagSubscription,
			CommitOffset: 9, SuspendTimeoutMillis: 20000, Subscription: "a || b", SubVersion: 1 << 41, ExpressionType: "TAG", BrokerName: "b"},
		{ConsumerGroup: "g", Topic: "T"},
	} {
		kv := requireReadsAlike(t, &h)

		var bad PullMessageRequestHeader
		var fe *FieldError
		require.ErrorAs(t, bad.FromExtPairs(ExtPairsOf(append(kv, "queueId", "x")...)), &fe)
		require.Equal(t, "queueId", fe.Field)
	}
	var missing PullMessageRequestHeader
	require.ErrorIs(t, missing.FromExtPairs(ExtPairsOf("consumerGroup", "g", "topic", "T")), ErrMissingField)
	require.ErrorIs(t, missing.FromExtPairs(ExtPairs{}), ErrMissingField, "no pairs read as no fields, not as a map")

	r := PullMessageResponseHeader{SuggestWhichBrokerID: 1, NextBeginOffset: 1 << 40, MinOffset: 2, MaxOffset: 1 << 41}
	var got PullMessageResponseHeader
	require.NoError(t, got.FromExtPairs(ExtPairsOf(pairsOf(ExtMap(&r))...)))
	require.Equal(t, r, got)
	require.ErrorIs(t, got.FromExtPairs(ExtPairsOf("nextBeginOffset", "1")), ErrMissingField)
}

// pairsOf is ext's fields as a key, value list (in map order).
func pairsOf(ext map[string]string) []string {
	var kv []string
	for k, v := range ext {
		kv = append(kv, k, v)
	}
	return kv
}

// requireReadsAlike checks that h read back from its map and from the same
// fields as pairs is h both ways, and returns the pairs.
func requireReadsAlike[T any, P interface {
	*T
	ExtHeader
	FromExtPairs(ExtPairs) error
}](t *testing.T, h P) []string {
	t.Helper()
	kv := pairsOf(Ext(h))
	var fromMap, fromPairs T
	require.NoError(t, P(&fromMap).FromExt(Ext(h)))
	require.NoError(t, P(&fromPairs).FromExtPairs(ExtPairsOf(kv...)))
	require.Equal(t, fromMap, fromPairs)
	require.Equal(t, *h, fromPairs)
	return kv
}

func BenchmarkSendHeaderV2(b *testing.B) {
	maxRe := int32(16)
	h := SendMessageRequestHeaderV2{ProducerGroup: "pg", Topic: "BenchmarkTopic", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
		QueueID: 3, BornTimestamp: 1 << 40, Properties: "UNIQ_KEY\x01C0A80001000051AF00000000000000AA\x02TAGS\x01bench\x02",
		MaxReconsumeTimes: &maxRe, BrokerName: "broker-a"}
	ext := Ext(&h)
	var kvs []string
	for k, v := range ext {
		kvs = append(kvs, k, v)
	}
	kv := ExtPairsOf(kvs...)
	b.Run("FromExt", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var got SendMessageRequestHeaderV2
			if err := got.FromExt(ext); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("FromExtPairs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var got SendMessageRequestHeaderV2
			if err := got.FromExtPairs(kv); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestExtPairs: pairs built from strings give them back in order; an odd
// last key is dropped; no pairs at all are still a (valid, empty) header,
// unlike the zero value.
func TestExtPairs(t *testing.T) {
	p := ExtPairsOf("a", "1", "bb", "", "", "3", "odd")
	require.True(t, p.Valid())
	require.Equal(t, 3, p.Len())
	require.Equal(t, []string{"a", "1", "bb", "", "", "3"}, p.Strings())
	require.Equal(t, "bb", p.Key(1))
	require.Equal(t, "3", p.Value(2))
	require.True(t, ExtPairsOf().Valid())
	require.Equal(t, 0, ExtPairsOf().Len())
	require.False(t, ExtPairs{}.Valid())
	c := p.Clone()
	require.Equal(t, p.Strings(), c.Strings())

	// CloneIn cuts the spans from room and caps them: growing one copy
	// never writes into the next.
	room := make([]uint32, 30)
	c1, rest := p.CloneIn(room)
	require.Len(t, rest, 30-12)
	c2, rest := ExtPairsOf("k", "v").CloneIn(rest)
	require.Len(t, rest, 30-12-4)
	require.Equal(t, p.Strings(), c1.Strings())
	require.Equal(t, []string{"k", "v"}, c2.Strings())
	require.Equal(t, 12, cap(c1.span))
	e, rest := ExtPairsOf().CloneIn(rest)
	require.True(t, e.Valid(), "no fields cut from room are still a header")
	require.Len(t, rest, 14)
	big, left := p.CloneIn(rest[:5])
	require.Equal(t, p.Strings(), big.Strings(), "too little room: a list of its own")
	require.Len(t, left, 5)
	nilRoom, _ := ExtPairsOf().CloneIn(nil)
	require.True(t, nilRoom.Valid())
	none, left := ExtPairs{}.CloneIn(rest)
	require.False(t, none.Valid(), "no header stays no header")
	require.Len(t, left, 14)

	var r SendMessageResponseHeader
	require.ErrorIs(t, r.FromExtPairs(ExtPairs{}), ErrMissingField, "no pairs read as no fields, not as a map")
}
