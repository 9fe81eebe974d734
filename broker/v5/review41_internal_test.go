package v5

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicemq/sluice/broker/pop"
	"github.com/sluicemq/sluice/internal/message"
)

// failingPop is popBackend whose Pop fails after taking its messages, as
// the broker's does when a later queue of the topic cannot be read.
type failingPop struct{ *popBackend }

func (f failingPop) Pop(ctx context.Context, r PopRequest) ([]Popped, *v2.Status) {
	got, _ := f.popBackend.Pop(ctx, r)
	return got, status(v2.Code_INTERNAL_SERVER_ERROR, "queue 1: read failed")
}

// TestReceive_DeliversWhatWasTakenBeforeAFailure: messages a Pop took
// (invisible now, an attempt counted) before it failed reach the client,
// instead of an error that leaves them invisible for their whole
// invisible time; with nothing taken, the failure is the answer.
func TestReceive_DeliversWhatWasTakenBeforeAFailure(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	pb := &popBackend{clock: clock, tab: pop.New(), routes: map[string][]RouteBroker{}}
	s := New(failingPop{pb}, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: clock.Now})
	require.NoError(t, s.Listen("127.0.0.1:0"))
	t.Cleanup(s.Close)
	cc, err := grpc.NewClient("passthrough:///"+s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	c := v2.NewMessagingServiceClient(cc)

	st, msgs := recv(t, c, "c1", simpleReq("g"))
	require.Equal(t, v2.Code_INTERNAL_SERVER_ERROR, st.GetCode(), "nothing taken: the failure")
	require.Empty(t, msgs)
	pb.store(2)
	st, msgs = recv(t, c, "c1", simpleReq("g"))
	require.Equal(t, v2.Code_OK, st.GetCode(), st.GetMessage())
	got := delivered(msgs)
	slices.Sort(got)
	require.Equal(t, []string{"m0@1", "m1@1"}, got)
}

// TestRecoverOrphaned_PrefersLiveProducers: a transaction check goes to a
// producer heard from lately, not to the open stream of one whose
// heartbeats stopped (its client vanished: the check would be counted and
// never answered), while a live one is there.
func TestRecoverOrphaned_PrefersLiveProducers(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	s, c := startFake(t, clock)
	open := func(id string) v2.MessagingService_TelemetryClient {
		st, err := c.Telemetry(md(t, id))
		require.NoError(t, err)
		pt := v2.ClientType_PRODUCER
		require.NoError(t, st.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: &v2.Settings{
			ClientType: &pt, PubSub: &v2.Settings_Publishing{Publishing: &v2.Publishing{Topics: []*v2.Resource{{Name: "T"}}}}}}}))
		_, err = st.Recv()
		require.NoError(t, err)
		return st
	}
	_ = open("gone")
	live := open("live")
	clock.Add(clientLiveness + 10*time.Second)
	hb, err := c.Heartbeat(md(t, "live"), &v2.HeartbeatRequest{})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, hb.GetStatus().GetCode())

	const checks = 15 // NB: fewer than a stream's queue holds
	for i := range checks {
		rec := message.Record{Topic: []byte("T"), Properties: []byte(message.PropUniqKey + "\x01TX" + strconv.Itoa(i) + "\x02")}
		require.True(t, s.RecoverOrphaned("T", &rec, "tx"))
	}
	for i := range checks {
		got, err := live.Recv()
		require.NoError(t, err, "check %d went elsewhere", i)
		require.NotNil(t, got.GetRecoverOrphanedTransactionCommand(), "got %v", got)
	}
}

// TestClients_SettingsTopicsBounded: the topics and subscriptions a
// client's Settings name are recorded up to maxClientTopics, each topic
// once: a Settings naming 20,000 took 20,000 (and a quadratic scan under
// the client table's lock, which every call takes).
func TestClients_SettingsTopicsBounded(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	s, c := startFake(t, clock)
	const n = 4 * maxClientTopics // NB: enough to pass the bound; 20,000 took 10 s under -race on a loaded machine
	topics := make([]*v2.Resource, 0, n+1)
	subs := make([]*v2.SubscriptionEntry, 0, n)
	for i := range n {
		name := "T" + strconv.Itoa(i)
		topics = append(topics, &v2.Resource{Name: name})
		subs = append(subs, &v2.SubscriptionEntry{Topic: &v2.Resource{Name: name}})
	}
	topics = append(topics, &v2.Resource{Name: "T0"})
	prod, cons := v2.ClientType_PRODUCER, v2.ClientType_SIMPLE_CONSUMER
	settle(t, c, md(t, "p"), &v2.Settings{ClientType: &prod,
		PubSub: &v2.Settings_Publishing{Publishing: &v2.Publishing{Topics: topics}}})
	settle(t, c, md(t, "c"), &v2.Settings{ClientType: &cons,
		PubSub: &v2.Settings_Subscription{Subscription: &v2.Subscription{Group: &v2.Resource{Name: "G"}, Subscriptions: subs}}})
	for _, cl := range s.ListClients() {
		switch cl.ID {
		case "p":
			require.Len(t, cl.Topics, maxClientTopics)
			require.Equal(t, len(cl.Topics), len(slices.Compact(slices.Clone(cl.Topics))), "each once")
		case "c":
			require.Len(t, cl.Subs, maxClientTopics)
		}
	}
	require.Len(t, s.ListClients(), 2)
}
