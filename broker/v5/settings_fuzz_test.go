package v5

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// oneShotStream is a Telemetry stream whose client sends one command,
// then closes its side; it keeps what the server sends.
type oneShotStream struct {
	grpc.ServerStream
	ctx  context.Context
	cmd  *v2.TelemetryCommand
	sent []*v2.TelemetryCommand
}

func (s *oneShotStream) Context() context.Context { return s.ctx }
func (s *oneShotStream) Send(c *v2.TelemetryCommand) error {
	s.sent = append(s.sent, c)
	return nil
}
func (s *oneShotStream) Recv() (*v2.TelemetryCommand, error) {
	if c := s.cmd; c != nil {
		s.cmd = nil
		return c, nil
	}
	return nil, io.EOF
}

// FuzzTelemetrySettings feeds arbitrary Settings (decoded from the fuzz
// bytes) through a Telemetry stream, the path every v5 client's settings
// take: the server never panics, answers each Settings exactly once with a
// status, and an OK answer carries settings the SDKs accept (a publishing
// part with a body limit or a subscription part with a batch size, and a
// retry policy).
func FuzzTelemetrySettings(f *testing.F) {
	prod, simple, push, other := v2.ClientType_PRODUCER, v2.ClientType_SIMPLE_CONSUMER, v2.ClientType_PUSH_CONSUMER, v2.ClientType(77)
	for _, set := range []*v2.Settings{
		{},
		{ClientType: &prod, UserAgent: &v2.UA{Language: v2.Language_GOLANG, Version: "5.1.4"},
			PubSub: &v2.Settings_Publishing{Publishing: &v2.Publishing{Topics: []*v2.Resource{{Name: "T"}}}}},
		{ClientType: &simple, RequestTimeout: durationpb.New(3e9),
			PubSub: &v2.Settings_Subscription{Subscription: &v2.Subscription{Group: &v2.Resource{Name: "fifo-G"},
				Subscriptions: []*v2.SubscriptionEntry{{Topic: &v2.Resource{Name: "T"},
					Expression: &v2.FilterExpression{Type: v2.FilterType_SQL, Expression: "a > 1"}}}}}},
		{ClientType: &push, PubSub: &v2.Settings_Subscription{}},
		{ClientType: &other},
		{ClientType: &prod, PubSub: &v2.Settings_Subscription{Subscription: &v2.Subscription{}}},
		{UserAgent: &v2.UA{Version: "9.9.9.9"}, PubSub: &v2.Settings_Publishing{Publishing: &v2.Publishing{}}},
	} {
		b, err := proto.Marshal(set)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	s := New(fakeBackend{}, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	f.Cleanup(s.Close)
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(mdClientID, "fuzz-client"))
	ctx = peer.NewContext(ctx, &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4242}})
	f.Fuzz(func(t *testing.T, data []byte) {
		set := &v2.Settings{}
		if err := proto.Unmarshal(data, set); err != nil {
			return
		}
		st := &oneShotStream{ctx: ctx, cmd: &v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: set}}}
		if err := s.Telemetry(st); err != nil {
			t.Fatalf("Telemetry: %v", err)
		}
		if len(st.sent) != 1 {
			t.Fatalf("%d answers to one Settings, want 1", len(st.sent))
		}
		ans := st.sent[0]
		if ans.GetStatus() == nil {
			t.Fatal("an answer without a status")
		}
		if ans.GetStatus().GetCode() != v2.Code_OK {
			if ans.GetStatus().GetMessage() == "" {
				t.Fatalf("refusal %v without a message", ans.GetStatus().GetCode())
			}
			return
		}
		out := ans.GetSettings()
		switch {
		case out == nil:
			t.Fatal("OK without settings")
		case out.GetBackoffPolicy().GetMaxAttempts() <= 0:
			t.Fatalf("no retry policy: %v", out.GetBackoffPolicy())
		case out.GetPublishing() != nil:
			if out.GetPublishing().GetMaxBodySize() <= 0 {
				t.Fatal("publishing settings without a body limit")
			}
		case out.GetSubscription() != nil:
			if out.GetSubscription().GetReceiveBatchSize() <= 0 || out.GetSubscription().GetLongPollingTimeout() == nil {
				t.Fatalf("subscription settings without batch size or long polling: %v", out.GetSubscription())
			}
		default:
			t.Fatal("OK settings with neither publishing nor subscription")
		}
		for _, c := range s.ListClients() {
			if c.ID == "fuzz-client" && c.Addr != "127.0.0.1:4242" {
				t.Fatalf("client listed at %q", c.Addr)
			}
		}
	})
}
