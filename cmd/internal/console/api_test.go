package console

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/stretchr/testify/require"
)

// TestAPI_Topics: a topic created through the API is listed by the admin
// client and by the API with its queues and route; bad forms are 400 with
// what is wrong; an unknown topic is 404; a deleted one leaves the list.
func TestAPI_Topics(t *testing.T) {
	e := startEnv(t, Options{})
	ctx := context.Background()
	require.Equal(t, http.StatusOK, e.do(t, "POST", "/api/topics", topicForm{Topic: "orders", ReadQueues: 4, WriteQueues: 4}, nil))
	require.Eventually(t, func() bool {
		l, err := e.admin.TopicList(ctx)
		return err == nil && slices.Contains(l, "orders")
	}, 10*time.Second, 10*time.Millisecond)

	var rows []topicRow
	require.Equal(t, http.StatusOK, e.do(t, "GET", "/api/topics", nil, &rows))
	i := slices.IndexFunc(rows, func(r topicRow) bool { return r.Topic == "orders" })
	require.GreaterOrEqual(t, i, 0)
	require.Equal(t, topicRow{Topic: "orders", ReadQueues: 4, WriteQueues: 4, Perm: 6, Brokers: []string{"broker-a"},
		Stored: rows[i].Stored, ProduceRate: rows[i].ProduceRate}, rows[i])
	for _, r := range rows {
		if r.Topic == "TBW102" || r.Topic == "broker-a" || r.Topic == "DefaultCluster" {
			require.True(t, r.System, r.Topic)
		}
	}

	var tv topicView
	require.Equal(t, http.StatusOK, e.do(t, "GET", "/api/topics/orders", nil, &tv))
	require.Len(t, tv.Route, 1)
	require.Equal(t, "broker-a", tv.Route[0].BrokerName)
	require.Equal(t, e.broker, tv.Route[0].Addrs[0])
	require.Len(t, tv.Queues, 4)

	require.Contains(t, e.fails(t, 400, "POST", "/api/topics", topicForm{}), "topic is required")
	require.Contains(t, e.fails(t, 400, "POST", "/api/topics", topicForm{Topic: "a b"}), "character outside")
	require.Contains(t, e.fails(t, 400, "POST", "/api/topics", topicForm{Topic: "x", Perm: 3}), "perm 3")
	require.Contains(t, e.fails(t, 400, "POST", "/api/topics", topicForm{Topic: "x", ReadQueues: 5000}), "1 to 1024")
	require.Contains(t, e.fails(t, 400, "POST", "/api/topics", "not an object"), "not the JSON object")
	require.Contains(t, e.fails(t, 404, "GET", "/api/topics/nosuch", nil), "nosuch")
	require.Contains(t, e.fails(t, 404, "GET", "/api/nope", nil), "no API GET /api/nope")
	require.Contains(t, e.fails(t, 405, "PUT", "/api/topics", nil), "PUT /api/topics is not allowed: GET, POST")
	require.Contains(t, e.fails(t, 405, "GET", "/api/messages/consume", nil), "not allowed: POST")
	req, err := http.NewRequest("PATCH", e.url+"/api/topics/orders", nil)
	require.NoError(t, err)
	asPage(req, e.url)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	require.Equal(t, "GET, DELETE", resp.Header.Get("Allow"))

	require.Equal(t, http.StatusOK, e.do(t, "DELETE", "/api/topics/orders", nil, nil))
	require.Eventually(t, func() bool {
		l, err := e.admin.TopicList(ctx)
		return err == nil && !slices.Contains(l, "orders")
	}, 10*time.Second, 10*time.Millisecond)
}

// TestAPI_ReadOnly: with ReadOnly every write is refused with 403 and
// changes nothing; reads work.
func TestAPI_ReadOnly(t *testing.T) {
	e := startEnv(t, Options{ReadOnly: true})
	var cfg configView
	require.Equal(t, http.StatusOK, e.do(t, "GET", "/api/config", nil, &cfg))
	require.True(t, cfg.ReadOnly)
	require.Contains(t, e.fails(t, 403, "POST", "/api/topics", topicForm{Topic: "orders"}), "read-only")
	require.Contains(t, e.fails(t, 403, "DELETE", "/api/topics/TBW102", nil), "read-only")
	require.Contains(t, e.fails(t, 403, "POST", "/api/groups/g/reset", resetForm{Topic: "t", Time: "0"}), "read-only")
	require.Contains(t, e.fails(t, 403, "POST", "/api/dlq/g/resend", resendForm{MsgID: "x"}), "read-only")
	require.Contains(t, e.fails(t, 403, "POST", "/api/messages/consume", consumeForm{OffsetMsgID: "x", Group: "g"}), "read-only")
	l, err := e.admin.TopicList(context.Background())
	require.NoError(t, err)
	require.NotContains(t, l, "orders")
	require.Contains(t, l, "TBW102")
}

// TestAPI_Messages: a message is found by key, by message id (UNIQ_KEY with
// its topic, and offset id), by queue offset and by time range, with its
// body and properties; bad searches are 400 with what is wrong.
func TestAPI_Messages(t *testing.T) {
	e := startEnv(t, Options{})
	e.createTopic(t, "orders", 2)
	p := e.producer(t)
	ctx := context.Background()
	before := time.Now().Add(-time.Second)
	var sent client.SendResult
	for i := range 5 {
		r, err := p.Send(ctx, &client.Message{Topic: "orders", Keys: []string{"order-" + strconv.Itoa(40+i)},
			Body: []byte(`{"order":` + strconv.Itoa(40+i) + `}`), Properties: map[string]string{"region": "eu"}})
		require.NoError(t, err)
		if i == 2 {
			sent = r
		}
	}
	var got []msgView
	require.Eventually(t, func() bool {
		return e.do(t, "GET", "/api/messages?topic=orders&key=order-42", nil, &got) == 200 && len(got) == 1
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, `{"order":42}`, string(got[0].Body))
	require.Equal(t, "eu", got[0].Properties["region"])
	require.Equal(t, []string{"order-42"}, got[0].Keys)
	require.Equal(t, sent.MsgID, got[0].MsgID)

	for _, q := range []string{"msgId=" + sent.OffsetMsgID, "topic=orders&msgId=" + sent.MsgID,
		"topic=orders&broker=broker-a&max=1&queue=" + strconv.Itoa(sent.Queue.QueueID) + "&offset=" + strconv.FormatInt(got[0].QueueOffset, 10)} {
		var one []msgView
		require.Equal(t, 200, e.do(t, "GET", "/api/messages?"+q, nil, &one), q)
		require.Len(t, one, 1, q)
		require.Equal(t, `{"order":42}`, string(one[0].Body), q)
	}
	var all []msgView
	require.Equal(t, 200, e.do(t, "GET", "/api/messages?topic=orders&begin="+strconv.FormatInt(before.UnixMilli(), 10), nil, &all))
	require.Len(t, all, 5)
	require.Equal(t, 200, e.do(t, "GET", "/api/messages?topic=orders&max=2&begin="+url.QueryEscape(before.Format(time.RFC3339)), nil, &all))
	require.Len(t, all, 2)

	require.Contains(t, e.fails(t, 400, "GET", "/api/messages", nil), "give msgId")
	require.Contains(t, e.fails(t, 400, "GET", "/api/messages?msgId=zz", nil), "not an offset message id")
	require.Contains(t, e.fails(t, 400, "GET", "/api/messages?topic=orders&key=k&max=0", nil), "max")
	require.Contains(t, e.fails(t, 400, "GET", "/api/messages?topic=orders&begin=yesterday", nil), "not a time")
	require.Contains(t, e.fails(t, 400, "GET", "/api/messages?topic=orders&begin=2000&end=1000", nil), "end is before begin")
	require.Contains(t, e.fails(t, 400, "GET", "/api/messages?topic=orders&broker=broker-a&queue=x&offset=0", nil), "queue")
	require.Contains(t, e.fails(t, 400, "GET", "/api/messages?topic=orders&queue=0&offset=0", nil), "broker")
	require.Contains(t, e.fails(t, 502, "GET", "/api/messages?msgId=7F00000100002A9F0000000000FFFFFF", nil), "")
}

// TestAPI_LagAndDLQ: a held-back consumer's lag shows in the group's view
// and history and falls to 0 once released; a message the group gave up on
// is listed in its DLQ, and resent from there it is consumed again.
func TestAPI_LagAndDLQ(t *testing.T) {
	e := startEnv(t, Options{})
	e.createTopic(t, "orders", 2)
	p := e.producer(t)
	ctx := context.Background()
	g := newGate()
	var delivered atomic.Int64
	e.consumer(t, "billing", "orders", g, func(*client.Message) client.ConsumeResult {
		delivered.Add(1)
		return client.ConsumeSuccess
	})
	// A first message consumed makes the group commit offsets: lag is
	// known from then on.
	_, err := p.Send(ctx, &client.Message{Topic: "orders", Body: []byte("first")})
	require.NoError(t, err)
	var gv groupView
	require.Eventually(t, func() bool {
		return e.do(t, "GET", "/api/groups/billing", nil, &gv) == 200 && gv.UnknownLag == 0 && gv.Lag == 0 && delivered.Load() == 1
	}, 10*time.Second, 20*time.Millisecond)
	g.hold()
	for range 10 {
		_, err := p.Send(ctx, &client.Message{Topic: "orders", Body: []byte("held")})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		return e.do(t, "GET", "/api/groups/billing", nil, &gv) == 200 && gv.Lag == 10 && len(gv.History) > 0 &&
			gv.History[len(gv.History)-1].Lag == 10
	}, 10*time.Second, 20*time.Millisecond)
	require.True(t, gv.Online)
	require.Len(t, gv.Members, 1)
	require.Equal(t, map[string]string{"orders": "*", "%RETRY%billing": "*"}, gv.Members[0].Subscriptions)
	var rows []groupRow
	require.Equal(t, 200, e.do(t, "GET", "/api/groups", nil, &rows))
	require.Contains(t, rows, groupRow{Group: "billing", Lag: 10, LagMs: rows[slices.IndexFunc(rows, func(r groupRow) bool { return r.Group == "billing" })].LagMs,
		ConsumeRate: rows[slices.IndexFunc(rows, func(r groupRow) bool { return r.Group == "billing" })].ConsumeRate})
	var st []memberStatus
	require.Equal(t, 200, e.do(t, "GET", "/api/groups/billing/status", nil, &st))
	require.Len(t, st, 1)
	require.Equal(t, gv.Members[0].ClientID, st[0].ClientID)
	require.Empty(t, st[0].Error)
	require.Equal(t, 3, st[0].Queues, "the 2 queues of orders and the one of its retry topic")
	require.Contains(t, e.fails(t, 404, "GET", "/api/groups/nobody/status", nil), "no live client")
	g.release()
	require.Eventually(t, func() bool {
		return e.do(t, "GET", "/api/groups/billing", nil, &gv) == 200 && gv.Lag == 0 && gv.History[len(gv.History)-1].Lag == 0
	}, 10*time.Second, 20*time.Millisecond)

	// One message consumed again by the group's member, on request.
	var first []msgView
	require.Equal(t, 200, e.do(t, "GET", "/api/messages?topic=orders&max=1&begin=1", nil, &first))
	require.Len(t, first, 1)
	before := delivered.Load()
	var cr struct {
		ClientID      string `json:"clientId"`
		ConsumeResult string `json:"consumeResult"`
	}
	require.Equal(t, 200, e.do(t, "POST", "/api/messages/consume", consumeForm{OffsetMsgID: first[0].OffsetMsgID, Group: "billing"}, &cr))
	require.Equal(t, "CR_SUCCESS", cr.ConsumeResult)
	require.Equal(t, gv.Members[0].ClientID, cr.ClientID)
	require.Equal(t, before+1, delivered.Load())
	require.Contains(t, e.fails(t, 400, "POST", "/api/messages/consume", consumeForm{OffsetMsgID: "xyz", Group: "billing"}), "not an offset message id")
	require.Contains(t, e.fails(t, 400, "POST", "/api/messages/consume", consumeForm{Group: "billing"}), "required")
	require.Contains(t, e.fails(t, 404, "POST", "/api/messages/consume", consumeForm{OffsetMsgID: first[0].OffsetMsgID, Group: "nobody"}), "no live client")

	// Reset to a time after every message: each queue's offset is its end.
	var rs struct {
		Offsets []resetRow `json:"offsets"`
	}
	later := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	require.Equal(t, 200, e.do(t, "POST", "/api/groups/billing/reset", resetForm{Topic: "orders", Time: timeValue(later)}, &rs))
	require.Len(t, rs.Offsets, 2)
	require.Equal(t, []int{0, 1}, []int{rs.Offsets[0].QueueID, rs.Offsets[1].QueueID})
	require.Equal(t, int64(11), rs.Offsets[0].Offset+rs.Offsets[1].Offset)
	// The time as a JSON number of milliseconds, as the README gives it.
	rs.Offsets = nil
	require.Equal(t, 200, e.do(t, "POST", "/api/groups/billing/reset", json.RawMessage(`{"topic":"orders","time":`+later+`}`), &rs))
	require.Equal(t, int64(11), rs.Offsets[0].Offset+rs.Offsets[1].Offset)
	require.Contains(t, e.fails(t, 400, "POST", "/api/groups/billing/reset", json.RawMessage(`{"topic":"orders","time":true}`)), "not the JSON object expected")
	require.Contains(t, e.fails(t, 400, "POST", "/api/groups/billing/reset", resetForm{Topic: "orders", Time: "soon"}), "not a time")
	require.Contains(t, e.fails(t, 400, "POST", "/api/groups/billing/reset", resetForm{Time: timeValue(later)}), "required")
	var lv liveView
	require.Equal(t, 200, e.do(t, "GET", "/api/live?topic=orders&group=billing", nil, &lv))
	require.True(t, lv.Sampling)
	require.Equal(t, int64(11), lv.Points[len(lv.Points)-1].Produced)
	require.Contains(t, e.fails(t, 400, "GET", "/api/live?topic=orders", nil), "topic and group")
	require.Contains(t, e.fails(t, 404, "GET", "/api/groups/nobody", nil), "nobody")

	// DLQ: an empty one first, then a message the group gives up on.
	var dv dlqView
	require.Equal(t, 200, e.do(t, "GET", "/api/dlq/audit", nil, &dv))
	require.Empty(t, dv.Messages)
	redelivered, r := e.poison(t, p, "audit", "orders")
	require.Equal(t, 200, e.do(t, "GET", "/api/dlq/audit", nil, &dv))
	require.Len(t, dv.Messages, 1)
	require.Equal(t, "poison", string(dv.Messages[0].Body))
	require.Equal(t, "%DLQ%audit", dv.Messages[0].Topic)
	require.Contains(t, e.fails(t, 404, "POST", "/api/dlq/audit/resend", resendForm{MsgID: "AC1100010001000000000000000AFFFF"}), "no message with id")
	require.Contains(t, e.fails(t, 400, "POST", "/api/dlq/audit/resend", resendForm{}), "msgId is required")
	require.Equal(t, 200, e.do(t, "POST", "/api/dlq/audit/resend", resendForm{MsgID: r.MsgID}, nil))
	require.Eventually(t, func() bool { return redelivered.Load() == 1 }, 15*time.Second, 10*time.Millisecond)
}

// TestNew_BadOptions: a listen address that is not host:port and a
// missing nameserver are errors that say so; a taken port fails Start.
func TestNew_BadOptions(t *testing.T) {
	_, err := New(Options{Listen: "8080", NameServers: []string{"127.0.0.1:1"}})
	require.ErrorContains(t, err, `listen address "8080" is not host:port`)
	_, err = New(Options{Listen: "127.0.0.1:0"})
	require.ErrorContains(t, err, "no nameserver")
	s, err := New(Options{Listen: "127.0.0.1:0", NameServers: []string{"127.0.0.1:1"}, SampleEvery: time.Hour})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	defer s.Close()
	s2, err := New(Options{Listen: s.Addr(), NameServers: []string{"127.0.0.1:1"}})
	require.NoError(t, err)
	require.ErrorContains(t, s2.Start(), "address already in use")
	require.NoError(t, s2.Close())
}

// TestClose_FreshConnection: a connection that has sent no request yet (a
// browser opens them ahead of its requests) does not hold Close: it is
// closed, and Close returns no error. Without the tracking, Shutdown waits
// its whole grace for it and fails.
func TestClose_FreshConnection(t *testing.T) {
	s, err := New(Options{Listen: "127.0.0.1:0", NameServers: []string{"127.0.0.1:1"}, SampleEvery: time.Hour})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	used, err := http.Get("http://" + s.Addr() + "/")
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, used.Body)
	require.NoError(t, err)
	require.NoError(t, used.Body.Close()) // an idle keep-alive connection
	c, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer c.Close()
	require.Eventually(t, func() bool {
		s.connMu.Lock()
		defer s.connMu.Unlock()
		return len(s.fresh) == 1
	}, 10*time.Second, time.Millisecond, "the server has accepted the connection")
	require.NoError(t, s.Close())
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = c.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "the server closed the connection")
}

// TestAPI_Cluster: the overview's API lists the broker with its role and
// runtime values (version, disk use and watermarks, totals), and the rates
// sampled from its totals.
func TestAPI_Cluster(t *testing.T) {
	e := startEnv(t, Options{})
	e.createTopic(t, "orders", 1)
	p := e.producer(t)
	for range 3 {
		_, err := p.Send(context.Background(), &client.Message{Topic: "orders", Body: []byte("x")})
		require.NoError(t, err)
	}
	var c clusterView
	require.Eventually(t, func() bool {
		return e.do(t, "GET", "/api/cluster", nil, &c) == 200 && len(c.Rates) > 0 && c.Rates[len(c.Rates)-1].Produced >= 3
	}, 10*time.Second, 20*time.Millisecond)
	require.Len(t, c.Brokers, 1)
	b := c.Brokers[0]
	require.Equal(t, brokerView{Cluster: "DefaultCluster", BrokerName: "broker-a", BrokerID: 0, Role: "MASTER", Addr: e.broker,
		Runtime: b.Runtime}, b)
	require.Equal(t, "V4_9_8", b.Runtime["brokerVersionDesc"])
	require.Equal(t, "3", b.Runtime["putMessageTotal"])
	for _, k := range []string{"commitLogDiskRatio", "diskHighWatermark", "diskFullWatermark"} {
		require.Contains(t, b.Runtime, k)
	}
	require.Empty(t, c.SampleErr)
}

// TestAPI_BodyTimeout: a request whose body stops short of its
// Content-Length gets 408 once BodyTimeout has passed, instead of holding
// its connection for ever; a body that arrives whole is served as before.
func TestAPI_BodyTimeout(t *testing.T) {
	s, err := New(Options{Listen: "127.0.0.1:0", NameServers: []string{"127.0.0.1:1"}, SampleEvery: time.Hour,
		BodyTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	t.Cleanup(func() { require.NoError(t, s.Close()) })

	c, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "POST /api/topics HTTP/1.1\r\nHost: "+s.Addr()+"\r\nOrigin: http://"+s.Addr()+
		"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{}")
	require.NoError(t, err)
	// NB: a hang's bound, not a measure: without BodyTimeout no answer came.
	require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Minute)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode, string(body))
	require.Contains(t, string(body), "did not arrive within 200ms")

	// A whole body still reaches the handler: its form is checked (400).
	req, err := http.NewRequest("POST", "http://"+s.Addr()+"/api/topics", strings.NewReader(`{"topic":""}`))
	require.NoError(t, err)
	asPage(req, "http://"+s.Addr())
	whole, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, err := io.ReadAll(whole.Body)
	require.NoError(t, err)
	require.NoError(t, whole.Body.Close())
	require.Equal(t, http.StatusBadRequest, whole.StatusCode, string(b))
}
