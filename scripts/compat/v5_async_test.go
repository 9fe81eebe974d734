package compat

import (
	"context"
	"strconv"
	"sync"
	"testing"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/stretchr/testify/require"
)

// TestV5Producer_Async: the official v5 producer's SendAsync, 20 messages
// in flight at once: each callback gets one receipt with its message id,
// and a 4.x push consumer receives each message once under that id.
func TestV5Producer_Async(t *testing.T) {
	topic := name(t, "topic")
	createTopic(t, topic, 4)
	p := newV5Producer(t, topic)
	in := consumeAll(t, topic)

	const n = 20
	var (
		mu    sync.Mutex
		ids   = map[string]string{} // compat id → v5 message id
		errs  []error
		wg    sync.WaitGroup
		want  []string
		ctx   = waitContext(t, patience)
		calls = make([]int, n)
	)
	for i := range n {
		id := "async-" + strconv.Itoa(i)
		want = append(want, id)
		m := &rmq.Message{Topic: topic, Body: []byte("body of " + id)}
		m.AddProperty(idProperty, id)
		wg.Add(1)
		p.SendAsync(ctx, m, func(_ context.Context, rs []*rmq.SendReceipt, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			calls[i]++
			if err != nil {
				errs = append(errs, err)
				return
			}
			if len(rs) == 1 {
				ids[id] = rs[0].MessageID
			}
		})
	}
	wg.Wait()
	mu.Lock()
	require.Empty(t, errs)
	require.Len(t, ids, n, "a receipt per message")
	for i, c := range calls {
		require.Equal(t, 1, c, "message %d: its callback once", i)
	}
	mu.Unlock()

	got := in.waitIDs(t, want)
	seen := map[string]int{}
	for _, d := range got {
		id := d.msg.GetProperty(idProperty)
		seen[id]++
		require.Equal(t, ids[id], d.msg.MsgId, "%s: the 4.x id is the receipt's message id", id)
		require.Equal(t, "body of "+id, string(d.msg.Body))
	}
	for _, id := range want {
		require.Equal(t, 1, seen[id], "%s delivered once", id)
	}
}
