package broker

import (
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/testutil"
)

// TestClip: a short value is logged as is; a long one is cut to clipLen
// bytes of valid UTF-8 and says how long it was.
func TestClip(t *testing.T) {
	require.Equal(t, "TagA || TagB", clip("TagA || TagB"))
	long := strings.Repeat("é", 1<<20) // NB: 2 bytes each: a cut may fall inside one
	c := clip("x" + long)
	require.Less(t, len(c), clipLen+32)
	require.True(t, utf8.ValidString(c))
	require.True(t, strings.HasSuffix(c, "... (2097153 bytes)"), c[len(c)-32:])
}

// TestHeartbeat_RefusedSubscriptionLogRateLimited: a client heartbeating a
// refused subscription (every 30 s, or as often as a hostile one likes) is
// logged once per address a minute, its values cut to clipLen, and each
// refusal counted.
func TestHeartbeat_RefusedSubscriptionLogRateLimited(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	b := startBroker(t, testConfig(t.TempDir()), Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	c := newClient(t, remoting.SerializeJSON)
	expr := "a = " + strings.Repeat("(", 300<<10)
	for range 5 {
		resp := sqlHeartbeat(t, c, b.Addr(), "c1", "g", "orders", "SQL92", expr, 1)
		require.Equal(t, protocol.SubscriptionParseFailed, int(resp.Code))
	}
	out := logs.String()
	require.Equal(t, 1, strings.Count(out, "subscription refused"), out)
	require.Equal(t, int64(5), b.stats.subsRefused.Load(), "each counted (sluice_subscriptions_refused_total)")
	require.Less(t, len(out), 64<<10, "the expression is cut")
}
