package v5

import (
	"context"
	"crypto/md5"
	"strconv"
	"strings"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluicemq/sluice/broker/topic"
	"github.com/sluicemq/sluice/internal/acl"
	"github.com/sluicemq/sluice/internal/filter"
	"github.com/sluicemq/sluice/internal/message"
)

// PopRequest is one receive of a SimpleConsumer.
type PopRequest struct {
	Group, Topic string
	Queue        int32 // the queue asked for first; -1: any
	Max          int
	Invisible    time.Duration
	Tags         []string // nil: every tag
	// SQL is a SQL92 filter over the message properties (nil: none); the
	// backend refuses it when it does not filter by properties.
	SQL *filter.Expr
}

// Popped is one message received.
type Popped struct {
	Rec     message.Record
	Attempt int32
	Handle  string
}

// Popper is the POP side of a Backend (broker/pop).
type Popper interface {
	// Pop takes up to r.Max messages of r.Group from the broker's queues of
	// r.Topic, each invisible for r.Invisible; none is not an error.
	Pop(ctx context.Context, r PopRequest) ([]Popped, *v2.Status)
	// Ack ends a handle's delivery.
	Ack(group, topic, handle string) *v2.Status
	// Change makes a handle's message invisible for d and returns its new
	// handle (the old one on failure).
	Change(group, topic, handle string, d time.Duration) (string, *v2.Status)
	// Arrival returns a channel closed when a message is next stored.
	Arrival() <-chan struct{}
}

// Bounds of a receive (RocketMQ's proxy).
const (
	minInvisible = 10 * time.Second
	maxInvisible = 12 * time.Hour
	maxBatch     = 32
	maxPoll      = 20 * time.Second
	answerMargin = 2 * time.Second // left of the client's deadline to answer in
)

// parseTags reads a TAG expression ("*", "", or "a || b"); nil is every tag.
func parseTags(expr string) []string {
	expr = strings.TrimSpace(expr)
	if expr == "" || expr == "*" {
		return nil
	}
	var out []string
	for t := range strings.SplitSeq(expr, "||") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// ReceiveMessage pops messages for a SimpleConsumer: up to batch_size,
// each invisible for invisible_duration (10 s to 12 h), waiting for
// arrivals up to the long-polling time (long_polling_timeout, or what the
// client's deadline leaves, at most 20 s). It answers status OK and the
// messages, or MESSAGE_NOT_FOUND when none came. A PushConsumer's
// receive (auto_renew; 60 s when it names no invisible time) has its
// messages renewed while its client lives (renew.go); one retried with
// the same attempt_id gets the same messages and handles.
func (s *Server) ReceiveMessage(req *v2.ReceiveMessageRequest, stream v2.MessagingService_ReceiveMessageServer) error {
	ctx := stream.Context()
	answer := func(st *v2.Status) error {
		return stream.Send(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Status{Status: st}})
	}
	p, ok := s.backend.(Popper)
	if !ok {
		return answer(status(v2.Code_NOT_IMPLEMENTED, "this broker does not serve POP consumption"))
	}
	group, name := req.GetGroup().GetName(), req.GetMessageQueue().GetTopic().GetName()
	c, st := s.check(ctx, "ReceiveMessage", acl.Resource{Name: name, Need: acl.Sub},
		acl.Resource{Name: acl.RetryPrefix + group, Need: acl.Sub})
	if st != nil {
		return answer(st)
	}
	if err := topic.ValidateName(group); err != nil {
		return answer(status(v2.Code_ILLEGAL_CONSUMER_GROUP, "group: "+err.Error()))
	}
	if err := topic.ValidateName(name); err != nil {
		return answer(status(v2.Code_ILLEGAL_TOPIC, "topic: "+err.Error()))
	}
	rn, renews := s.backend.(Renewer)
	if req.GetAutoRenew() && !renews {
		return answer(status(v2.Code_NOT_IMPLEMENTED, "this broker does not renew invisible times (auto_renew): use a SimpleConsumer"))
	}
	inv := req.GetInvisibleDuration().AsDuration()
	if req.GetAutoRenew() && req.InvisibleDuration == nil {
		inv = autoRenewInvisible // NB: the PushConsumers name none
	}
	if inv < minInvisible || inv > maxInvisible {
		return answer(status(v2.Code_ILLEGAL_INVISIBLE_TIME, "invisible_duration "+inv.String()+": want 10s to 12h"))
	}
	var tags []string
	var sql *filter.Expr
	if f := req.GetFilterExpression(); f != nil {
		switch f.GetType() {
		case v2.FilterType_TAG, v2.FilterType_FILTER_TYPE_UNSPECIFIED:
			tags = parseTags(f.GetExpression())
		case v2.FilterType_SQL:
			e, err := filter.Compile(f.GetExpression())
			if err != nil {
				return answer(status(v2.Code_ILLEGAL_FILTER_EXPRESSION, "SQL92 expression: "+err.Error()))
			}
			sql = e
		default:
			return answer(status(v2.Code_ILLEGAL_FILTER_EXPRESSION, "filter type "+f.GetType().String()+": want TAG or SQL"))
		}
	}
	batch := int(req.GetBatchSize())
	if batch <= 0 || batch > maxBatch {
		batch = min(max(batch, 1), maxBatch)
	}
	poll := maxPoll
	if req.LongPollingTimeout != nil {
		poll = min(req.GetLongPollingTimeout().AsDuration(), maxPoll)
	}
	if dl, ok := ctx.Deadline(); ok {
		poll = min(poll, time.Until(dl)-answerMargin)
	}
	end := time.Now().Add(max(poll, 0))
	r := PopRequest{Group: group, Topic: name, Queue: req.GetMessageQueue().GetId(), Max: batch, Invisible: inv, Tags: tags, SQL: sql}
	ak := attemptKey{client: c.clientID, group: group, topic: name, id: req.GetAttemptId()}
	if ak.id != "" {
		if a := s.renew.replay(ak, s.opts.Now()); a != nil {
			// NB: a retry of a receive answered already: the same messages
			// and handles, not a second batch.
			if a.renew {
				s.renew.add(c.clientID, group, name, a.msgs, a.inv, a.popped)
				s.startRenewing(rn)
			}
			return s.sendReceived(stream, group, a.msgs, a.renew)
		}
	}
	for {
		arrived := p.Arrival() // NB: before the pop, so an arrival in between wakes the wait
		var popped time.Time
		if renews {
			popped = rn.PopNow()
		}
		got, st := p.Pop(ctx, r)
		if st != nil {
			if len(got) == 0 {
				return answer(st)
			}
			// NB: what was taken before the failure is invisible and
			// counts an attempt: delivered, not held back for its
			// invisible time (a FIFO group's head with it).
			s.log.Warn("v5: receive: a queue failed; delivering what was taken", "group", group, "topic", name,
				"messages", len(got), "code", st.GetCode().String(), "err", st.GetMessage())
		}
		if len(got) > 0 {
			msgs := make([]*v2.Message, len(got))
			for i, m := range got {
				msgs[i] = toV5(m, inv)
			}
			if req.GetAutoRenew() {
				s.renew.add(c.clientID, group, name, msgs, inv, popped)
				s.startRenewing(rn)
			}
			if ak.id != "" {
				s.renew.keep(ak, &attemptResult{at: s.opts.Now(), popped: popped, inv: inv, renew: req.GetAutoRenew(), msgs: msgs})
			}
			return s.sendReceived(stream, group, msgs, req.GetAutoRenew())
		}
		left := time.Until(end)
		if left <= 0 {
			return answer(status(v2.Code_MESSAGE_NOT_FOUND, "no new message"))
		}
		t := time.NewTimer(left)
		select {
		case <-arrived:
		case <-t.C:
		case <-s.quit: // NB: a closing server answers its long polls now
			t.Stop()
			return answer(status(v2.Code_MESSAGE_NOT_FOUND, "no new message (the broker is closing)"))
		case <-ctx.Done():
			t.Stop()
			return nil
		}
		t.Stop()
	}
}

// sendReceived answers a receive's messages; when the client does not
// get them, auto_renew lets them go (delivered again after their
// invisible time, or to a retry of the same attempt id).
func (s *Server) sendReceived(stream v2.MessagingService_ReceiveMessageServer, group string, msgs []*v2.Message, renewed bool) error {
	err := stream.Send(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Status{Status: okStatus()}})
	for _, m := range msgs {
		if err != nil {
			break
		}
		err = stream.Send(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Message{Message: m}})
	}
	if err != nil && renewed {
		for _, m := range msgs {
			s.renew.forget(group, m.GetSystemProperties().GetReceiptHandle())
		}
	}
	return err
}

// toV5 converts a stored message to what a v5 consumer receives. The
// properties are read in one pass, the user ones straight into the
// message's map (the last pair with a name wins, as in ParseProperties).
func toV5(p Popped, inv time.Duration) *v2.Message {
	r := &p.Rec
	user := map[string]string{}
	var id, tags, keys, msgGroup, deliverAt string
	var hasTags, hasGroup bool
	for k, v := range message.PropertiesSeq(string(r.Properties)) {
		switch k {
		case message.PropUniqKey:
			id = v
		case message.PropTags:
			tags, hasTags = v, true
		case message.PropKeys:
			keys = v
		case PropShardingKey:
			msgGroup, hasGroup = v, true
		case message.PropTimerDeliverMS:
			deliverAt = v
		default:
			if !reservedProps[k] {
				user[k] = v
			}
		}
	}
	body := deliveredBody(r)
	if id == "" {
		id = string(message.AppendOffsetMsgID(nil, r.StoreHost, r.PhysicalOffset))
	}
	attempt, off := p.Attempt, r.QueueOffset
	handle := p.Handle
	sp := &v2.SystemProperties{
		MessageId:         id,
		BodyDigest:        &v2.Digest{Type: v2.DigestType_MD5, Checksum: md5Upper(body)},
		BodyEncoding:      v2.Encoding_IDENTITY,
		MessageType:       v2.MessageType_NORMAL,
		BornTimestamp:     timestamppb.New(time.UnixMilli(r.BornTimestamp)),
		BornHost:          r.BornHost.Addr().String(),
		StoreTimestamp:    timestamppb.New(time.UnixMilli(r.StoreTimestamp)),
		StoreHost:         r.StoreHost.String(),
		ReceiptHandle:     &handle,
		QueueId:           r.QueueID,
		QueueOffset:       &off,
		InvisibleDuration: durationpb.New(inv),
		DeliveryAttempt:   &attempt,
	}
	if hasTags {
		sp.Tag = &tags
	}
	if keys != "" {
		sp.Keys = strings.Fields(keys)
	}
	if hasGroup {
		sp.MessageGroup, sp.MessageType = &msgGroup, v2.MessageType_FIFO
	}
	if ms, err := strconv.ParseInt(deliverAt, 10, 64); err == nil {
		sp.DeliveryTimestamp, sp.MessageType = timestamppb.New(time.UnixMilli(ms)), v2.MessageType_DELAY
	}
	return &v2.Message{Topic: &v2.Resource{Name: string(r.Topic)}, UserProperties: user, SystemProperties: sp, Body: body}
}

// md5Upper is body's MD5 in upper-case hex, as Java's proxy sends it.
func md5Upper(body []byte) string {
	const digits = "0123456789ABCDEF"
	sum := md5.Sum(body)
	var out [2 * md5.Size]byte
	for i, b := range sum {
		out[2*i], out[2*i+1] = digits[b>>4], digits[b&0xF]
	}
	return string(out[:])
}

// maxInflated bounds a compressed body's inflated size (a hostile one
// cannot make the broker allocate more).
const maxInflated = 64 << 20

// deliveredBody is r's body as its producer sent it: a body a 4.x producer
// compressed (zlib, FlagCompressed) is inflated, since v5 has no encoding
// for zlib (a v5 client gunzips only GZIP); one that does not inflate
// goes as stored.
func deliveredBody(r *message.Record) []byte {
	if r.SysFlag&message.FlagCompressed == 0 {
		return r.Body
	}
	if alg := r.SysFlag & message.CompressionMask; alg != 0 && alg != message.CompressionZlib {
		return r.Body
	}
	body, err := message.Decompress(r.Body, maxInflated)
	if err != nil {
		return r.Body
	}
	return body
}

// AckMessage acks each entry's handle; the answer's status is the
// entries' when they agree, else MULTIPLE_RESULTS.
func (s *Server) AckMessage(ctx context.Context, req *v2.AckMessageRequest) (*v2.AckMessageResponse, error) {
	p, ok := s.backend.(Popper)
	if !ok {
		return &v2.AckMessageResponse{Status: status(v2.Code_NOT_IMPLEMENTED, "this broker does not serve POP consumption")}, nil
	}
	group, name := req.GetGroup().GetName(), req.GetTopic().GetName()
	if _, st := s.check(ctx, "AckMessage", acl.Resource{Name: name, Need: acl.Sub},
		acl.Resource{Name: acl.RetryPrefix + group, Need: acl.Sub}); st != nil {
		return &v2.AckMessageResponse{Status: st}, nil
	}
	if len(req.GetEntries()) == 0 {
		return &v2.AckMessageResponse{Status: status(v2.Code_BAD_REQUEST, "AckMessage carries no entry")}, nil
	}
	out := &v2.AckMessageResponse{}
	for _, e := range req.GetEntries() {
		st := p.Ack(group, name, e.GetReceiptHandle())
		s.renew.forget(group, e.GetReceiptHandle())
		if st == nil {
			st = okStatus()
		}
		out.Entries = append(out.Entries, &v2.AckMessageResultEntry{MessageId: e.GetMessageId(),
			ReceiptHandle: e.GetReceiptHandle(), Status: st})
	}
	out.Status = out.Entries[0].Status
	for _, e := range out.Entries[1:] {
		if e.Status.GetCode() != out.Status.GetCode() {
			out.Status = status(v2.Code_MULTIPLE_RESULTS, "the entries had different results: see each")
			break
		}
	}
	return out, nil
}

// ChangeInvisibleDuration gives a handle's message a new invisible time
// and returns its new handle; on failure the old handle stays valid.
func (s *Server) ChangeInvisibleDuration(ctx context.Context, req *v2.ChangeInvisibleDurationRequest) (*v2.ChangeInvisibleDurationResponse, error) {
	p, ok := s.backend.(Popper)
	if !ok {
		return &v2.ChangeInvisibleDurationResponse{Status: status(v2.Code_NOT_IMPLEMENTED, "this broker does not serve POP consumption")}, nil
	}
	group, name := req.GetGroup().GetName(), req.GetTopic().GetName()
	if _, st := s.check(ctx, "ChangeInvisibleDuration", acl.Resource{Name: name, Need: acl.Sub},
		acl.Resource{Name: acl.RetryPrefix + group, Need: acl.Sub}); st != nil {
		return &v2.ChangeInvisibleDurationResponse{Status: st, ReceiptHandle: req.GetReceiptHandle()}, nil
	}
	d := req.GetInvisibleDuration().AsDuration()
	lo := minInvisible
	if s.renew.holds(group, req.GetReceiptHandle()) {
		lo = 0 // NB: a PushConsumer's nack: its backoff starts at 1 s
	}
	if d < lo || d > maxInvisible {
		return &v2.ChangeInvisibleDurationResponse{ReceiptHandle: req.GetReceiptHandle(),
			Status: status(v2.Code_ILLEGAL_INVISIBLE_TIME, "invisible_duration "+d.String()+": want "+lo.String()+" to 12h")}, nil
	}
	h, st := p.Change(group, name, req.GetReceiptHandle(), d)
	if st == nil {
		st = okStatus()
		s.renew.forget(group, req.GetReceiptHandle()) // NB: the new handle waits out d, not renewed
	}
	return &v2.ChangeInvisibleDurationResponse{Status: st, ReceiptHandle: h}, nil
}
