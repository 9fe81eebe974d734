package store

import (
	"log/slog"
	"testing"

	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/stretchr/testify/require"
)

// TestPut_RefusesRecordNoQueueCanHold: a message whose consume queue cannot
// exist (negative queue id, a topic that is no directory name) is refused
// as illegal before it is stored; the dispatcher never sees it and the next
// put goes on.
func TestPut_RefusesRecordNoQueueCanHold(t *testing.T) {
	s := mustOpen(t, testConf(t.TempDir()), testOpts())
	defer s.Close()
	for _, m := range []*message.Message{msg("t", -98, "negative"), msg("a/b", 0, "slash"), msg("..", 0, "dots")} {
		r := s.Put(t.Context(), m)
		require.Equal(t, PutMessageIllegal, r.Status, "%s/%d", m.Topic, m.QueueID)
		require.Contains(t, r.Remark, "invalid topic or queue id")
	}
	var got PutResult
	s.Submit([]PutRequest{{Batch: &Batch{Template: *msg("t", -1, ""), Items: []message.BatchItem{{Body: []byte("b")}}},
		Done: AnswerFunc(func(r PutResult) { got = r })}})
	require.Equal(t, PutMessageIllegal, got.Status, "a batch to queue -1")
	mustPut(t, s, msg("t", 0, "after"))
	waitDispatched(t, s)
	requireQueue(t, s, 0, []string{"after"})
	require.Zero(t, s.DispatchRetries())
}

// TestDispatch_SkipsRecordNoQueueCanHold: a log an older broker wrote can
// hold a record no consume queue can hold (a send-back stored one in queue
// -98 of SCHEDULE_TOPIC_XXXX). The dispatcher logs it once and goes on:
// retrying it would stall every queue behind it for good.
func TestDispatch_SkipsRecordNoQueueCanHold(t *testing.T) {
	logs := &logCount{}
	o := testOpts()
	o.Logger = slog.New(logs)
	s := mustOpen(t, testConf(t.TempDir()), o)
	defer s.Close()
	mustPut(t, s, msg("t", 0, "before"))
	bad := msg(ScheduleTopic, -98, "unindexable")
	bad.StoreHost = bornHost
	s.putMu.Lock() // NB: as a put would, bypassing its checks
	_, err := s.log.Append(bad.EncodedSize(), func(at commitlog.Offset, dst []byte) error {
		return bad.Encode(dst, 0, int64(at))
	})
	s.putMu.Unlock()
	require.NoError(t, err)
	mustPut(t, s, msg("t", 0, "after"))
	waitDispatched(t, s)
	requireQueue(t, s, 0, []string{"before", "after"})
	require.Zero(t, s.DispatchRetries())
	require.Equal(t, 1, logs.count("no possible consume queue"), logs.all())
}
