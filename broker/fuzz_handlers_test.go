package broker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// FuzzBrokerRequests feeds hostile requests to the broker's handlers
// in-process: one broker per fuzzing process (started before f.Fuzz, closed
// by f.Cleanup), one request per input, served by the handler its code
// names from the broker's own handler table (handlers, which routes
// installs). Each request travels through the real frame codec first
// (EncodeFrame, DecodeFrame), so the handler sees what the server would
// hand it: ExtPairs for a msgpack send, decoded JSON strings.
//
// An input is (code, st, ext, body):
//   - code: a request code; one with no handler picks the handler
//     codes[code mod len] (sorted), so that every mutation lands on one;
//   - st: the serialize type, st mod 3 (JSON, ROCKETMQ, msgpack);
//   - ext: the extFields as records separated by '\n'; a record's first
//     byte k < 0xF0 names the key fuzzExtKeys[k mod len] (the keys of the
//     request headers of internal/protocol) and the rest is the value;
//     k >= 0xF0 starts a literal "key=value";
//   - body: the body, as sent.
//
// The property: the handler returns and answers within fuzzCallTimeout
// (parked pulls included: the broker's suspend cap is a few milliseconds
// here), it does not panic, it answers exactly once with a known response
// code, a failure carries a remark, the answer encodes in the request's
// codec and fits in a frame, the call allocates less than fuzzMaxAlloc, and
// the dispatcher can index what it stored.
//
// The broker's state carries over from input to input (topics, groups,
// offsets, messages), as on a real broker, so a finding may need the
// inputs before it to show again. Setup is deterministic: it creates a
// topic, groups and subscriptions and stores a few messages (a hostile
// producer's among them) at the same offsets every run, which the seeds
// and the corpus in testdata/fuzz name.
func FuzzBrokerRequests(f *testing.F) {
	ft := newFuzzTarget(f)
	for _, s := range ft.seeds(f) {
		f.Add(s.code, s.st, encodeFuzzExt(s.ext), s.body)
	}
	f.Fuzz(func(t *testing.T, code int16, st uint8, ext []byte, body []byte) {
		ft.serve(t, code, remoting.SerializeType(st%3), decodeFuzzExt(ext), body)
	})
}

const (
	// fuzzCallTimeout bounds a handler's run and its answer.
	fuzzCallTimeout = 10 * time.Second
	// fuzzMaxAlloc bounds what one request may allocate (process-wide,
	// background loops included).
	fuzzMaxAlloc = 64 << 20
	// fuzzTopic is the topic setup creates and stores messages in.
	fuzzTopic = "FuzzTopic"
)

// fuzzExtKeys are the extFields keys of the request headers of
// internal/protocol (the one-letter ones are SEND_MESSAGE_V2's), plus a
// few Java adds. A key's index is its name in the fuzz input: keep the
// order, append new keys at the end.
var fuzzExtKeys = []string{
	"topic", "queueId", "consumerGroup", "group", "offset", "commitOffset", "queueOffset", "maxMsgNums",
	"sysFlag", "subVersion", "subscription", "expressionType", "suspendTimeoutMillis", "producerGroup",
	"defaultTopic", "defaultTopicQueueNums", "bornTimestamp", "flag", "properties", "reconsumeTimes",
	"unitMode", "maxReconsumeTimes", "batch", "bname", "brokerName", "clientID", "clientId", "clientAddr",
	"delayLevel", "originMsgId", "originTopic", "commitLogOffset", "tranStateTableOffset",
	"commitOrRollback", "fromTransactionCheck", "msgId", "transactionId", "offsetMsgId", "key", "maxNum",
	"beginTimestamp", "endTimestamp", "timestamp", "isForce", "readQueueNums", "writeQueueNums", "perm",
	"topicFilterType", "topicSysFlag", "order", "groupName", "jstackEnable", "namespace",
	"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n",
	"serializeTypeCurrentRPC", "MSG_REGION", "TRACE_ON", "storeHost", "bornHost", "storeTimestamp",
	"compressed", "bodyCrc32", "cluster", "clusterName", "brokerAddr", "brokerId", "epoch", "maxOffset",
	"minOffset", "value", "changed", "invokeTime",
}

// encodeFuzzExt writes ext in the fuzz input's form (keys sorted).
func encodeFuzzExt(ext map[string]string) []byte {
	var out []byte
	keys := make([]string, 0, len(ext))
	for k := range ext {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := ext[k]
		if strings.Contains(v, "\n") {
			panic(fmt.Sprintf("fuzz seed: ext value of %q holds a newline", k))
		}
		if len(out) > 0 {
			out = append(out, '\n')
		}
		if i := slices.Index(fuzzExtKeys, k); i >= 0 {
			if i == '\n' {
				i += len(fuzzExtKeys) // NB: '\n' separates records
			}
			out = append(out, byte(i))
		} else {
			out = append(out, 0xFF)
			out = append(out, k...)
			out = append(out, '=')
		}
		out = append(out, v...)
	}
	return out
}

// decodeFuzzExt reads the fuzz input's extFields (see FuzzBrokerRequests).
func decodeFuzzExt(b []byte) map[string]string {
	ext := map[string]string{}
	for rec := range bytes.SplitSeq(b, []byte{'\n'}) {
		if len(rec) == 0 {
			continue
		}
		if rec[0] < 0xF0 {
			ext[fuzzExtKeys[int(rec[0])%len(fuzzExtKeys)]] = string(rec[1:])
			continue
		}
		k, v, _ := bytes.Cut(rec[1:], []byte{'='})
		ext[string(k)] = string(v)
	}
	return ext
}

// fuzzTarget is a broker and its handler table.
type fuzzTarget struct {
	b        *Broker
	handlers map[int16]remoting.Handler
	codes    []int16 // handlers' codes, sorted
	opaque   atomic.Int32
	// Found by setup, for the seeds.
	plainPos, halfPos, halfQueueOffset, hostilePos int64
	plainID                                        string
}

// newFuzzTarget starts a broker on a temp store and gives it something to
// serve: a topic with messages, a half message, groups, an offset.
func newFuzzTarget(tb testing.TB) *fuzzTarget {
	tb.Helper()
	cfg := testConfig(tb.TempDir())
	cfg.LongPoll.MaxSuspend = 5 * time.Millisecond // parked pulls answer fast
	cfg.LongPoll.ShortPollWait = 5 * time.Millisecond
	cfg.Filter.PropertyEnabled = true
	b := startBroker(tb, cfg, Options{})
	ft := &fuzzTarget{b: b, handlers: b.handlers()}
	for code := range ft.handlers {
		ft.codes = append(ft.codes, code)
	}
	slices.Sort(ft.codes)

	must := func(code int16, h interface{ ToExt(map[string]string) }, body []byte) *remoting.Command {
		tb.Helper()
		var ext map[string]string
		if h != nil {
			ext = protocol.Ext(h)
		}
		resp := ft.serve(tb, code, remoting.SerializeJSON, ext, body)
		if resp == nil || resp.Code != protocol.Success {
			tb.Fatalf("setup %s: %+v", protocol.CodeName(code), resp)
		}
		return resp
	}
	send := func(h *protocol.SendMessageRequestHeader, body string) (pos int64, sh protocol.SendMessageResponseHeader) {
		tb.Helper()
		resp := must(protocol.SendMessage, h, []byte(body))
		err := sh.FromExt(resp.ExtFields)
		if err == nil {
			_, pos, err = message.ParseOffsetMsgID(sh.MsgID)
		}
		if err != nil {
			tb.Fatal(err)
		}
		return pos, sh
	}
	must(protocol.UpdateAndCreateTopic, &protocol.CreateTopicRequestHeader{Topic: fuzzTopic, ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}, nil)
	hb := protocol.HeartbeatData{ClientID: "127.0.0.1@fuzz", ProducerDataSet: []protocol.ProducerData{{GroupName: "fuzz-pg"}},
		ConsumerDataSet: []protocol.ConsumerData{
			{GroupName: "fuzz-cg", ConsumeType: "CONSUME_PASSIVELY", MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
				SubscriptionDataSet: []protocol.SubscriptionData{{Topic: fuzzTopic, SubString: "TagA || TagB", ExpressionType: "TAG"}}},
			{GroupName: "fuzz-sql", ConsumeType: "CONSUME_PASSIVELY", MessageModel: "BROADCASTING", ConsumeFromWhere: "CONSUME_FROM_LAST_OFFSET",
				SubscriptionDataSet: []protocol.SubscriptionData{{Topic: fuzzTopic, SubString: "a > 1 AND b = 'x'", ExpressionType: "SQL92"}}},
		}}
	must(protocol.HeartBeat, nil, mustEncodeBody(tb, remoting.SerializeJSON, hb))
	var sh protocol.SendMessageResponseHeader
	ft.plainPos, sh = send(ft.sendHeader(0, map[string]string{message.PropTags: "TagA", message.PropKeys: "k1 k2", "a": "2", "b": "x"}, 0), "hello")
	ft.plainID = sh.MsgID
	ft.halfPos, sh = send(ft.sendHeader(1, map[string]string{message.PropTranMsg: "true", message.PropProducerGroup: "fuzz-pg",
		message.PropUniqKey: "FUZZHALF"}, message.TxPrepared), "half")
	ft.halfQueueOffset = sh.QueueOffset
	send(ft.sendHeader(2, map[string]string{message.PropDelay: "1"}, 0), "later")
	// A hostile producer's message, stored as it was sent.
	hostile := ft.sendHeader(3, map[string]string{message.PropKeys: "k1"}, 0)
	hostile.ReconsumeTimes, hostile.Flag = -100, -1
	ft.hostilePos, _ = send(hostile, "hostile")
	must(protocol.UpdateConsumerOffset, &protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: "fuzz-cg", Topic: fuzzTopic,
		QueueID: 0, CommitOffset: 1}, nil)
	return ft
}

// sendHeader is a SEND_MESSAGE header to fuzzTopic.
func (ft *fuzzTarget) sendHeader(qid int32, props map[string]string, sysFlag int32) *protocol.SendMessageRequestHeader {
	return &protocol.SendMessageRequestHeader{ProducerGroup: "fuzz-pg", Topic: fuzzTopic, DefaultTopic: "TBW102",
		DefaultTopicQueueNums: 4, QueueID: qid, SysFlag: sysFlag, BornTimestamp: 1700000000000,
		Properties: string(message.AppendProperties(nil, props))}
}

func mustEncodeBody(tb testing.TB, st remoting.SerializeType, v any) []byte {
	tb.Helper()
	b, err := remoting.EncodeBody(st, v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// fuzzWriter records the answer and counts the writes.
type fuzzWriter struct {
	*remoting.ResponseRecorder
	writes atomic.Int32
}

func (w *fuzzWriter) Write(resp *remoting.Command) error {
	w.writes.Add(1)
	return w.ResponseRecorder.Write(resp)
}

func (w *fuzzWriter) WriteSoon(resp *remoting.Command) error { return w.Write(resp) }

// serve runs one request through the handler its code picks and checks
// the answer; it returns nil for a request the codec cannot frame (no
// client could send it).
func (ft *fuzzTarget) serve(tb testing.TB, code int16, st remoting.SerializeType, ext map[string]string,
	body []byte) *remoting.Command {
	tb.Helper()
	h, ok := ft.handlers[code]
	if !ok {
		code = ft.codes[int(uint16(code))%len(ft.codes)]
		h = ft.handlers[code]
	}
	if len(ext) == 0 {
		ext = nil
	}
	cmd := remoting.NewRequest(code, ext, body)
	cmd.SerializeType = st
	cmd.Opaque = ft.opaque.Add(1)
	frame, err := remoting.EncodeFrame(cmd)
	if err != nil {
		return nil
	}
	req, _, err := remoting.DecodeFrame(frame, 16<<20)
	if err != nil {
		tb.Fatalf("%s: a frame EncodeFrame wrote does not decode: %v", protocol.CodeName(code), err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &fuzzWriter{ResponseRecorder: remoting.NewResponseRecorder()}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	returned := make(chan string, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				returned <- fmt.Sprintf("%v\n%s", p, debug.Stack())
				return
			}
			returned <- ""
		}()
		h(ctx, w, req)
	}()
	timer := time.NewTimer(fuzzCallTimeout)
	defer timer.Stop()
	select {
	case p := <-returned:
		if p != "" {
			tb.Fatalf("%s (%s) panicked: %s", protocol.CodeName(code), st, p)
		}
	case <-timer.C:
		tb.Fatalf("%s (%s): the handler did not return within %s\n%s", protocol.CodeName(code), st, fuzzCallTimeout, allStacks())
	}
	wctx, wcancel := context.WithTimeout(ctx, fuzzCallTimeout)
	defer wcancel()
	resp, err := w.Wait(wctx)
	if err != nil {
		tb.Fatalf("%s (%s): no answer within %s\n%s", protocol.CodeName(code), st, fuzzCallTimeout, allStacks())
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > fuzzMaxAlloc {
		tb.Fatalf("%s (%s): %d MiB allocated for a %d-byte body and %d ext fields", protocol.CodeName(code), st,
			n>>20, len(body), len(ext))
	}
	if n := w.writes.Load(); n != 1 {
		tb.Fatalf("%s (%s): %d answers", protocol.CodeName(code), st, n)
	}
	name := protocol.ResponseCodeName(resp.Code)
	if strings.HasPrefix(name, "RESPONSE_CODE(") {
		tb.Fatalf("%s (%s): answered with unknown code %d (%q)", protocol.CodeName(code), st, resp.Code, resp.Remark)
	}
	if resp.Code != protocol.Success && resp.Remark == "" {
		tb.Fatalf("%s (%s): answered %s without a remark", protocol.CodeName(code), st, name)
	}
	out := *resp
	out.SerializeType = st
	if frame, err := remoting.EncodeFrame(&out); err != nil {
		tb.Fatalf("%s (%s): the answer %s does not encode: %v", protocol.CodeName(code), st, name, err)
	} else if len(frame) > int(ft.b.cfg.Remoting.MaxFrameSize) {
		tb.Fatalf("%s (%s): the answer %s takes %d bytes, more than a frame (%d): it is never sent", protocol.CodeName(code), st,
			name, len(frame), ft.b.cfg.Remoting.MaxFrameSize)
	}
	ft.checkDispatch(tb, code, st)
	return resp
}

// checkDispatch fails when what the request stored stops the dispatcher:
// a record it cannot index is retried forever, and every consume queue
// behind it stalls.
func (ft *fuzzTarget) checkDispatch(tb testing.TB, code int16, st remoting.SerializeType) {
	tb.Helper()
	s := ft.b.Store()
	for deadline := time.Now().Add(fuzzCallTimeout); s.DispatchLag() > 0 && s.DispatchRetries() == 0; time.Sleep(20 * time.Microsecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("%s (%s): the dispatcher is %d bytes behind after %s", protocol.CodeName(code), st, s.DispatchLag(), fuzzCallTimeout)
		}
	}
	if n := s.DispatchRetries(); n > 0 {
		tb.Fatalf("%s (%s): dispatch failed %d times: a stored record cannot be indexed (SLUICE_TEST_LOG=1 shows it)",
			protocol.CodeName(code), st, n)
	}
	if s.KeyIndexDegraded() {
		tb.Fatalf("%s (%s): the key index is degraded", protocol.CodeName(code), st)
	}
}

func allStacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// fuzzSeed is one seed request.
type fuzzSeed struct {
	code int16
	st   uint8
	ext  map[string]string
	body []byte
}

// seeds are realistic requests for every handler: frames the official Go
// client sent (testdata/rocketmq-client-go) and requests built from the
// typed headers and bodies, in each codec family.
func (ft *fuzzTarget) seeds(tb testing.TB) []fuzzSeed {
	var out []fuzzSeed
	frames, err := filepath.Glob(filepath.Join("testdata", "rocketmq-client-go", "*.bin"))
	if err != nil || len(frames) == 0 {
		tb.Fatalf("no golden frames: %v", err)
	}
	for _, name := range frames {
		raw, err := os.ReadFile(name)
		if err != nil {
			tb.Fatal(err)
		}
		c, _, err := remoting.DecodeFrame(raw, 16<<20)
		if err != nil {
			tb.Fatalf("%s: %v", name, err)
		}
		out = append(out, fuzzSeed{c.Code, uint8(c.SerializeType), c.ExtMap(), c.Body})
	}
	add := func(code int16, h interface{ ToExt(map[string]string) }, body any) {
		for _, st := range []remoting.SerializeType{remoting.SerializeJSON, remoting.SerializeRocketMQ, remoting.SerializeMsgpack} {
			var ext map[string]string
			if h != nil {
				ext = protocol.Ext(h)
			}
			var b []byte
			switch v := body.(type) {
			case nil:
			case []byte:
				b = v
			default:
				b = mustEncodeBody(tb, st, v)
			}
			out = append(out, fuzzSeed{code, uint8(st), ext, b})
		}
	}
	mq := protocol.MessageQueue{Topic: fuzzTopic, BrokerName: ft.b.cfg.BrokerName, QueueID: 1}
	props := func(kv ...string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return string(message.AppendProperties(nil, m))
	}
	batch, err := message.AppendBatch(nil, []message.BatchItem{{Body: []byte("b1"), Properties: props(message.PropKeys, "bk")},
		{Body: []byte("b2"), Properties: props(message.PropTags, "TagB")}})
	if err != nil {
		tb.Fatal(err)
	}
	sendV2 := func(qid int32, p string) *protocol.SendMessageRequestHeaderV2 {
		return &protocol.SendMessageRequestHeaderV2{ProducerGroup: "fuzz-pg", Topic: fuzzTopic, DefaultTopic: "TBW102",
			DefaultTopicQueueNums: 4, QueueID: qid, BornTimestamp: 1700000000000, Properties: p}
	}
	maxRe := int32(2)
	add(protocol.SendMessage, ft.sendHeader(3, map[string]string{message.PropTags: "TagB", message.PropKeys: "k3"}, 0), []byte("body"))
	add(protocol.SendMessage, ft.sendHeader(0, map[string]string{message.PropTimerDeliverMS: "1700000000000"}, 0), []byte("timer"))
	add(protocol.SendMessage, &protocol.SendMessageRequestHeader{ProducerGroup: "fuzz-pg", Topic: "%RETRY%fuzz-cg", QueueID: 0,
		ReconsumeTimes: 3, MaxReconsumeTimes: &maxRe, Properties: props(message.PropRetryTopic, fuzzTopic)}, []byte("retry"))
	add(protocol.SendMessageV2, sendV2(-1, props(message.PropTags, "TagA")), []byte("v2"))
	add(protocol.SendBatchMessage, sendV2(1, ""), batch)
	add(protocol.SendReplyMessage, ft.sendHeader(0, map[string]string{message.PropReplyToClient: "127.0.0.1@fuzz",
		message.PropCorrelationID: "c1"}, 0), []byte("reply"))
	add(protocol.SendReplyMessageV2, sendV2(0, props(message.PropReplyToClient, "nobody")), []byte("reply"))
	add(protocol.PullMessage, pullHeader("fuzz-cg", fuzzTopic, 0, 0, pullCommitOffset|pullSuspend), nil)
	sqlPull := pullHeader("fuzz-sql", fuzzTopic, 0, 0, pullSubscription)
	sqlPull.Subscription, sqlPull.ExpressionType = "a BETWEEN 1 AND 3 OR b IN ('x', 'y')", "SQL92"
	add(protocol.PullMessage, sqlPull, nil)
	add(protocol.HeartBeat, nil, protocol.HeartbeatData{ClientID: "127.0.0.1@fuzz2", ConsumerDataSet: []protocol.ConsumerData{{
		GroupName: "fuzz-cg2", ConsumeType: "CONSUME_ACTIVELY", MessageModel: "CLUSTERING",
		SubscriptionDataSet: []protocol.SubscriptionData{{Topic: fuzzTopic, SubString: "*", ExpressionType: "TAG", SubVersion: 1}}}}})
	add(protocol.UnregisterClient, &protocol.UnregisterClientRequestHeader{ClientID: "127.0.0.1@fuzz2", ConsumerGroup: "fuzz-cg2"}, nil)
	add(protocol.GetConsumerListByGroup, &protocol.GetConsumerListByGroupRequestHeader{ConsumerGroup: "fuzz-cg"}, nil)
	add(protocol.QueryConsumerOffset, &protocol.QueryConsumerOffsetRequestHeader{ConsumerGroup: "fuzz-cg", Topic: fuzzTopic, QueueID: 0}, nil)
	add(protocol.UpdateConsumerOffset, &protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: "fuzz-cg", Topic: fuzzTopic, QueueID: 1, CommitOffset: 1}, nil)
	add(protocol.GetMaxOffset, &protocol.GetMaxOffsetRequestHeader{Topic: fuzzTopic, QueueID: 0}, nil)
	add(protocol.GetMinOffset, &protocol.GetMinOffsetRequestHeader{Topic: fuzzTopic, QueueID: 0}, nil)
	add(protocol.SearchOffsetByTimestamp, &protocol.SearchOffsetByTimestampRequestHeader{Topic: fuzzTopic, QueueID: 0, Timestamp: 1}, nil)
	add(protocol.GetEarliestMsgStoretime, &protocol.GetEarliestMsgStoretimeRequestHeader{Topic: fuzzTopic, QueueID: 0}, nil)
	add(protocol.InvokeBrokerToResetOffset, &protocol.ResetOffsetRequestHeader{Topic: fuzzTopic, Group: "fuzz-cg", Timestamp: -1, IsForce: true}, nil)
	add(protocol.LockBatchMQ, nil, protocol.LockBatchRequest{ConsumerGroup: "fuzz-cg", ClientID: "127.0.0.1@fuzz", MQSet: []protocol.MessageQueue{mq}})
	add(protocol.UnlockBatchMQ, nil, protocol.LockBatchRequest{ConsumerGroup: "fuzz-cg", ClientID: "127.0.0.1@fuzz", MQSet: []protocol.MessageQueue{mq}})
	add(protocol.ConsumerSendMsgBack, &protocol.ConsumerSendMsgBackRequestHeader{Offset: ft.plainPos, Group: "fuzz-cg",
		OriginMsgID: ft.plainID, OriginTopic: fuzzTopic}, nil)
	add(protocol.ConsumerSendMsgBack, &protocol.ConsumerSendMsgBackRequestHeader{Offset: ft.plainPos, Group: "fuzz-cg", DelayLevel: -1}, nil)
	add(protocol.ConsumerSendMsgBack, &protocol.ConsumerSendMsgBackRequestHeader{Offset: ft.hostilePos, Group: "fuzz-cg"}, nil)
	for _, decision := range []int32{message.TxCommit, message.TxRollback} {
		add(protocol.EndTransaction, &protocol.EndTransactionRequestHeader{ProducerGroup: "fuzz-pg", TranStateTableOffset: ft.halfQueueOffset,
			CommitLogOffset: ft.halfPos, CommitOrRollback: decision, MsgID: "FUZZHALF"}, nil)
	}
	add(protocol.UpdateAndCreateTopic, &protocol.CreateTopicRequestHeader{Topic: "FuzzOther", ReadQueueNums: 2, WriteQueueNums: 2,
		Perm: 6, TopicFilterType: "SINGLE_TAG", Order: true}, nil)
	add(protocol.DeleteTopicInBroker, &protocol.DeleteTopicRequestHeader{Topic: "FuzzOther"}, nil)
	add(protocol.GetAllTopicConfig, nil, nil)
	add(protocol.GetAllConsumerOffset, nil, nil)
	add(protocol.GetAllDelayOffset, nil, nil)
	add(protocol.GetBrokerEpochCache, nil, nil)
	add(protocol.AllowLogCut, nil, nil)
	add(protocol.ViewMessageByID, &protocol.ViewMessageByIDRequestHeader{Offset: ft.plainPos}, nil)
	add(protocol.QueryMessage, &protocol.QueryMessageRequestHeader{Topic: fuzzTopic, Key: "k1", MaxNum: 32, EndTimestamp: 1 << 50}, nil)
	add(protocol.GetBrokerRuntimeInfo, nil, nil)
	add(protocol.GetTopicStatsInfo, &protocol.TopicRequestHeader{Topic: fuzzTopic}, nil)
	add(protocol.GetConsumeStats, &protocol.GetConsumeStatsRequestHeader{ConsumerGroup: "fuzz-cg", Topic: fuzzTopic}, nil)
	gc := protocol.DefaultSubscriptionGroupConfig("fuzz-cg3")
	gc.RetryMaxTimes = 3
	add(protocol.UpdateAndCreateSubscriptionGroup, nil, gc)
	add(protocol.GetAllSubscriptionGroupConfig, nil, nil)
	add(protocol.DeleteSubscriptionGroup, &protocol.DeleteSubscriptionGroupRequestHeader{GroupName: "fuzz-cg3"}, nil)
	add(protocol.GetConsumerConnectionList, &protocol.GetConsumerListByGroupRequestHeader{ConsumerGroup: "fuzz-cg"}, nil)
	add(protocol.GetConsumerRunningInfo, &protocol.GetConsumerRunningInfoRequestHeader{ConsumerGroup: "fuzz-cg", ClientID: "127.0.0.1@fuzz"}, nil)
	add(protocol.ConsumeMessageDirectly, &protocol.ConsumeMessageDirectlyRequestHeader{ConsumerGroup: "fuzz-cg", ClientID: "127.0.0.1@fuzz",
		MsgID: ft.plainID}, nil)
	add(protocol.InvokeBrokerToGetConsumerStatus, &protocol.GetConsumerStatusRequestHeader{Topic: fuzzTopic, Group: "fuzz-cg"}, nil)
	// Bad input the handlers must refuse with a remark.
	add(protocol.PullMessage, rawExt{"consumerGroup": "fuzz-cg", "topic": fuzzTopic, "queueId": "x"}, nil)
	add(protocol.HeartBeat, nil, []byte{0xdd, 0xdd, 0xdd, 0xdd, 0xdd})
	add(protocol.LockBatchMQ, nil, []byte(`{"mqSet":[null,{}]}`))
	add(protocol.UpdateAndCreateTopic, rawExt{"topic": "x", "readQueueNums": strconv.Itoa(1 << 20), "writeQueueNums": "1", "perm": "6"}, nil)
	return out
}

// TestHandlers_BodyFlood: a body of a million empty entries (a byte each
// in msgpack, three in JSON) is refused before decoding by each handler
// that decodes a body; a 1 MiB heartbeat decoded into 192 MiB (serve
// fails past fuzzMaxAlloc).
func TestHandlers_BodyFlood(t *testing.T) {
	ft := newFuzzTarget(t)
	const n = 1 << 20
	for _, c := range []struct {
		code int16
		key  string
	}{
		{protocol.HeartBeat, "consumerDataSet"}, {protocol.LockBatchMQ, "mqSet"}, {protocol.UnlockBatchMQ, "mqSet"},
	} {
		bodies := map[remoting.SerializeType][]byte{
			remoting.SerializeMsgpack: append(append(append([]byte{0x81, 0xa0 | byte(len(c.key))}, c.key...), 0xdd, 0x00, 0x10, 0x00, 0x00),
				bytes.Repeat([]byte{0x80}, n)...),
			remoting.SerializeJSON: append(append([]byte(`{"`+c.key+`":[`), bytes.Repeat([]byte(`{},`), n-1)...), `{}]}`...),
		}
		for st, body := range bodies {
			resp := ft.serve(t, c.code, st, nil, body)
			if resp.Code != protocol.SystemError || !strings.Contains(resp.Remark, "values") {
				t.Errorf("%s (%s): %s %q", protocol.CodeName(c.code), st, protocol.ResponseCodeName(resp.Code), resp.Remark)
			}
		}
	}
}
