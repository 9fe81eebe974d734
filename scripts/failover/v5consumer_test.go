package failover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
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
	group, topic string
	fifo         bool // check FIFO order: "key:n" comes only after "key:n-1" was delivered
	clients      []v2.MessagingServiceClient
	conns        []*grpc.ClientConn

	mu         sync.Mutex
	delivered  map[string]int  // guarded by mu: message id → deliveries
	acked      map[string]bool // guarded by mu: acks answered OK
	dups       int             // guarded by mu
	ackedAgain int             // guarded by mu
	lastErr    string          // guarded by mu
	disorder   []string        // guarded by mu: FIFO: messages delivered before their predecessor
	again      []string        // guarded by mu: the first messages delivered again after an ack answered OK

	stop chan struct{}
	wg   sync.WaitGroup
}

const v5Invisible = 10 * time.Second

// startV5Consumer starts four receivers of group's topic on the brokers
// at grpcAddrs (fifo: the group is orderly and its messages are named
// "key:n", n from 1 for each key).
func startV5Consumer(t *testing.T, grpcAddrs []string, group, topic string, fifo bool) *v5consumer {
	v := &v5consumer{group: group, topic: topic, fifo: fifo, delivered: map[string]int{}, acked: map[string]bool{},
		stop: make(chan struct{})}
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
	rs, err := c.ReceiveMessage(ctx, &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: v.group},
		MessageQueue: &v2.MessageQueue{Topic: &v2.Resource{Name: v.topic}, Id: -1},
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
			if len(v.again) < 10 {
				v.again = append(v.again, fmt.Sprintf("%s (attempt %d, %s)", id, m.GetSystemProperties().GetDeliveryAttempt(),
					time.Now().Format("15:04:05.000")))
			}
		}
		if v.fifo && v.delivered[id] == 1 {
			if prev := predecessor(id); prev != "" && v.delivered[prev] == 0 {
				v.disorder = append(v.disorder, id)
			}
		}
		entries = append(entries, &v2.AckMessageEntry{MessageId: m.GetSystemProperties().GetMessageId(),
			ReceiptHandle: m.GetSystemProperties().GetReceiptHandle()})
	}
	v.mu.Unlock()
	actx, acancel := v5ctx(10 * time.Second)
	defer acancel()
	ar, err := c.AckMessage(actx, &v2.AckMessageRequest{Group: &v2.Resource{Name: v.group}, Topic: &v2.Resource{Name: v.topic},
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

// predecessor is the FIFO message sent before id ("key:n-1"), "" for a
// key's first.
func predecessor(id string) string {
	key, n, ok := strings.Cut(id, ":")
	seq, err := strconv.Atoi(n)
	if !ok || err != nil || seq <= 1 {
		return ""
	}
	return key + ":" + strconv.Itoa(seq-1)
}

// disordered returns the first FIFO messages delivered before their
// predecessor, and the first delivered again after an ack.
func (v *v5consumer) disordered() (disorder, again []string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.disorder[:min(len(v.disorder), 5)]), slices.Clone(v.again)
}

// v5figures are the consumer's counts at a moment.
type v5figures struct{ received, dups, ackedAgain, disorder int }

func (v *v5consumer) figures() v5figures {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for _, d := range v.delivered {
		n += d
	}
	return v5figures{received: n, dups: v.dups, ackedAgain: v.ackedAgain, disorder: len(v.disorder)}
}

// fifoSender sends FIFO messages ("key:n", message group key, 8 keys, one
// sender each) with v5 SendMessage to whichever broker takes them (the
// broker puts a message group on one queue), each again until
// acknowledged, so that
// every "key:n" stored follows "key:n-1" in its queue. It pauses with the
// producer (check compares the replicas' logs) and counts itself among
// its sends in flight.
type fifoSender struct {
	clients []v2.MessagingServiceClient
	mu      sync.Mutex
	acked   []string // guarded by mu
	stop    chan struct{}
	done    chan struct{}
}

func startFIFOSender(t *testing.T, clients []v2.MessagingServiceClient, pr *producer) *fifoSender {
	f := &fifoSender{clients: clients, stop: make(chan struct{}), done: make(chan struct{})}
	var wg sync.WaitGroup
	for k := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.sendLoop(pr, "k"+strconv.Itoa(k), k%len(clients))
		}()
	}
	go func() { wg.Wait(); close(f.done) }()
	t.Cleanup(func() { close(f.stop); <-f.done })
	return f
}

// sendLoop sends key's messages in order, each until acknowledged.
func (f *fifoSender) sendLoop(pr *producer, key string, at int) {
	clients := f.clients
	for seq := 0; ; {
		select {
		case <-f.stop:
			return
		default:
		}
		id := key + ":" + strconv.Itoa(seq+1)
		pr.flying.Add(1)
		if pr.paused.Load() {
			pr.flying.Add(-1)
			time.Sleep(5 * time.Millisecond) // NB: a pause, not a wait for a condition
			continue
		}
		ok := f.send(clients[at], key, id)
		pr.flying.Add(-1)
		if !ok {
			at = (at + 1) % len(clients)
			time.Sleep(20 * time.Millisecond) // NB: a pause before the next broker
			continue
		}
		seq++
		f.mu.Lock()
		f.acked = append(f.acked, id)
		f.mu.Unlock()
	}
}

// send sends id once and reports whether it was acknowledged.
func (f *fifoSender) send(c v2.MessagingServiceClient, key, id string) bool {
	ctx, cancel := v5ctx(5 * time.Second)
	defer cancel()
	r, err := c.SendMessage(ctx, &v2.SendMessageRequest{Messages: []*v2.Message{{Topic: &v2.Resource{Name: "fifo"}, Body: []byte(id),
		// NB: one message id for every send of id: a resend of one stored
		// but not acknowledged (a timeout) is the duplicate window's.
		SystemProperties: &v2.SystemProperties{MessageId: "FIFO-" + id, MessageGroup: &key,
			MessageType: v2.MessageType_FIFO, BornTimestamp: timestamppb.Now()}}}})
	return err == nil && r.GetStatus().GetCode() == v2.Code_OK
}

func (f *fifoSender) ids() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.acked)
}

// createFIFO creates the topic "fifo" (4 queues) and the orderly group
// v5fifo on every broker of the group (a new master has them whatever
// its copy of the master's metadata holds).
func (c *cluster) createFIFO(t *testing.T) {
	body, err := json.Marshal(protocol.SubscriptionGroupConfig{GroupName: "v5fifo", ConsumeEnable: true, ConsumeMessageOrderly: true,
		RetryMaxTimes: 16})
	require.NoError(t, err)
	for _, addr := range c.brokerAddrs {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ext := map[string]string{}
		(&protocol.CreateTopicRequestHeader{Topic: "fifo", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6, TopicFilterType: "SINGLE_TAG"}).ToExt(ext)
		resp, err := c.rc.Invoke(ctx, addr, remoting.NewRequest(protocol.UpdateAndCreateTopic, ext, nil))
		require.NoError(t, err)
		require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
		resp, err = c.rc.Invoke(ctx, addr, remoting.NewRequest(protocol.UpdateAndCreateSubscriptionGroup, nil, body))
		cancel()
		require.NoError(t, err)
		require.Equal(t, int16(protocol.Success), resp.Code, resp.Remark)
	}
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
