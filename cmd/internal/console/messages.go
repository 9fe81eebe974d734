package console

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/message"
)

// msgView is a message as the API shows it. Body is base64 in JSON; the
// page shows it as text, pretty JSON or hex.
type msgView struct {
	Topic          string            `json:"topic"` // where it is stored
	BrokerName     string            `json:"brokerName"`
	QueueID        int               `json:"queueId"`
	QueueOffset    int64             `json:"queueOffset"`
	MsgID          string            `json:"msgId"`
	OffsetMsgID    string            `json:"offsetMsgId"`
	Tags           string            `json:"tags"`
	Keys           []string          `json:"keys"`
	BornTime       int64             `json:"bornTime"`
	StoreTime      int64             `json:"storeTime"`
	BornHost       string            `json:"bornHost"`
	StoreHost      string            `json:"storeHost"`
	ReconsumeTimes int               `json:"reconsumeTimes"`
	Properties     map[string]string `json:"properties"`
	Body           []byte            `json:"body"`
}

func viewMessage(m *client.Message) msgView {
	v := msgView{Topic: m.Queue.Topic, BrokerName: m.Queue.BrokerName, QueueID: m.Queue.QueueID, QueueOffset: m.QueueOffset,
		MsgID: m.MsgID, OffsetMsgID: m.OffsetMsgID, Tags: m.Tags, Keys: emptyIfNil(m.Keys), BornTime: msOrZero(m.BornTimestamp),
		StoreTime: msOrZero(m.StoreTimestamp), BornHost: m.BornHost, StoreHost: m.StoreHost, ReconsumeTimes: m.ReconsumeTimes,
		Properties: m.Properties, Body: m.Body}
	if u := m.Properties[message.PropUniqKey]; u != "" {
		v.MsgID = u
	}
	if v.Topic == "" {
		v.Topic = m.Topic
	}
	if v.Properties == nil {
		v.Properties = map[string]string{}
	}
	if v.Body == nil {
		v.Body = []byte{}
	}
	return v
}

// searchKind is how GET /api/messages looks.
type searchKind int

const (
	byID     searchKind = iota // msgId: an offset message id, or a UNIQ_KEY with topic
	byKey                      // topic and key, optionally begin and end
	byOffset                   // topic, broker, queue and offset
	byTime                     // topic, begin and optionally end
)

// search is a parsed GET /api/messages query.
type search struct {
	kind       searchKind
	topic, id  string
	key        string
	broker     string
	queue      int
	offset     int64
	begin, end time.Time
	max        int
}

// maxResults bounds the messages one search returns.
const maxResults = 256

// parseSearch reads a GET /api/messages query.
func parseSearch(q url.Values) (search, error) {
	s := search{topic: q.Get("topic"), id: q.Get("msgId"), key: q.Get("key"), broker: q.Get("broker"), max: 32}
	if v := q.Get("max"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxResults {
			return s, badRequest("max %q is not a whole number from 1 to %d", v, maxResults)
		}
		s.max = n
	}
	var err error
	if s.begin, err = parseTime("begin", q.Get("begin")); err != nil {
		return s, err
	}
	if s.end, err = parseTime("end", q.Get("end")); err != nil {
		return s, err
	}
	if !s.begin.IsZero() && !s.end.IsZero() && s.end.Before(s.begin) {
		return s, badRequest("end is before begin")
	}
	switch {
	case s.id != "":
		s.kind = byID
		if _, _, err := message.ParseOffsetMsgID(s.id); err != nil && s.topic == "" {
			return s, badRequest("msgId %q is not an offset message id; give the topic too to find a message by its id (UNIQ_KEY)", s.id)
		}
		return s, nil
	case s.topic == "":
		return s, badRequest("give msgId, or topic with key, with broker, queue and offset, or with begin")
	case s.key != "":
		s.kind = byKey
		return s, nil
	case q.Has("offset") || q.Has("queue") || s.broker != "":
		s.kind = byOffset
		if s.broker == "" {
			return s, badRequest("broker (a broker name) is required with queue and offset")
		}
		n, err := strconv.Atoi(q.Get("queue"))
		if err != nil || n < 0 || n > 65535 {
			return s, badRequest("queue %q is not a queue id (0 to 65535)", q.Get("queue"))
		}
		s.queue = n
		if s.offset, err = strconv.ParseInt(q.Get("offset"), 10, 64); err != nil || s.offset < 0 {
			return s, badRequest("offset %q is not a queue offset (0 or more)", q.Get("offset"))
		}
		return s, nil
	case !s.begin.IsZero():
		s.kind = byTime
		return s, nil
	}
	return s, badRequest("with topic %s give key, or broker, queue and offset, or begin (and end)", s.topic)
}

func (s *Server) getMessages(r *http.Request) (any, error) {
	q, err := parseSearch(r.URL.Query())
	if err != nil {
		return nil, err
	}
	msgs, err := s.find(r.Context(), q)
	if err != nil {
		return nil, err
	}
	out := make([]msgView, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, viewMessage(m))
	}
	return out, nil
}

// find runs q.
func (s *Server) find(ctx context.Context, q search) ([]*client.Message, error) {
	switch q.kind {
	case byID:
		if _, _, err := message.ParseOffsetMsgID(q.id); err == nil {
			m, err := s.admin.QueryByID(ctx, q.id)
			if err != nil {
				return nil, err
			}
			return []*client.Message{m}, nil
		}
		msgs, err := s.admin.QueryByKey(ctx, q.topic, q.id, q.max, q.begin, q.end)
		return slices.DeleteFunc(msgs, func(m *client.Message) bool { return m.Properties[message.PropUniqKey] != q.id }), err
	case byKey:
		return s.admin.QueryByKey(ctx, q.topic, q.key, q.max, q.begin, q.end)
	case byOffset:
		pc, err := s.puller()
		if err != nil {
			return nil, err
		}
		res, err := pc.Pull(ctx, client.MessageQueue{Topic: q.topic, BrokerName: q.broker, QueueID: q.queue}, q.offset, q.max)
		if err != nil || res.Status != client.PullFound {
			return nil, err
		}
		return res.Messages, nil
	}
	return s.findByTime(ctx, q)
}

// findByTime reads up to q.max messages of each queue of q.topic stored
// from q.begin to q.end.
func (s *Server) findByTime(ctx context.Context, q search) ([]*client.Message, error) {
	pc, err := s.puller()
	if err != nil {
		return nil, err
	}
	qs, err := pc.Queues(ctx, q.topic)
	if err != nil {
		return nil, err
	}
	var out []*client.Message
	for _, mq := range qs {
		off, err := pc.OffsetAt(ctx, mq, q.begin)
		if err != nil {
			return nil, err
		}
		msgs, err := s.pullRange(ctx, pc, mq, off, q.max, func(m *client.Message) bool {
			return !q.end.IsZero() && m.StoreTimestamp.After(q.end)
		})
		if err != nil {
			return nil, err
		}
		out = append(out, msgs...)
	}
	slices.SortFunc(out, func(a, b *client.Message) int { return a.StoreTimestamp.Compare(b.StoreTimestamp) })
	return out[:min(len(out), q.max)], nil
}

// pullRange pulls from off up to n messages of mq, stopping at the first
// for which past is true.
func (s *Server) pullRange(ctx context.Context, pc *client.PullConsumer, mq client.MessageQueue, off int64, n int,
	past func(*client.Message) bool) ([]*client.Message, error) {
	var out []*client.Message
	for len(out) < n {
		res, err := pc.Pull(ctx, mq, off, min(n-len(out), 32))
		if err != nil {
			return out, err
		}
		if res.Status != client.PullFound || res.NextOffset <= off {
			return out, nil
		}
		for _, m := range res.Messages {
			if past(m) {
				return out, nil
			}
			out = append(out, m)
		}
		off = res.NextOffset
	}
	return out, nil
}

// dlqView is GET /api/dlq/{group}: the newest messages of the group's
// dead-letter topic.
type dlqView struct {
	Group    string    `json:"group"`
	Topic    string    `json:"topic"`
	Messages []msgView `json:"messages"`
}

func (s *Server) getDLQ(r *http.Request) (any, error) {
	g := r.PathValue("group")
	n, err := intParam(r, "max", 50, 1, maxResults)
	if err != nil {
		return nil, err
	}
	dlq := client.DLQTopic(g)
	out := dlqView{Group: g, Topic: dlq, Messages: []msgView{}}
	rt, err := s.admin.TopicRoute(r.Context(), dlq)
	if err != nil {
		// NB: no dead-letter topic yet is an empty DLQ, not a failure.
		if statusOf(err) == http.StatusNotFound {
			return out, nil
		}
		return nil, err
	}
	pc, err := s.puller()
	if err != nil {
		return nil, err
	}
	for _, b := range rt.Brokers {
		addr, ok := b.Addrs[0]
		if !ok {
			continue
		}
		qs, err := s.admin.TopicStats(r.Context(), addr, b.BrokerName, dlq)
		if err != nil {
			return nil, err
		}
		for _, q := range qs {
			from := max(q.MinOffset, q.MaxOffset-n)
			msgs, err := s.pullRange(r.Context(), pc, q.Queue, from, int(n), func(*client.Message) bool { return false })
			if err != nil {
				return nil, err
			}
			for _, m := range msgs {
				out.Messages = append(out.Messages, viewMessage(m))
			}
		}
	}
	slices.SortFunc(out.Messages, func(a, b msgView) int { return int(b.StoreTime - a.StoreTime) })
	out.Messages = out.Messages[:min(len(out.Messages), int(n))]
	return out, nil
}

// resendForm is the body of POST /api/dlq/{group}/resend.
type resendForm struct {
	MsgID string `json:"msgId"` // UNIQ_KEY or the DLQ copy's offset message id
}

func (s *Server) postResend(r *http.Request) (any, error) {
	g := r.PathValue("group")
	var f resendForm
	if err := decodeJSON(r, &f); err != nil {
		return nil, err
	}
	if f.MsgID == "" {
		return nil, badRequest("msgId is required")
	}
	res, err := s.admin.ResendDLQ(r.Context(), g, f.MsgID)
	if err != nil {
		return nil, err
	}
	return map[string]any{"group": g, "msgId": res.MsgID, "originalTopic": res.OriginalTopic,
		"from": res.From, "to": res.To}, nil
}

// consumeForm is the body of POST /api/messages/consume.
type consumeForm struct {
	OffsetMsgID string `json:"offsetMsgId"`
	Group       string `json:"group"`
	ClientID    string `json:"clientId"` // "" picks the group's first live member
}

// postConsume has one member of a group consume a message again
// (CONSUME_MESSAGE_DIRECTLY), whatever its topic's offsets say.
func (s *Server) postConsume(r *http.Request) (any, error) {
	var f consumeForm
	if err := decodeJSON(r, &f); err != nil {
		return nil, err
	}
	if f.OffsetMsgID == "" || f.Group == "" {
		return nil, badRequest("offsetMsgId and group are required")
	}
	if _, _, err := message.ParseOffsetMsgID(f.OffsetMsgID); err != nil {
		return nil, badRequest("offsetMsgId %q is not an offset message id: %v", f.OffsetMsgID, err)
	}
	if f.ClientID == "" {
		ms, err := s.liveMembers(r.Context(), f.Group)
		if err != nil {
			return nil, err
		}
		f.ClientID = ms[0].ClientID
	}
	res, err := s.admin.ConsumeDirectly(r.Context(), f.OffsetMsgID, f.Group, f.ClientID)
	if err != nil {
		return nil, err
	}
	return map[string]any{"offsetMsgId": f.OffsetMsgID, "group": f.Group, "clientId": f.ClientID,
		"consumeResult": res.ConsumeResult.String(), "remark": res.Remark, "spentTimeMillis": res.SpentTimeMills}, nil
}
