package remoting

// intern returns b as a string, without allocating when it is one byte or
// one of the keys and values that come in nearly every header (the ext
// field names of sends, pulls and their answers, "true", "false", small
// numbers): a send's header has a dozen of them.
func intern(b []byte) string {
	switch len(b) {
	case 0:
		return ""
	case 1:
		return oneByte[b[0]]
	}
	if s, ok := interned[string(b)]; ok { // NB: no allocation for the lookup
		return s
	}
	return string(b)
}

var oneByte = func() (t [256]string) {
	for i := range t {
		t[i] = string([]byte{byte(i)})
	}
	return t
}()

var interned = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{
		"true", "false", "-1", "TBW102", "TAG", "*", "DefaultRegion",
		// send, pull, offsets and their answers (spec §3)
		"producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
		"bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "maxReconsumeTimes",
		"batch", "bname", "brokerName", "msgId", "queueOffset", "transactionId", "MSG_REGION", "TRACE_ON",
		"consumerGroup", "commitOffset", "suspendTimeoutMillis", "subscription", "subVersion",
		"expressionType", "maxMsgNums", "nextBeginOffset", "minOffset", "maxOffset",
		"suggestWhichBrokerId", "offset", "group", "timestamp", "consumerGroupName",
	} {
		m[s] = s
	}
	for i := 10; i < 100; i++ {
		s := string([]byte{byte('0' + i/10), byte('0' + i%10)})
		m[s] = s
	}
	return m
}()
