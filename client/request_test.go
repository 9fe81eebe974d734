package client

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/message"
)

// TestRequestReply: a requester's Request gets the reply a consumer sends
// with NewReply, pushed by the broker on the requester's connection; many
// requests at once each get their own.
func TestRequestReply(t *testing.T) {
	c := newCluster(t, 1)
	c.createTopic("rq", 2)
	// NB: no periodic heartbeat: the test orders them itself.
	responder := c.producer(WithHeartbeatInterval(time.Hour))
	c.pushConsumer("rq-g", "rq", func(ctx context.Context, msgs []*Message) ConsumeResult {
		for _, m := range msgs {
			r, err := NewReply(m, append([]byte("re:"), m.Body...))
			if err != nil {
				t.Errorf("NewReply: %v", err)
				continue
			}
			r.Properties["by"] = "rq-g"
			if _, err := responder.Send(ctx, r); err != nil {
				// NB: not an error of the test: a duplicate delivery (at
				// least once) can be answered after its requester left.
				// Every Request below must get its reply.
				t.Logf("send reply: %v", err)
			}
		}
		return ConsumeSuccess
	})
	requester := c.producer(WithHeartbeatInterval(time.Hour))

	ctx := ctxT(t, 20*time.Second)
	r, err := requester.Request(ctx, &Message{Topic: "rq", Body: []byte("one"), Properties: map[string]string{"k": "v"}})
	require.NoError(t, err)
	require.Equal(t, "re:one", string(r.Body))
	require.Equal(t, "rq-g", r.Properties["by"])
	require.Equal(t, "DefaultCluster_REPLY_TOPIC", r.Topic)
	require.NotEmpty(t, r.Properties[message.PropArriveTime])
	require.Equal(t, requester.core.id, r.Properties[message.PropReplyToClient])

	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf("req-%d", i)
			r, err := requester.Request(ctx, &Message{Topic: "rq", Body: []byte(body)})
			switch {
			case err != nil:
				errs <- err
			case string(r.Body) != "re:"+body:
				errs <- fmt.Errorf("request %s got reply %q", body, r.Body)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	requester.core.mu.Lock()
	require.Empty(t, requester.core.replies, "no request left waiting")
	require.Equal(t, requester.core.id, responder.core.id, "both producers carry the process's client id")
	requester.core.mu.Unlock()

	// The broker pushes a reply on the connection of that id seen last
	// first: now the responder's, whose client refuses a reply it does not
	// wait for, and the broker goes on to the requester's.
	require.NoError(t, responder.core.heartbeat(ctx))
	r, err = requester.Request(ctx, &Message{Topic: "rq", Body: []byte("two")})
	require.NoError(t, err)
	require.Equal(t, "re:two", string(r.Body))

	// A reply nobody waits for (late, or duplicate) is refused with a
	// remark the replier gets.
	late, err := NewReply(&Message{Properties: map[string]string{message.PropCluster: "DefaultCluster",
		message.PropCorrelationID: "gone", message.PropReplyToClient: requester.core.id}}, []byte("late"))
	require.NoError(t, err)
	_, err = c.producer(WithRetries(0)).Send(ctx, late)
	require.Error(t, err)
	require.Contains(t, err.Error(), "no request of this producer waits for correlation id gone")
}

func TestRequestReply_Errors(t *testing.T) {
	c := newCluster(t, 1)
	c.createTopic("rq2", 1)
	p := c.producer()

	// Nobody answers: ErrNoReply at the deadline.
	// NB: the deadline covers the send too: 300 ms ran out before the send
	// was answered on a loaded machine (load average 23 on 2 cores), which
	// is "not sent", not "no reply".
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := p.Request(ctx, &Message{Topic: "rq2", Body: []byte("x")})
	require.ErrorIs(t, err, ErrNoReply)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// Not a request.
	_, err = NewReply(&Message{Topic: "rq2", Body: []byte("x")}, []byte("y"))
	require.ErrorIs(t, err, ErrInvalidMessage)

	// A reply to a requester the broker does not know is refused, with a
	// remark that names it.
	r, err := NewReply(&Message{Properties: map[string]string{message.PropCluster: "DefaultCluster",
		message.PropCorrelationID: "c-1", message.PropReplyToClient: "nobody@1"}}, []byte("y"))
	require.NoError(t, err)
	_, err = c.producer(WithRetries(0)).Send(ctxT(t, 10*time.Second), r)
	require.Error(t, err)
	require.Contains(t, err.Error(), "requester nobody@1 is not connected to broker broker-a")

	// Closing the producer ends a Request waiting for its reply.
	done := make(chan error, 1)
	go func() {
		_, err := p.Request(context.Background(), &Message{Topic: "rq2", Body: []byte("z")})
		done <- err
	}()
	require.Eventually(t, func() bool {
		p.core.mu.Lock()
		defer p.core.mu.Unlock()
		return len(p.core.replies) == 1
	}, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, p.Close())
	require.ErrorIs(t, <-done, ErrClosed)
}

// TestMessageIDs_UniqueAcrossClients: every client of a process draws
// message ids (and request correlation ids) from one generator: ids made
// in the same millisecond by two producers differ.
func TestMessageIDs_UniqueAcrossClients(t *testing.T) {
	a, err := NewProducer(WithNameServers("127.0.0.1:9876"))
	require.NoError(t, err)
	b, err := NewProducer(WithNameServers("127.0.0.1:9876"))
	require.NoError(t, err)
	const n = 20000
	ids := make(chan string, 2*n)
	var wg sync.WaitGroup
	for _, p := range []*Producer{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				ids <- p.core.ids.Next()
			}
		}()
	}
	wg.Wait()
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		require.False(t, seen[id], "id %s made twice", id)
		seen[id] = true
	}
}
