package v5

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicemq/sluice/broker/pop"
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
