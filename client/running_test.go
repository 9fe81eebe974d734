package client

import (
	"context"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// adminCall sends one request to addr as an admin tool does (JSON headers).
func adminCall(t *testing.T, addr string, code int16, h protocol.ExtHeader) *remoting.Command {
	t.Helper()
	rc := remoting.NewClient(remoting.ClientOptions{SerializeType: remoting.SerializeJSON, Logger: quiet()})
	defer rc.Close()
	resp, err := rc.Invoke(ctxT(t, 15*time.Second), addr, remoting.NewRequest(code, protocol.Ext(h), nil))
	require.NoError(t, err)
	return resp
}

// TestConsumerRunningInfo asks a push consumer for its running info through
// the broker, as mqadmin consumerStatus and RocketMQ's dashboard do.
func TestConsumerRunningInfo(t *testing.T) {
	c := newCluster(t, 1)
	c.createTopic("ri", 4)
	rec := newRecorder()
	pc := c.pushConsumer("ri-g", "ri", rec.handler("a"))
	waitBalanced(t, "ri", 4, pc)
	sendN(t, c.producer(), "ri", "m", 40, nil)
	rec.waitDistinct(t, 40, 10*time.Second)
	addr := c.brokers[0].Addr()

	var info protocol.ConsumerRunningInfo
	require.Eventually(t, func() bool {
		resp := adminCall(t, addr, protocol.GetConsumerRunningInfo,
			&protocol.GetConsumerRunningInfoRequestHeader{ConsumerGroup: "ri-g", ClientID: pc.ClientID(), JstackEnable: true})
		require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
		var err error
		info, err = protocol.DecodeConsumerRunningInfo(resp.Body)
		require.NoError(t, err)
		var committed int64
		for q, pi := range info.MQTable {
			if q.Topic == "ri" {
				committed += pi.CommitOffset
			}
		}
		return committed == 40
	}, 10*time.Second, 50*time.Millisecond, "commit offsets of the 4 queues add up to the 40 messages")

	require.Equal(t, "CONSUME_PASSIVELY", info.Properties[protocol.PropConsumeType])
	require.Equal(t, "false", info.Properties[protocol.PropConsumeOrderly])
	require.Equal(t, "CLUSTERING", info.Properties["messageModel"])
	require.Equal(t, c.ns.Addr(), info.Properties[protocol.PropNameServerAddr])
	var topics []string
	for _, s := range info.SubscriptionSet {
		topics = append(topics, s.Topic)
	}
	require.ElementsMatch(t, []string{"ri", RetryTopic("ri-g")}, topics)
	n := 0
	for q, pi := range info.MQTable {
		if q.Topic != "ri" {
			continue
		}
		n++
		require.Equal(t, "broker-a", q.BrokerName)
		require.Zero(t, pi.CachedMsgCount, "everything was acknowledged")
		require.False(t, pi.Dropped)
		require.Positive(t, pi.LastPullTimestamp)
	}
	require.Equal(t, 4, n)
	st := info.StatusTable["ri"]
	require.Positive(t, st.ConsumeOKTPS)
	require.Positive(t, st.PullTPS)
	require.Zero(t, st.ConsumeFailedMsgs)
	require.Contains(t, info.JStack, "goroutine ")

	// Without jstack, no stacks; an unknown client is an error with a remark.
	resp := adminCall(t, addr, protocol.GetConsumerRunningInfo,
		&protocol.GetConsumerRunningInfoRequestHeader{ConsumerGroup: "ri-g", ClientID: pc.ClientID()})
	require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
	info, err := protocol.DecodeConsumerRunningInfo(resp.Body)
	require.NoError(t, err)
	require.Empty(t, info.JStack)
	require.Contains(t, info.StatusTable, RetryTopic("ri-g"), "idle subscribed topics are listed too")
	resp = adminCall(t, addr, protocol.GetConsumerRunningInfo,
		&protocol.GetConsumerRunningInfoRequestHeader{ConsumerGroup: "ri-g", ClientID: "nobody@1"})
	require.Equal(t, protocol.SystemError, int(resp.Code))
	require.Contains(t, resp.Remark, "not online")
}

// TestConsumeMessageDirectly hands stored messages to a consumer's handler
// through the broker, and reports what the handler answered.
func TestConsumeMessageDirectly(t *testing.T) {
	c := newCluster(t, 1)
	c.createTopic("cd", 2)
	p := c.producer()
	ids := map[string]string{} // body → offset msg id
	for _, b := range []string{"ok", "later", "panic"} {
		r, err := p.Send(ctxT(t, 10*time.Second), &Message{Topic: "cd", Body: []byte(b)})
		require.NoError(t, err)
		ids[b] = r.OffsetMsgID
	}
	seen := make(chan string, 16)
	// NB: subscribed to a tag the messages lack, so that only direct
	// consumption hands them to the handler (direct consumption does not
	// filter by tag, as in RocketMQ).
	pc, err := NewPushConsumer("cd-g", c.consumerOpts()...)
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe("cd", "other-tag", func(_ context.Context, msgs []*Message) ConsumeResult {
		b := string(msgs[0].Body)
		seen <- b
		switch b {
		case "later":
			return ConsumeRetryLater
		case "panic":
			panic("boom")
		}
		return ConsumeSuccess
	}))
	require.NoError(t, pc.Start())
	t.Cleanup(func() { pc.Close() })
	waitBalanced(t, "cd", 2, pc)
	addr := c.brokers[0].Addr()

	direct := func(id, client string) *remoting.Command {
		return adminCall(t, addr, protocol.ConsumeMessageDirectly,
			&protocol.ConsumeMessageDirectlyRequestHeader{ConsumerGroup: "cd-g", ClientID: client, MsgID: id})
	}
	for body, want := range map[string]protocol.ConsumeResultCode{"ok": protocol.CRSuccess, "later": protocol.CRLater,
		"panic": protocol.CRThrowException} {
		resp := direct(ids[body], pc.ClientID())
		require.Equal(t, protocol.Success, int(resp.Code), resp.Remark)
		var res protocol.ConsumeMessageDirectlyResult
		require.NoError(t, json.Unmarshal(resp.Body, &res))
		require.Equal(t, want, res.ConsumeResult, body)
		require.False(t, res.Order)
		if body == "panic" {
			require.Equal(t, "the handler panicked: boom", res.Remark)
		}
		require.Equal(t, body, <-seen)
	}
	// Nothing else reached the handler.
	select {
	case b := <-seen:
		t.Fatalf("the handler also got %q", b)
	case <-time.After(200 * time.Millisecond):
	}

	resp := direct("not-an-id", pc.ClientID())
	require.Equal(t, protocol.SystemError, int(resp.Code))
	require.Contains(t, resp.Remark, "not an offset message id")
	host, off, err := message.ParseOffsetMsgID(ids["ok"])
	require.NoError(t, err)
	other := message.OffsetMsgID(netip.AddrPortFrom(host.Addr(), host.Port()+1), off)
	resp = direct(other, pc.ClientID())
	require.Equal(t, protocol.SystemError, int(resp.Code))
	require.Contains(t, resp.Remark, "was stored by the broker at "+netip.AddrPortFrom(host.Addr(), host.Port()+1).String())
	resp = direct(ids["ok"], "")
	require.Equal(t, protocol.SystemError, int(resp.Code))
	require.Contains(t, resp.Remark, "clientId")
	resp = direct(ids["ok"], "nobody@1")
	require.Equal(t, protocol.SystemError, int(resp.Code))
	require.Contains(t, resp.Remark, "not online")

	// A pull consumer has no handler: an error with a remark.
	var pull *PullConsumer
	pull, err = NewPullConsumer("cd-pull", c.opts()...)
	require.NoError(t, err)
	require.NoError(t, pull.Subscribe("cd", "*"))
	require.NoError(t, pull.Start())
	t.Cleanup(func() { pull.Close() })
	require.Eventually(t, func() bool {
		r := adminCall(t, addr, protocol.ConsumeMessageDirectly,
			&protocol.ConsumeMessageDirectlyRequestHeader{ConsumerGroup: "cd-pull", ClientID: pull.ClientID(), MsgID: ids["ok"]})
		return r.Code == protocol.SystemError && strings.Contains(r.Remark, "pull consumer")
	}, 10*time.Second, 50*time.Millisecond)
	r := adminCall(t, addr, protocol.GetConsumerRunningInfo,
		&protocol.GetConsumerRunningInfoRequestHeader{ConsumerGroup: "cd-pull", ClientID: pull.ClientID()})
	require.Equal(t, protocol.Success, int(r.Code), r.Remark)
	info, err := protocol.DecodeConsumerRunningInfo(r.Body)
	require.NoError(t, err)
	require.Equal(t, "CONSUME_ACTIVELY", info.Properties[protocol.PropConsumeType])
}

func TestConsumeStats_Windows(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	s := newConsumeStats(t0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	s.consumed("t", 100, true, 10*time.Millisecond, at(5*time.Second))
	s.pulledMsgs("t", 32, 4*time.Millisecond, at(5*time.Second))
	st := s.status(at(20 * time.Second))["t"]
	require.InDelta(t, 5.0, st.ConsumeOKTPS, 1e-9, "100 messages over the 20 s since the start")
	require.InDelta(t, 1.6, st.PullTPS, 1e-9)
	require.InDelta(t, 10.0, st.ConsumeRT, 1e-9)
	require.InDelta(t, 4.0, st.PullRT, 1e-9)

	// Ten messages a second for five minutes, two failures a second for the
	// last 30 s: rates cover the last minute, failures the whole time.
	for sec := 21; sec <= 320; sec++ {
		s.consumed("t", 10, true, time.Millisecond, at(time.Duration(sec)*time.Second))
		if sec > 290 {
			s.consumed("t", 2, false, time.Millisecond, at(time.Duration(sec)*time.Second))
		}
	}
	st = s.status(at(320 * time.Second))["t"]
	require.InDelta(t, 10.0, st.ConsumeOKTPS, 0.5)
	require.InDelta(t, 1.0, st.ConsumeFailedTPS, 0.2, "60 failures over the minute")
	require.EqualValues(t, 60, st.ConsumeFailedMsgs)
	require.Zero(t, st.PullTPS, "no pull in the last minute")
	// An hour and more later the failures are out of the hour's window.
	s.consumed("t", 1, true, time.Millisecond, at(2*time.Hour))
	st = s.status(at(2 * time.Hour))["t"]
	require.Zero(t, st.ConsumeFailedMsgs)

	// Three hours of events every 5 s: the samples kept cover an hour and
	// no more (one sample per 10 s), the oldest at least an hour old.
	end := 5 * time.Hour
	for d := 2 * time.Hour; d <= end; d += 5 * time.Second {
		s.consumed("t", 1, true, time.Millisecond, at(d))
	}
	require.LessOrEqual(t, len(s.samples), int(statsKeep/statsSampleEvery)+2)
	require.GreaterOrEqual(t, len(s.samples), int(statsKeep/statsSampleEvery)-1)
	require.GreaterOrEqual(t, at(end).Sub(s.samples[0].at), statsKeep)
	require.Less(t, at(end).Sub(s.samples[1].at), statsKeep+statsSampleEvery, "trimmed at each sample")
}
