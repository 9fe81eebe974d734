package failover

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"
)

// v5consumer is a RocketMQ 5 consumer of the producer's topic: it
// receives (POP) from whichever broker of the group serves it (a slave
// answers FORBIDDEN: it moves on to the next) and acks each message,
// recording every delivery and every ack the broker answered OK. It
// speaks the official Go v5 SDK's protocol (its generated package) on raw
// gRPC calls: the SDK's own consumer drops an ack's status (v5.1.4), and
// the figures need to know which acks the broker acknowledged.
//
// Figures: duplicates (deliveries of a message past its first: the
// messages in flight at a failover come again once their invisible time
// is over, the goal is at most those), acked again (deliveries of a
// message after an ack the broker answered OK: goal 0, the POP state is
// replicated before an ack is answered), lost (acknowledged sends never
// received once the consumer caught up: goal 0).
type v5consumer struct {
	clients []v2.MessagingServiceClient
	conns   []*grpc.ClientConn

	mu         sync.Mutex
	delivered  map[string]int  // guarded by mu: message id → deliveries
	acked      map[string]bool // guarded by mu: acks answered OK
	dups       int             // guarded by mu
	ackedAgain int             // guarded by mu
	lastErr    string          // guarded by mu

	stop chan struct{}
	wg   sync.WaitGroup
}

const (
	v5Group     = "v5failover"
	v5Invisible = 10 * time.Second
)

// startV5Consumer starts four receivers on the brokers at grpcAddrs.
func startV5Consumer(t *testing.T, grpcAddrs []string) *v5consumer {
	v := &v5consumer{delivered: map[string]int{}, acked: map[string]bool{}, stop: make(chan struct{})}
	for _, a := range grpcAddrs {
		cc, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatalf("v5 consumer: dial %s: %v", a, err)
		}
		v.conns = append(v.conns, cc)
		v.clients = append(v.clients, v2.NewMessagingServiceClient(cc))
	}
	for w := range 4 {
		v.wg.Add(1)
		go v.loop(w)
	}
	t.Cleanup(v.close)
	return v
}

func (v *v5consumer) close() {
	select {
	case <-v.stop:
		return
	default:
	}
	close(v.stop)
	v.wg.Wait()
	for _, cc := range v.conns {
		cc.Close()
	}
}

func v5ctx(d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	return metadata.AppendToOutgoingContext(ctx, "x-mq-language", "GO", "x-mq-protocol", "v2",
		"x-mq-client-id", "failover@v5consumer"), cancel
}

// loop receives and acks until stop, moving to the next broker on any
// error (a slave's FORBIDDEN, a dead master).
func (v *v5consumer) loop(w int) {
	defer v.wg.Done()
	at := w % len(v.clients)
	for {
		select {
		case <-v.stop:
			return
		default:
		}
		if err := v.once(v.clients[at]); err != nil {
			v.mu.Lock()
			v.lastErr = fmt.Sprintf("%s: broker %d: %v", time.Now().Format("15:04:05.000"), at, err)
			v.mu.Unlock()
			at = (at + 1) % len(v.clients)
			select {
			case <-v.stop:
				return
			case <-time.After(20 * time.Millisecond): // NB: a pause before the next broker, not a wait for a condition
			}
		}
	}
}

// errNothing is a receive that found no message (MESSAGE_NOT_FOUND).
var errNothing = errors.New("no message")

// once receives a batch from c and acks it.
func (v *v5consumer) once(c v2.MessagingServiceClient) error {
	ctx, cancel := v5ctx(10 * time.Second)
	defer cancel()
	rs, err := c.ReceiveMessage(ctx, &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: v5Group},
		MessageQueue: &v2.MessageQueue{Topic: &v2.Resource{Name: "orders"}, Id: -1},
		BatchSize:    32, InvisibleDuration: durationpb.New(v5Invisible), LongPollingTimeout: durationpb.New(2 * time.Second)})
	if err != nil {
		return err
	}
	var got []*v2.Message
	for {
		r, err := rs.Recv()
		if err != nil {
			break // NB: io.EOF ends the stream; any other error too
		}
		if st := r.GetStatus(); st != nil && st.GetCode() != v2.Code_OK {
			if st.GetCode() == v2.Code_MESSAGE_NOT_FOUND {
				return nil
			}
			return fmt.Errorf("receive: %v %s", st.GetCode(), st.GetMessage())
		}
		if m := r.GetMessage(); m != nil {
			got = append(got, m)
		}
	}
	if len(got) == 0 {
		return nil
	}
	var entries []*v2.AckMessageEntry
	v.mu.Lock()
	for _, m := range got {
		id := string(m.GetBody())
		if v.delivered[id]++; v.delivered[id] > 1 {
			v.dups++
		}
		if v.acked[id] {
			v.ackedAgain++
		}
		entries = append(entries, &v2.AckMessageEntry{MessageId: m.GetSystemProperties().GetMessageId(),
			ReceiptHandle: m.GetSystemProperties().GetReceiptHandle()})
	}
	v.mu.Unlock()
	actx, acancel := v5ctx(10 * time.Second)
	defer acancel()
	ar, err := c.AckMessage(actx, &v2.AckMessageRequest{Group: &v2.Resource{Name: v5Group}, Topic: &v2.Resource{Name: "orders"},
		Entries: entries})
	if err != nil {
		return fmt.Errorf("ack: %w", err) // NB: not acked: delivered again after their invisible time
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for i, e := range ar.GetEntries() {
		if e.GetStatus().GetCode() == v2.Code_OK && i < len(got) {
			v.acked[string(got[i].GetBody())] = true
		}
	}
	return nil
}

// v5figures are the consumer's counts at a moment.
type v5figures struct{ received, dups, ackedAgain int }

func (v *v5consumer) figures() v5figures {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for _, d := range v.delivered {
		n += d
	}
	return v5figures{received: n, dups: v.dups, ackedAgain: v.ackedAgain}
}

// lost waits (up to patience) until every id was received, and returns
// those that were not then. (Received, not acked OK: an ack answered
// SLAVE_PERSISTENCE_TIMEOUT while the SyncStateSet shrinks still holds on
// the master, which does not deliver the message again.)
func (v *v5consumer) lost(ids []string) []string {
	deadline := time.Now().Add(patience)
	for {
		var out []string
		v.mu.Lock()
		for _, id := range ids {
			if v.delivered[id] == 0 {
				out = append(out, id)
			}
		}
		last := v.lastErr
		v.mu.Unlock()
		if len(out) == 0 || time.Now().After(deadline) {
			if len(out) > 0 {
				fmt.Printf("v5 consumer: last error: %s\n", last)
			}
			return out
		}
		time.Sleep(100 * time.Millisecond) // NB: polling for the condition, bounded by patience
	}
}
