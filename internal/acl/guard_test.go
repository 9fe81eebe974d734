package acl

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
)

func TestGuard_CountsAndRateLimitsLogs(t *testing.T) {
	r := testRules(t)
	var logs bytes.Buffer
	g := NewGuard(func() *Rules { return r }, slog.New(slog.NewTextHandler(&logs, nil)))
	now := time.Unix(1000, 0)
	g.now = func() time.Time { return now }
	bad := func() Request {
		return signed(protocol.SendMessage, "alice1", "wrong-secret", map[string]string{"topic": "orders"}, nil, "127.0.0.1")
	}
	for range 5 {
		require.NotNil(t, g.Check(bad()))
	}
	for i := range 3 {
		require.NotNil(t, g.Check(signed(protocol.SendMessage, "invented"+string(rune('a'+i)), "x", map[string]string{"topic": "t"}, nil, "127.0.0.1")))
	}
	require.Nil(t, g.Check(signed(protocol.SendMessage, "alice1", "alice-secret", map[string]string{"topic": "orders"}, nil, "127.0.0.1")))
	require.Equal(t, map[RefusalKey]uint64{
		{Key: "alice1", Reason: ReasonSignature}: 5,
		{Key: "", Reason: ReasonUnknownKey}:      3,
	}, g.Refusals())
	require.Equal(t, 2, strings.Count(logs.String(), "acl: request refused"), logs.String())

	now = now.Add(time.Minute)
	require.NotNil(t, g.Check(bad()))
	require.Equal(t, 3, strings.Count(logs.String(), "acl: request refused"))
	require.Contains(t, logs.String(), "refused_unlogged_before=4")
	require.NotContains(t, logs.String(), "alice-secret")
}
