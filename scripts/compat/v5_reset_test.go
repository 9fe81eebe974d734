package compat

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/stretchr/testify/require"
)

// TestV5SimpleConsumer_ResetOffset: mqadmin resetOffsetByTime applies to
// an official SimpleConsumer's group (issue 41, "a consumer can be
// rewound and replayed"). The group receives and acks 10 messages; reset
// back to before them, it receives all 10 again (attempt 1). Reset
// forward ("now") while those are in flight (never acked), they are not
// delivered again once their invisible time is over, and only a message
// sent afterwards comes.
func TestV5SimpleConsumer_ResetOffset(t *testing.T) {
	t.Parallel()
	topic, group := name(t, "topic"), name(t, "group")
	createTopic(t, topic, 2)
	p := newV5Producer(t, topic)
	before := time.Now().Add(-time.Second)
	var ids, want []string
	for i := range 10 {
		id := fmt.Sprintf("r%02d", i)
		ids, want = append(ids, id), append(want, id+"@1")
	}
	sendV5(t, p, topic, false, ids...)
	sc := newV5SimpleConsumer(t, group, topic, rmq.SUB_ALL)
	const invisible = 10 * time.Second
	// receiveAll receives until n messages came (MESSAGE_NOT_FOUND is an
	// error in the Go SDK: nothing this time).
	receiveAll := func(n int) []*rmq.MessageView {
		t.Helper()
		var got []*rmq.MessageView
		deadline := time.Now().Add(patience)
		for len(got) < n {
			require.True(t, time.Now().Before(deadline), "received %v of %d", v5IDs(got), n)
			mvs, _ := sc.Receive(waitContext(t, patience), 16, invisible)
			got = append(got, mvs...)
		}
		return got
	}
	first := receiveAll(10)
	require.Equal(t, want, v5IDs(first))
	for _, mv := range first {
		require.NoError(t, sc.Ack(waitContext(t, patience), mv))
	}

	mqadminOK(t, "resetOffsetByTime", "-g", group, "-t", topic, "-s", strconv.FormatInt(before.UnixMilli(), 10))
	again := receiveAll(10)
	require.Equal(t, want, v5IDs(again), "all 10 again after the reset back")

	mqadminOK(t, "resetOffsetByTime", "-g", group, "-t", topic, "-s", "now")
	// NB: the Go SDK (v5.1.4) drops an ack's status (Ack answers nil
	// whatever the broker says): the stale handles are checked in
	// broker.TestResetOffset_POPGroup, not here.
	sendV5(t, p, topic, false, "after")
	// NB: past the 10 skipped messages' invisible time, only "after" came.
	over := time.Now().Add(invisible + time.Second)
	var got []*rmq.MessageView
	for time.Now().Before(over) {
		mvs, _ := sc.Receive(waitContext(t, patience), 16, invisible)
		for _, mv := range mvs {
			require.NoError(t, sc.Ack(waitContext(t, patience), mv))
		}
		got = append(got, mvs...)
	}
	require.Equal(t, []string{"after@1"}, v5IDs(got), "only what came after the forward reset")
}
