package broker

import (
	"math"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/stretchr/testify/require"
)

// TestQueryMessage_Bounded: a key query returns at most queryMaxNum
// records whatever maxNum asks, and no more than fit in a frame (the
// newest): an answer larger than a frame was never sent, and the client
// waited for its timeout.
func TestQueryMessage_Bounded(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Store.MaxMessageSize = 200 << 10
	cfg.Remoting.MaxFrameSize = 1 << 20
	b := startBroker(t, cfg, Options{})
	c := newClient(t, remoting.SerializeJSON)
	for range queryMaxNum + 10 {
		mustSend(t, c, b.Addr(), "t", 0, "small", map[string]string{message.PropKeys: "hot"})
	}
	big := strings.Repeat("x", 190<<10)
	for i := range 8 {
		mustSend(t, c, b.Addr(), "t", 1, big+string(rune('a'+i)), map[string]string{message.PropKeys: "big"})
	}
	waitIndexed(t, b)
	query := func(key string) []string {
		resp := invoke(t, c, b.Addr(), protocol.QueryMessage, &protocol.QueryMessageRequestHeader{Topic: "t", Key: key,
			MaxNum: math.MaxInt32}, nil)
		require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
		return recordBodies(t, resp.Body)
	}
	require.Len(t, query("hot"), queryMaxNum)
	got := query("big")
	require.NotEmpty(t, got)
	require.Less(t, len(got), 8, "cut to a frame")
	require.Equal(t, big+"h", got[0], "the newest first")
}
