package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/acl"
)

// --protocol v5: the RocketMQ 5 protocol (gRPC MessagingService) against a
// broker's v5 endpoint (--grpc), through the generated client the v5 SDKs
// use, without an SDK's extras (route cache, retries, settings stream):
// produce sends with SendMessage from --inflight concurrent senders per
// producer (the SDKs' async send is a call per message); consume is a
// SimpleConsumer's loop, ReceiveMessage (up to --pull-batch, at most 32,
// invisible for 30 s) then an AckMessage per message, sent concurrently
// as the SDKs' async ack does, and counts each message acked and the
// deliveries with an attempt above 1 (redeliveries).

// v5Client is one connection to the v5 endpoint and the metadata of its
// calls.
type v5Client struct {
	c      v2.MessagingServiceClient
	conn   *grpc.ClientConn
	id     string
	ak, sk string
}

func dialV5(o options, id string) (*v5Client, error) {
	creds := insecure.NewCredentials()
	if o.tlsConfig != nil {
		tc := o.tlsConfig.Clone()
		tc.NextProtos = []string{"h2"}
		creds = credentials.NewTLS(tc)
	}
	conn, err := grpc.NewClient("passthrough:///"+o.grpcAddr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("v5 endpoint %s: %w", o.grpcAddr, err)
	}
	return &v5Client{c: v2.NewMessagingServiceClient(conn), conn: conn, id: id, ak: o.creds.AccessKey, sk: o.creds.SecretKey}, nil
}

// ctx is a call's context with the client's metadata (signed with an
// account).
func (v *v5Client) ctx(ctx context.Context) context.Context {
	kv := []string{"x-mq-client-id", v.id, "x-mq-language", "GO", "x-mq-protocol", "v2", "x-mq-client-version", "5.1.4"}
	if v.ak != "" {
		dt := time.Now().UTC().Format("20060102T150405Z")
		kv = append(kv, "x-mq-date-time", dt, "authorization", acl.SignV5(v.ak, v.sk, dt))
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// statusErr is a v5 status that is not OK as an error.
func statusErr(what string, st *v2.Status) error {
	if st.GetCode() == v2.Code_OK {
		return nil
	}
	return fmt.Errorf("%s: %s: %s", what, st.GetCode(), st.GetMessage())
}

var v5Seq atomic.Int64

// v5IDPrefix is this process's part of the message ids.
var v5IDPrefix = fmt.Sprintf("MQBENCH%08X", os.Getpid())

// v5ID is the message id of sequence number seq: the prefix and seq in
// 12 upper-case hex digits (fmt.Sprintf with an os.Getpid each, a system
// call, was 10% of the client's CPU in a 1 KiB send run).
func v5ID(seq int64) string {
	const digits = "0123456789ABCDEF"
	b := make([]byte, len(v5IDPrefix)+12)
	copy(b, v5IDPrefix)
	for i := len(b) - 1; i >= len(v5IDPrefix); i-- {
		b[i] = digits[seq&0xF]
		seq >>= 4
	}
	return string(b)
}

// v5Message is a message to send; its id is unique (the broker's duplicate
// window keys on it).
func v5Message(o options, body []byte, tag string) *v2.Message {
	id := v5ID(v5Seq.Add(1))
	return &v2.Message{Topic: &v2.Resource{Name: o.topic}, Body: body,
		SystemProperties: &v2.SystemProperties{MessageId: id, Tag: &tag, MessageType: v2.MessageType_NORMAL,
			BornTimestamp: timestamppb.Now(), BodyEncoding: v2.Encoding_IDENTITY}}
}

// produceV5 is produce for --protocol v5.
func produceV5(ctx context.Context, o options, i int, c *counters, fail func(error), ready func(), goSend <-chan struct{}) {
	v, err := dialV5(o, fmt.Sprintf("mqbench-p%d-%d", os.Getpid(), i))
	if err == nil {
		defer v.conn.Close()
		// NB: one send outside the clock opens the connection.
		var resp *v2.SendMessageResponse
		resp, err = v.c.SendMessage(v.ctx(ctx), &v2.SendMessageRequest{Messages: []*v2.Message{v5Message(o, make([]byte, 8), "warmup")}})
		if err == nil {
			err = statusErr("v5 send", resp.GetStatus())
		}
	}
	ready()
	if err != nil {
		fail(err)
		return
	}
	select {
	case <-goSend:
	case <-ctx.Done():
		return
	}
	senders := max(o.inflight/o.batch, 1)
	if o.sync {
		senders = o.senders
	}
	shared := make([]byte, o.size)
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				size := o.batch
				if o.count > 0 {
					after := c.sent.Add(int64(o.batch))
					if after-int64(o.batch) >= o.count {
						return
					}
					size -= int(max(after-o.count, 0))
				}
				req := &v2.SendMessageRequest{Messages: make([]*v2.Message, size)}
				for k := range req.Messages {
					req.Messages[k] = v5Message(o, shared, "bench")
				}
				sent := monoNow()
				resp, err := v.c.SendMessage(v.ctx(context.WithoutCancel(ctx)), req)
				if err == nil {
					err = statusErr("v5 send", resp.GetStatus())
				}
				if err != nil {
					if ctx.Err() == nil {
						c.failed(err)
					}
					continue
				}
				now := monoNow()
				c.statuses[client.SendOK].Add(int64(size)) // NB: v5 answers no stored-but-not-flushed status
				c.lat.record(now - sent)
				c.bytes.Add(int64(size * o.size))
				c.last.Store(int64(now))
				if n := c.msgs.Add(int64(size)); o.count > 0 && n >= o.count {
					c.done()
				}
			}
		}()
	}
	wg.Wait()
}

// consumeV5 is consume for --protocol v5: a SimpleConsumer's receive and
// ack loop.
func consumeV5(ctx context.Context, o options, i int, c *counters, fail func(error)) {
	v, err := dialV5(o, fmt.Sprintf("mqbench-c%d-%d", os.Getpid(), i))
	if err != nil {
		fail(err)
		return
	}
	defer v.conn.Close()
	type ack struct {
		m     *v2.Message
		count bool // false: an e2e probe or a stale message, acked uncounted
	}
	acks := make(chan ack, 4*maxV5Batch)
	var ackers sync.WaitGroup
	for range max(o.inflight/4, 1) {
		ackers.Add(1)
		go func() {
			defer ackers.Done()
			for a := range acks {
				m := a.m
				resp, err := v.c.AckMessage(v.ctx(context.WithoutCancel(ctx)), &v2.AckMessageRequest{
					Group: &v2.Resource{Name: o.group}, Topic: m.GetTopic(),
					Entries: []*v2.AckMessageEntry{{MessageId: m.GetSystemProperties().GetMessageId(),
						ReceiptHandle: m.GetSystemProperties().GetReceiptHandle()}}})
				if err == nil {
					err = statusErr("v5 ack", resp.GetStatus())
					if err == nil {
						err = statusErr("v5 ack", resp.GetEntries()[0].GetStatus())
					}
				}
				if err != nil {
					if ctx.Err() == nil {
						c.failed(err)
					}
					continue
				}
				if !a.count {
					continue
				}
				c.bytes.Add(int64(len(m.GetBody())))
				c.last.Store(int64(monoNow()))
				if n := c.msgs.Add(1); o.count > 0 && n >= o.count {
					c.done()
				}
			}
		}()
	}
	defer func() { close(acks); ackers.Wait() }()
	batch := int32(min(o.pullBatch, maxV5Batch))
	for ctx.Err() == nil {
		msgs, err := receiveV5(ctx, v, o, batch, false)
		if err != nil {
			if ctx.Err() == nil {
				fail(err)
			}
			return
		}
		now := time.Now()
		for _, m := range msgs {
			sp := m.GetSystemProperties()
			if sp.GetDeliveryAttempt() > 1 {
				c.redelivered.Add(1)
			}
			select {
			case acks <- ack{m: m, count: o.mode != "e2e" || e2eV5(m, now, c)}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// e2eV5 is consumeV5's e2e bookkeeping for a received message: a probe
// marks its queue ready (queues are told apart by broker address and id)
// and is acked uncounted, as is a message of an earlier run; the others'
// latencies are recorded from the send time their body starts with. It
// reports whether m counts.
func e2eV5(m *v2.Message, now time.Time, c *counters) bool {
	sp := m.GetSystemProperties()
	if sp.GetTag() == "probe" {
		q := client.MessageQueue{Topic: m.GetTopic().GetName(), BrokerName: sp.GetStoreHost(), QueueID: int(sp.GetQueueId())}
		if _, seen := c.probed.LoadOrStore(q, true); !seen {
			c.probedQueues.Add(1)
		}
		return false
	}
	if len(m.GetBody()) < 8 {
		return true
	}
	born := time.Unix(0, int64(binary.BigEndian.Uint64(m.GetBody())))
	if born.Before(c.begun) {
		c.stale.Add(1)
		return false
	}
	c.lat.record(now.Sub(born))
	if st := sp.GetStoreTimestamp(); st != nil {
		c.toStore.record(max(st.AsTime().Sub(born), 0))
		c.fromStore.record(max(now.Sub(st.AsTime()), 0))
	}
	return true
}

// holdV5 is consume --hold: it receives o.hold messages with auto_renew
// (as a PushConsumer does, its listener still busy with them), beats every
// 10 s as the SDKs do, so that the broker keeps renewing them, and acks
// them once the run ends. Messages counts those held, Redeliveries those
// received with an attempt above 1.
func holdV5(ctx context.Context, o options, i int, c *counters, fail func(error)) {
	v, err := dialV5(o, fmt.Sprintf("mqbench-h%d-%d", os.Getpid(), i))
	if err != nil {
		fail(err)
		return
	}
	defer v.conn.Close()
	beat := func() error {
		resp, err := v.c.Heartbeat(v.ctx(ctx), &v2.HeartbeatRequest{Group: &v2.Resource{Name: o.group},
			ClientType: v2.ClientType_PUSH_CONSUMER})
		if err == nil {
			err = statusErr("v5 heartbeat", resp.GetStatus())
		}
		return err
	}
	if err := beat(); err != nil {
		fail(err)
		return
	}
	var held []*v2.Message
	defer func() {
		bg := context.WithoutCancel(ctx)
		for _, m := range held {
			_, _ = v.c.AckMessage(v.ctx(bg), &v2.AckMessageRequest{Group: &v2.Resource{Name: o.group}, Topic: m.GetTopic(),
				Entries: []*v2.AckMessageEntry{{MessageId: m.GetSystemProperties().GetMessageId(),
					ReceiptHandle: m.GetSystemProperties().GetReceiptHandle()}}})
		}
	}()
	lastBeat := time.Now()
	for ctx.Err() == nil && len(held) < o.hold {
		msgs, err := receiveV5(ctx, v, o, int32(min(o.hold-len(held), o.pullBatch, maxV5Batch)), true)
		if err != nil {
			if ctx.Err() == nil {
				fail(err)
			}
			return
		}
		for _, m := range msgs {
			if m.GetSystemProperties().GetDeliveryAttempt() > 1 {
				c.redelivered.Add(1)
			}
		}
		held = append(held, msgs...)
		c.msgs.Add(int64(len(msgs)))
		if time.Since(lastBeat) > 10*time.Second {
			_ = beat()
			lastBeat = time.Now()
		}
	}
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := beat(); err != nil {
				fail(err)
				return
			}
		}
	}
}

// maxV5Batch is the most messages one receive returns.
const maxV5Batch = 32

// receiveV5 is one ReceiveMessage: the messages, none when the long poll
// (up to 5 s) found nothing. autoRenew asks the broker to keep them
// invisible while this client lives (a PushConsumer's receive).
func receiveV5(ctx context.Context, v *v5Client, o options, batch int32, autoRenew bool) ([]*v2.Message, error) {
	tags := "bench"
	if o.mode == "e2e" {
		tags = "bench || probe"
	}
	cctx, cancel := context.WithTimeout(v.ctx(ctx), 10*time.Second)
	defer cancel()
	stream, err := v.c.ReceiveMessage(cctx, &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: o.group},
		MessageQueue:     &v2.MessageQueue{Topic: &v2.Resource{Name: o.topic}, Id: -1},
		FilterExpression: &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: tags},
		BatchSize:        batch, InvisibleDuration: durationpb.New(30 * time.Second),
		LongPollingTimeout: durationpb.New(5 * time.Second), AutoRenew: autoRenew})
	if err != nil {
		if over(ctx) {
			return nil, nil
		}
		return nil, err
	}
	var msgs []*v2.Message
	for {
		r, err := stream.Recv()
		switch {
		case errors.Is(err, io.EOF):
			return msgs, nil
		case err != nil:
			if over(ctx) {
				return msgs, nil
			}
			return msgs, fmt.Errorf("v5 receive: %w", err)
		}
		if st := r.GetStatus(); st != nil && st.GetCode() != v2.Code_OK && st.GetCode() != v2.Code_MESSAGE_NOT_FOUND {
			return msgs, statusErr("v5 receive", st)
		}
		if m := r.GetMessage(); m != nil {
			msgs = append(msgs, m)
		}
	}
}

// over reports whether ctx ended or its deadline passed: a call's context
// derived from it has a timer of its own, which may fire first (a receive
// failed with DeadlineExceeded at the end of a run while ctx.Err() was
// still nil: TestV5_E2E, 3 runs in 6).
func over(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}
