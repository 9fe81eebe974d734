package compat

import (
	"encoding/json"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	"github.com/stretchr/testify/require"
)

// The official RocketMQ 5 Go SDK's PushConsumer (v5.1.4) on issue 42:
// QueryAssignment, receives with auto_renew and attempt ids, nacks,
// local FIFO retries and ForwardMessageToDeadLetterQueue.

// pushLog records what a PushConsumer's listener was handed.
type pushLog struct {
	mu      sync.Mutex
	got     []string // "id@attempt", in the order the listener saw them
	changed chan struct{}
	// fail reports whether the listener fails this delivery.
	fail func(id string, attempt int32) bool
}

func newPushLog(fail func(id string, attempt int32) bool) *pushLog {
	return &pushLog{changed: make(chan struct{}), fail: fail}
}

func (l *pushLog) consume(mv *rmq.MessageView) rmq.ConsumerResult {
	id := mv.GetProperties()[idProperty]
	l.mu.Lock()
	l.got = append(l.got, id+"@"+strconv.Itoa(int(mv.GetDeliveryAttempt())))
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
	if l.fail != nil && l.fail(id, mv.GetDeliveryAttempt()) {
		return rmq.FAILURE
	}
	return rmq.SUCCESS
}

// waitFor waits up to d until done holds of what was received.
func (l *pushLog) waitFor(t *testing.T, d time.Duration, what string, done func(got []string) bool) []string {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		got, ch := append([]string(nil), l.got...), l.changed
		l.mu.Unlock()
		if done(got) {
			return got
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("waiting for %s: got %v", what, got)
		}
	}
}

// newV5PushConsumer starts an official PushConsumer of group on topic,
// signed with the admin account.
func newV5PushConsumer(t *testing.T, group, topic string, l *pushLog) rmq.PushConsumer {
	t.Helper()
	pc, err := rmq.NewPushConsumer(&rmq.Config{Endpoint: grpcEndpoint(t), ConsumerGroup: group,
		Credentials: &credentials.SessionCredentials{AccessKey: adminCreds.AccessKey, AccessSecret: adminCreds.SecretKey}},
		rmq.WithPushSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}),
		rmq.WithPushMessageListener(&rmq.FuncMessageListener{Consume: l.consume}))
	require.NoError(t, err)
	require.NoError(t, pc.Start())
	t.Cleanup(func() { _ = pc.GracefulStop() })
	return pc
}

// sendV5 sends one message per id on topic (group: its message group
// from the id's first letter), each carrying its id.
func sendV5(t *testing.T, p rmq.Producer, topic string, fifo bool, ids ...string) {
	t.Helper()
	for _, id := range ids {
		m := &rmq.Message{Topic: topic, Body: []byte("body of " + id)}
		m.AddProperty(idProperty, id)
		if fifo {
			m.SetMessageGroup(id[:1])
		}
		_, err := p.Send(waitContext(t, patience), m)
		require.NoError(t, err, id)
	}
}

// deadLetters reads the ids in %DLQ%group (none before the topic exists).
func deadLetters(t *testing.T, group string) []string {
	t.Helper()
	out, err := exec.Command(mqadmin, mqadminArgs("--json", "consumeMessage", "-t", "%DLQ%"+group)...).CombinedOutput()
	if err != nil {
		return nil // NB: no dead-letter topic yet
	}
	var l struct {
		Messages []struct {
			Properties map[string]string `json:"properties"`
		}
	}
	require.NoError(t, json.Unmarshal(out, &l), "%s", out)
	var ids []string
	for _, m := range l.Messages {
		ids = append(ids, m.Properties[idProperty])
	}
	return ids
}

func count(got []string, s string) int {
	n := 0
	for _, g := range got {
		if g == s {
			n++
		}
	}
	return n
}

// TestV5PushConsumer_AllOnceRedeliveryDeadLetter: a PushConsumer of a
// group that is not orderly (retryMaxTimes 1: max attempts 2) on a
// four-queue topic (one assignment, queue id -1) gets every message
// once; a message its listener fails once comes again (attempt 2, after the
// nack's backoff) and is not delivered a third time; one it always
// fails comes twice and then goes to %DLQ%group.
func TestV5PushConsumer_AllOnceRedeliveryDeadLetter(t *testing.T) {
	t.Parallel()
	topic, group := name(t, "topic"), name(t, "group")
	createTopic(t, topic, 4)
	mqadminOK(t, "updateSubGroup", "-g", group, "-b", brokerAddr, "-r", "1")
	p := newV5Producer(t, topic)
	var want []string
	for i := range 40 {
		want = append(want, "n-"+strconv.Itoa(i))
	}
	sendV5(t, p, topic, false, want...)
	sendV5(t, p, topic, false, "once", "never")
	l := newPushLog(func(id string, attempt int32) bool { return id == "never" || id == "once" && attempt == 1 })
	newV5PushConsumer(t, group, topic, l)

	got := l.waitFor(t, 2*patience, "every message, once@2 and never@2", func(got []string) bool {
		for _, id := range want {
			if count(got, id+"@1") == 0 {
				return false
			}
		}
		return count(got, "once@2") > 0 && count(got, "never@2") > 0
	})
	var dead []string
	deadline := time.Now().Add(patience)
	for len(dead) == 0 {
		require.True(t, time.Now().Before(deadline), "waiting for the dead letter")
		dead = deadLetters(t, group)
	}
	require.Equal(t, []string{"never"}, dead)
	l.mu.Lock()
	got = append([]string(nil), l.got...)
	l.mu.Unlock()
	for _, id := range want {
		require.Equal(t, 1, count(got, id+"@1"), "%s once: %v", id, got)
		require.Zero(t, count(got, id+"@2"), "%s once: %v", id, got)
	}
	require.Equal(t, []int{1, 1, 0}, []int{count(got, "once@1"), count(got, "once@2"), count(got, "once@3")}, "%v", got)
	require.Equal(t, []int{1, 1, 0}, []int{count(got, "never@1"), count(got, "never@2"), count(got, "never@3")}, "%v", got)
}

// TestV5PushConsumer_FIFO: a PushConsumer of an orderly group (mqadmin
// updateSubGroup -o true, retryMaxTimes 2: max attempts 3) on a two-queue
// topic gets each message group's messages in order; a message its
// listener always fails is retried by the SDK (attempts 1 to 3, local
// retries while the broker keeps it invisible) and then forwarded to
// %DLQ%group, after which its group's next message comes; every other
// message comes once.
func TestV5PushConsumer_FIFO(t *testing.T) {
	t.Parallel()
	topic, group := name(t, "topic"), name(t, "group")
	createTopic(t, topic, 2)
	mqadminOK(t, "updateSubGroup", "-g", group, "-b", brokerAddr, "-o", "true", "-r", "2")
	p := newV5Producer(t, topic)
	var ids []string
	for i := 1; i <= 5; i++ {
		for _, g := range []string{"A", "B", "C"} {
			ids = append(ids, g+strconv.Itoa(i))
		}
	}
	sendV5(t, p, topic, true, ids...)
	l := newPushLog(func(id string, _ int32) bool { return id == "B2" })
	newV5PushConsumer(t, group, topic, l)

	got := l.waitFor(t, 2*patience, "A5, B5 and C5", func(got []string) bool {
		return count(got, "A5@1") > 0 && count(got, "B5@1") > 0 && count(got, "C5@1") > 0
	})
	per := map[string][]string{}
	for _, g := range got {
		per[g[:1]] = append(per[g[:1]], g)
	}
	require.Equal(t, []string{"A1@1", "A2@1", "A3@1", "A4@1", "A5@1"}, per["A"])
	require.Equal(t, []string{"B1@1", "B2@1", "B2@2", "B2@3", "B3@1", "B4@1", "B5@1"}, per["B"],
		"B2 retried by the SDK up to its max attempts, then dead-lettered, then B3")
	require.Equal(t, []string{"C1@1", "C2@1", "C3@1", "C4@1", "C5@1"}, per["C"])
	var dead []string
	deadline := time.Now().Add(patience)
	for len(dead) == 0 {
		require.True(t, time.Now().Before(deadline), "waiting for the dead letter")
		dead = deadLetters(t, group)
	}
	require.Equal(t, []string{"B2"}, dead)
}

// TestV5PushConsumer_AutoRenew: a PushConsumer's listener that holds a
// message for 70 s, past the 60 s it was received with, acks it then
// with the handle it got: the broker renewed its invisible time
// meanwhile (auto_renew), so it was not delivered again and the ack
// lands (the group's offset reaches the end of the queue). Without the
// renewal the handle would be over at 60 s and the ack refused.
func TestV5PushConsumer_AutoRenew(t *testing.T) {
	t.Parallel()
	topic, group := name(t, "topic"), name(t, "group")
	createTopic(t, topic, 1)
	p := newV5Producer(t, topic)
	sendV5(t, p, topic, false, "slow", "fast")
	const hold = 70 * time.Second
	held := make(chan struct{})
	var once sync.Once
	l := newPushLog(func(id string, _ int32) bool {
		if id == "slow" {
			time.Sleep(hold) // NB: the scenario: a listener busy past the invisible time
			once.Do(func() { close(held) })
		}
		return false
	})
	newV5PushConsumer(t, group, topic, l)
	select {
	case <-held:
	case <-time.After(hold + patience):
		t.Fatal("the slow listener never returned")
	}
	waitCommitted(t, group, topic)
	l.mu.Lock()
	got := append([]string(nil), l.got...)
	l.mu.Unlock()
	require.ElementsMatch(t, []string{"slow@1", "fast@1"}, got, "each once: not delivered again while held")
}
