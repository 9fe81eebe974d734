package remoting

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestServer_RequestsBeforePeerClose: a client that writes requests and
// closes at once (the RocketMQ Go client commits its offsets and shuts down
// like that) has every request handled, although replies after the first
// fail with a broken pipe.
func TestServer_RequestsBeforePeerClose(t *testing.T) {
	var handled atomic.Int32
	s := startServer(t, ServerOptions{}, map[int16]Handler{15: func(ctx context.Context, w ResponseWriter, req *Command) {
		handled.Add(1)
		_ = w.Write(NewResponse(req, 0, ""))
	}})
	const rounds, perRound = 5, 300
	for range rounds {
		conn := dialRaw(t, s)
		// An established connection, as a client's is.
		writeRaw(t, conn, NewRequest(15, map[string]string{"n": "first"}, nil))
		require.Zero(t, readRaw(t, conn).Code)
		handled.Store(0)
		var frames []byte
		for i := range perRound {
			b, err := EncodeFrame(NewRequest(15, map[string]string{"n": strconv.Itoa(i)}, nil))
			require.NoError(t, err)
			frames = append(frames, b...)
		}
		_, err := conn.Write(frames)
		require.NoError(t, err)
		require.NoError(t, conn.Close())
		require.Eventually(t, func() bool { return handled.Load() == perRound }, 10*time.Second, time.Millisecond,
			"handled %d of %d requests sent before the close", handled.Load(), perRound)
	}
}
