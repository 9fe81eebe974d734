package v5

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// fakeBackend is a Backend with no topics: enough for the client table
// and the settings path.
type fakeBackend struct{}

func (fakeBackend) Route(context.Context, string) ([]RouteBroker, error) {
	return nil, ErrTopicNotFound
}
func (fakeBackend) MessageType(string) string { return "" }
func (fakeBackend) Send(_ context.Context, reqs []SendRequest) []SendResult {
	return make([]SendResult, len(reqs))
}
func (fakeBackend) Group(g string) GroupSettings {
	return GroupSettings{Orderly: strings.HasPrefix(g, "fifo"), MaxAttempts: 3}
}
func (fakeBackend) MaxBodySize() int32  { return 4 << 20 }
func (fakeBackend) ConsumerSeen(string) {}

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// startFake serves a Server over fakeBackend on a free loopback port.
func startFake(t *testing.T, clock *fakeClock) (*Server, v2.MessagingServiceClient) {
	t.Helper()
	s := New(fakeBackend{}, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: clock.Now})
	require.NoError(t, s.Listen("127.0.0.1:0"))
	t.Cleanup(s.Close)
	cc, err := grpc.NewClient("passthrough:///"+s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return s, v2.NewMessagingServiceClient(cc)
}

// md is a call context of client id with the given SDK metadata.
func md(t *testing.T, id string, kv ...string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, append([]string{mdClientID, id}, kv...)...)
}

// settle sends set on a Telemetry stream and waits for the answer.
func settle(t *testing.T, c v2.MessagingServiceClient, ctx context.Context, set *v2.Settings) {
	t.Helper()
	st, err := c.Telemetry(ctx)
	require.NoError(t, err)
	require.NoError(t, st.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: set}}))
	reply, err := st.Recv()
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, reply.GetStatus().GetCode(), reply.GetStatus().GetMessage())
	require.NoError(t, st.CloseSend())
}

// TestClients_ListedUntilTerminatedOrQuiet: a v5 client is listed with its
// address, its SDK's language and version (from the Settings' user agent,
// else the request metadata), a producer under its topics and a consumer
// under its group with its subscriptions; it leaves the list when it
// terminates, or when its heartbeats stop for the expiry.
func TestClients_ListedUntilTerminatedOrQuiet(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	s, c := startFake(t, clock)

	prod := v2.ClientType_PRODUCER
	settle(t, c, md(t, "prod-1", mdLanguage, "GO"), &v2.Settings{ClientType: &prod,
		UserAgent: &v2.UA{Language: v2.Language_GOLANG, Version: "5.1.4"},
		PubSub:    &v2.Settings_Publishing{Publishing: &v2.Publishing{Topics: []*v2.Resource{{Name: "T2"}, {Name: "T1"}, {Name: "T1"}}}}})

	// A consumer that heartbeats first (metadata only), then sends its settings.
	hb, err := c.Heartbeat(md(t, "cons-1", mdLanguage, "JAVA", mdClientVersion, "5.0.7"),
		&v2.HeartbeatRequest{Group: &v2.Resource{Name: "G"}, ClientType: v2.ClientType_SIMPLE_CONSUMER})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, hb.GetStatus().GetCode())
	got := s.ConsumerClients("G")
	require.Len(t, got, 1)
	require.Equal(t, "JAVA", got[0].Language)
	require.Equal(t, int32(427), got[0].Version, "V5_0_7")
	require.Empty(t, got[0].Subs)

	simple := v2.ClientType_SIMPLE_CONSUMER
	settle(t, c, md(t, "cons-1"), &v2.Settings{ClientType: &simple,
		UserAgent: &v2.UA{Language: v2.Language_JAVA, Version: "5.0.7"},
		PubSub: &v2.Settings_Subscription{Subscription: &v2.Subscription{Group: &v2.Resource{Name: "G"},
			Subscriptions: []*v2.SubscriptionEntry{
				{Topic: &v2.Resource{Name: "T2"}, Expression: &v2.FilterExpression{Type: v2.FilterType_SQL, Expression: "a > 1"}},
				{Topic: &v2.Resource{Name: "T1"}, Expression: &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "x || y"}},
			}}}})

	all := s.ListClients()
	require.Len(t, all, 2)
	p := all[1]
	require.Equal(t, "prod-1", p.ID)
	require.True(t, p.IsProducer())
	require.True(t, strings.HasPrefix(p.Addr, "127.0.0.1:") && !strings.HasSuffix(p.Addr, ":0"), p.Addr)
	require.Equal(t, "GO", p.Language)
	require.Equal(t, int32(441), p.Version, "V5_1_4")
	require.Equal(t, []string{"T1", "T2"}, p.Topics)

	cons := s.ConsumerClients("G")
	require.Len(t, cons, 1)
	require.Equal(t, "cons-1", cons[0].ID)
	require.Equal(t, []Sub{{Topic: "T1", Expression: "x || y", Type: "TAG"}, {Topic: "T2", Expression: "a > 1", Type: "SQL92"}}, cons[0].Subs)
	require.Empty(t, s.ConsumerClients("other"))

	require.Equal(t, []string{"prod-1"}, ids(s.ProducerClients("T1")))
	require.Equal(t, []string{"prod-1"}, ids(s.ProducerClients("T2")))
	require.Empty(t, s.ProducerClients("G"), "a consumer is no producer")

	// Termination: gone at once.
	nt, err := c.NotifyClientTermination(md(t, "cons-1"), &v2.NotifyClientTerminationRequest{Group: &v2.Resource{Name: "G"}})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, nt.GetStatus().GetCode())
	require.Empty(t, s.ConsumerClients("G"))

	// Quiet: the producer leaves the list once its last call is older than
	// the expiry (the table forgets it at its next sweep); a heartbeat
	// brings it back, listed under its topics again once it sends its
	// settings.
	clock.Add(clientExpiry)
	require.Equal(t, []string{"prod-1"}, ids(s.ListClients()), "still within the expiry")
	clock.Add(time.Second)
	require.Empty(t, s.ListClients())
	_, err = c.Heartbeat(md(t, "prod-1"), &v2.HeartbeatRequest{ClientType: v2.ClientType_PRODUCER})
	require.NoError(t, err)
	require.Equal(t, []string{"prod-1"}, ids(s.ListClients()))
	require.Equal(t, "127.0.0.1", strings.Split(s.ListClients()[0].Addr, ":")[0])
}

func ids(cs []Client) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

func TestVersionOrdinal(t *testing.T) {
	for v, want := range map[string]int32{"5.1.4": 441, "5.0.0": 413, "4.9.4": 401, "4.9.8": 409, "4.1.0": 233,
		"5.3.1-rc1": 475, "": 0, "5.1": 0, "6.0.0": 0, "3.2.6": 0, "5.10.0": 0, "a.b.c": 0, "5.-1.0": 0} {
		require.Equal(t, want, versionOrdinal(v), v)
	}
	for l, want := range map[string]string{"GOLANG": "GO", "GO": "GO", "DOT_NET": "DOTNET", "NODE_JS": "NODE_JS",
		"java": "JAVA", "LANGUAGE_UNSPECIFIED": "", "": ""} {
		require.Equal(t, want, languageName(l), l)
	}
}
