package remoting

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
)

// TestLongPoll_NotBusy: requests a server handler parks (Parked) and the
// client's LongPoll calls waiting for them are no exchanges in progress
// on either side, so a lone frame written meanwhile goes out at once; once
// answered, the counts are back where they started. Calls without
// LongPoll still count while they wait.
func TestLongPoll_NotBusy(t *testing.T) {
	const parkCode, plainCode = 9001, 9002
	release := make(chan struct{})
	var parked sync.WaitGroup
	hold := func(park bool) Handler {
		return func(_ context.Context, w ResponseWriter, req *Command) {
			if park {
				Parked(w)
				Parked(w) // NB: twice is once
			}
			parked.Done()
			go func() {
				<-release
				_ = w.Write(NewResponse(req, protocol.Success, ""))
			}()
		}
	}
	s := startServer(t, ServerOptions{}, map[int16]Handler{parkCode: hold(true), plainCode: hold(false)})
	c := newClient(t, SerializeMsgpack)
	ctx := ctxTimeout(t, 10*time.Second)
	conn, err := c.Conn(ctx, s.Addr().String())
	require.NoError(t, err)

	var calls sync.WaitGroup
	call := func(code int16, opts ...CallOption) {
		calls.Add(1)
		parked.Add(1)
		go func() {
			defer calls.Done()
			resp, err := conn.Invoke(ctx, NewRequest(code, nil, nil), opts...)
			if assert.NoError(t, err) { // NB: assert: not on the test's goroutine
				assert.EqualValues(t, protocol.Success, resp.Code)
			}
		}()
	}
	for range 3 {
		call(parkCode, LongPoll())
	}
	parked.Wait()
	server := oneConn(t, s)
	require.Equal(t, int32(0), server.busy.Load(), "parked requests are not busy")
	require.Equal(t, int32(0), conn.busy.Load(), "long polls are not busy")

	call(plainCode)
	parked.Wait()
	require.Equal(t, int32(1), server.busy.Load(), "a request being served is")
	require.Equal(t, int32(1), conn.busy.Load(), "a call waiting for its answer is")

	close(release)
	calls.Wait()
	require.Eventually(t, func() bool { return server.busy.Load() == 0 }, 5*time.Second, time.Millisecond,
		"the counts come back to zero")
	require.Equal(t, int32(0), conn.busy.Load())
}
