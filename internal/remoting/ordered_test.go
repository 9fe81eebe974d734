package remoting

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestServer_OrderedRequests: the requests of a code with an InlineHandler
// are served in arrival order on their connection. One the InlineHandler
// declines runs on the connection's ordered executor, and the requests
// behind it wait for it instead of being served inline ahead of it; once
// the executor is idle, requests are served inline again. A request of
// another code is not held up by them.
func TestServer_OrderedRequests(t *testing.T) {
	const codeOrdered, n = 901, 50
	gate := make(chan struct{})
	var mu sync.Mutex
	var served []string
	record := func(req *Command) {
		mu.Lock()
		served = append(served, string(req.Body))
		mu.Unlock()
	}
	done := make(chan struct{}, n+2)
	count := func() { done <- struct{}{} }
	wait := func(k int) {
		for range k {
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("requests not served")
			}
		}
	}
	s := NewServer("127.0.0.1:0", ServerOptions{Logger: quietLogger()})
	s.Handle(codeEcho, echo)
	s.Handle(codeOrdered, func(_ context.Context, _ ResponseWriter, req *Command) {
		if string(req.Body) == "slow" {
			<-gate
		}
		record(req)
		count()
	})
	s.HandleInline(codeOrdered, func(_ context.Context, _ ResponseWriter, req *Command) bool {
		if string(req.Body) == "slow" {
			return false
		}
		record(req)
		count()
		return true
	})
	startInlineServer(t, s)
	c := newClient(t, SerializeJSON)
	ctx := ctxTimeout(t, 10*time.Second)
	addr := s.Addr().String()
	conn, err := c.Conn(ctx, addr)
	require.NoError(t, err)
	oneway := func(body string) {
		req := NewRequest(codeOrdered, nil, []byte(body))
		req.Flag |= FlagOneway
		_, err := conn.Invoke(ctx, req, Oneway())
		require.NoError(t, err)
	}
	want := []string{"slow"}
	oneway("slow")
	for i := range n {
		want = append(want, fmt.Sprint(i))
		oneway(fmt.Sprint(i))
	}
	// The reader reads frames in order: once this is answered, every
	// request above was either served or queued.
	_, err = c.Invoke(ctx, addr, NewRequest(codeEcho, nil, nil))
	require.NoError(t, err)
	mu.Lock()
	require.Empty(t, served, "requests behind a declined one waited for it")
	mu.Unlock()
	close(gate)
	wait(n + 1)
	// Idle again: the next request is served inline, after all the others.
	oneway("after")
	want = append(want, "after")
	wait(1)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, want, served)
}
