package protocol

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCodeName(t *testing.T) {
	for _, tc := range []struct {
		code int16
		want string
	}{
		{SendMessage, "SEND_MESSAGE"},
		{PullMessage, "PULL_MESSAGE"},
		{QueryConsumerOffset, "QUERY_CONSUMER_OFFSET"},
		{UpdateConsumerOffset, "UPDATE_CONSUMER_OFFSET"},
		{SendMessageV2, "SEND_MESSAGE_V2"},
		{SendBatchMessage, "SEND_BATCH_MESSAGE"},
		{GetRouteInfoByTopic, "GET_ROUTEINFO_BY_TOPIC"},
		{RegisterBroker, "REGISTER_BROKER"},
		{AddWritePermOfBroker, "ADD_WRITE_PERM_OF_BROKER"},
		{9999, "REQUEST_CODE(9999)"},
		{-1, "REQUEST_CODE(-1)"},
	} {
		require.Equal(t, tc.want, CodeName(tc.code))
	}
	require.True(t, IsKnownRequestCode(HeartBeat))
	require.False(t, IsKnownRequestCode(16))
}

func TestResponseCodeName(t *testing.T) {
	require.Equal(t, "SUCCESS", ResponseCodeName(Success))
	require.Equal(t, "SYSTEM_BUSY", ResponseCodeName(SystemBusy))
	require.Equal(t, "REQUEST_CODE_NOT_SUPPORTED", ResponseCodeName(RequestCodeNotSupported))
	require.Equal(t, "PULL_NOT_FOUND", ResponseCodeName(PullNotFound))
	require.Equal(t, "FLOW_CONTROL", ResponseCodeName(FlowControl))
	require.Equal(t, "RESPONSE_CODE(99)", ResponseCodeName(99))
}

// TestCodeTables checks that the spec §2 table is complete (64 codes, plus
// controller mode's, GET_BROKER_EPOCH_CACHE, ALLOW_LOG_CUT and POP_STATUS) and that no two
// codes share a name.
func TestCodeTables(t *testing.T) {
	require.Len(t, requestNames, 64+len(controllerRequestNames)+3)
	seen := map[string]int16{}
	for c, n := range requestNames {
		prev, dup := seen[n]
		require.False(t, dup, "%s used by %d and %d", n, prev, c)
		seen[n] = c
	}
	require.Len(t, responseNames, 37+len(controllerResponseNames))
}

func TestLanguage(t *testing.T) {
	for l := LanguageCode(0); l.Valid(); l++ {
		got, ok := ParseLanguage(l.String())
		require.True(t, ok, l.String())
		require.Equal(t, l, got)
	}
	require.Equal(t, "GO", LanguageGo.String())
	require.Equal(t, "JAVA", LanguageJava.String())
	require.Equal(t, LanguageCode(9), LanguageGo)
	require.Equal(t, "LANGUAGE(200)", LanguageCode(200).String())
	got, ok := ParseLanguage("COBOL")
	require.False(t, ok)
	require.Equal(t, LanguageOther, got)
}
