package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/stretchr/testify/require"
)

// TestBroker_ConnectionSendOrder: one connection's sends to a queue are
// stored in the order it sent them, however each is served. The
// connection pipelines plain sends (served inline) mixed with
// transactional ones (declined inline: they go to the connection's ordered
// executor), while another connection keeps transactional sends in flight
// (they hold send slots, which used to push the first connection's sends
// onto goroutines of their own, racing for the put lock).
func TestBroker_ConnectionSendOrder(t *testing.T) {
	const rounds, n = 15, 200
	b := startBroker(t, testConfig(t.TempDir()), Options{})
	ca, cx := newClient(t, remoting.SerializeJSON), newClient(t, remoting.SerializeJSON)
	mustSend(t, ca, b.Addr(), "t", 0, "warm", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := ca.Conn(ctx, b.Addr())
	require.NoError(t, err)
	txProps := string(message.AppendProperties(nil, map[string]string{message.PropTranMsg: "true", message.PropProducerGroup: "pg"}))
	request := func(tx bool, body string) *remoting.Command {
		h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "t", QueueID: 0, BornTimestamp: time.Now().UnixMilli()}
		if tx {
			h.SysFlag, h.Properties = message.TxPrepared, txProps
		}
		return remoting.NewRequest(protocol.SendMessage, protocol.Ext(h), []byte(body))
	}
	var want []string
	for round := range rounds {
		stop := make(chan struct{})
		var other sync.WaitGroup
		other.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := cx.Invoke(ctx, b.Addr(), request(true, "other")); err != nil {
					return
				}
			}
		})
		var answered sync.WaitGroup
		errs := make(chan string, n)
		for i := range n {
			body := fmt.Sprintf("%d-%d", round, i)
			tx := i%10 == 3
			if !tx {
				want = append(want, body)
			}
			answered.Add(1)
			conn.Invoke(ctx, request(tx, body), remoting.Async(func(resp *remoting.Command, err error) {
				defer answered.Done()
				if err != nil || resp.Code != protocol.Success {
					errs <- fmt.Sprint(body, err, resp)
				}
			}))
		}
		answered.Wait()
		close(stop)
		other.Wait()
		close(errs)
		for e := range errs {
			t.Fatalf("send failed: %s", e)
		}
	}
	waitIndexed(t, b)
	var got []string
	for off := int64(1); ; {
		resp := invoke(t, ca, b.Addr(), protocol.PullMessage, pullHeader("inspect", "t", 0, off, pullSubscription), nil)
		if resp.Code != protocol.Success {
			break
		}
		recs := decodeRecords(t, resp.Body)
		for _, r := range recs {
			got = append(got, string(r.Body))
		}
		off = recs[len(recs)-1].QueueOffset + 1
	}
	require.Len(t, got, len(want))
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("stored out of order at %d: got %s, want %s (round-index); %d sends in all", i, got[i], want[i], len(want))
		}
	}
}
