package compat

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/require"
)

// TestControllerMode_GracefulRestartsUnderSendSync: a three-broker group in
// controller mode (all_ack_in_sync_state_set, the default), the official
// client sending with SendSync from several goroutines without pause, and
// the master stopped gracefully (SIGTERM) and started again on its store,
// three times, each time once the group is whole again. Every message
// answered SEND_OK is then consumed by the official push consumer, at the
// queue and offset its answer gave.
//
// NB: the official client reads routes every 30 s, so after each handover
// the senders move to a new producer (a new client instance reads the
// route at once); the old one stays up, sending nothing, until the end.
func TestControllerMode_GracefulRestartsUnderSendSync(t *testing.T) {
	// NB: not parallel: its brokers register with the shared nameserver in
	// DefaultCluster and serve TBW102, so a parallel test's auto-created
	// topic or cluster-wide topic could land on them (TestAutoCreateTopic
	// found broker-handover).
	work := t.TempDir()
	ctl := startController(t, work)
	const group = "broker-handover"
	var (
		dirs    []string
		addrs   []string
		members []*process
	)
	for i := range 3 {
		dir := filepath.Join(work, fmt.Sprintf("b%d", i))
		p := startGroupMember(t, dir, "127.0.0.1:0", "--controller", ctl.addr, "--broker-name", group)
		dirs, addrs, members = append(dirs, dir), append(addrs, p.addr), append(members, p)
	}
	master := waitWhole(t, addrs)
	topic := name(t, "topic")
	ctx := waitContext(t, patience)
	require.NoError(t, topicAdmin.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(addrs[master]),
		admin.WithReadQueueNums(4), admin.WithWriteQueueNums(4)))

	type ack struct {
		id, offsetMsgID string
		queue           int
		offset          int64
	}
	var (
		mu       sync.Mutex
		acked    []ack
		failed   atomic.Int64
		current  atomic.Pointer[rocketmq.Producer]
		stop     atomic.Bool
		wg       sync.WaitGroup
		switched int
	)
	// use starts a new producer, waits until it is answered SEND_OK, and
	// makes the senders use it.
	use := func() {
		switched++
		p := newProducer(t, fmt.Sprintf("producer%d", switched))
		require.Eventually(t, func() bool {
			res, err := p.SendSync(waitContext(t, 3*time.Second), primitive.NewMessage(topic, []byte("probe")))
			return err == nil && res.Status == primitive.SendOK
		}, patience, 20*time.Millisecond, "SEND_OK from the group's master")
		current.Store(&p)
	}
	use()
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				id := fmt.Sprintf("g%d-%d", g, i)
				m := primitive.NewMessage(topic, []byte(id))
				m.WithProperty(idProperty, id)
				res, err := (*current.Load()).SendSync(waitContext(t, 5*time.Second), m)
				if err != nil || res.Status != primitive.SendOK {
					failed.Add(1) // NB: not acknowledged: it may or may not be stored
					time.Sleep(time.Millisecond)
					continue
				}
				mu.Lock()
				acked = append(acked, ack{id, res.OffsetMsgID, res.MessageQueue.QueueId, res.QueueOffset})
				mu.Unlock()
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }

	for round := range 3 {
		from := count()
		require.Eventually(t, func() bool { return count() >= from+1000 }, patience, time.Millisecond, "sends acknowledged")
		at := time.Now()
		require.NoError(t, members[master].stop(), "graceful stop of the master")
		stopped := time.Since(at)
		members[master] = startGroupMember(t, dirs[master], addrs[master], "--controller", ctl.addr, "--broker-name", group)
		old := master
		master = waitWhole(t, addrs)
		use()
		t.Logf("round %d: master %s stopped in %v; %s is master; the group whole again and sending after %v", round,
			addrs[old], stopped.Round(time.Millisecond), addrs[master], time.Since(at).Round(time.Millisecond))
	}
	from := count()
	require.Eventually(t, func() bool { return count() >= from+1000 }, patience, time.Millisecond, "sends acknowledged")
	stop.Store(true)
	wg.Wait()

	mu.Lock()
	all := acked
	mu.Unlock()
	want := make([]string, 0, len(all))
	for _, a := range all {
		want = append(want, a.id)
	}
	in := consumeAll(t, topic)
	// NB: seen grows with each delivery once (waitIDs would rescan them
	// all on every delivery).
	seen, next, missing := map[string]bool{}, 0, len(want)
	for _, id := range want {
		seen[id] = false
	}
	deadline := time.After(patience)
	for missing > 0 {
		in.mu.Lock()
		ds, changed := slices.Clone(in.got), in.changed
		in.mu.Unlock()
		for ; next < len(ds); next++ {
			id := ds[next].msg.GetProperty(idProperty)
			if done, ok := seen[id]; ok && !done {
				seen[id] = true
				missing--
			}
		}
		if missing == 0 {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			var lost []string
			for _, a := range all {
				if !seen[a.id] && len(lost) < 10 {
					lost = append(lost, fmt.Sprintf("%s (queue %d offset %d, %s)", a.id, a.queue, a.offset, a.offsetMsgID))
				}
			}
			t.Fatalf("%d of %d acknowledged messages not consumed after %v (%d deliveries); the first: %s",
				missing, len(all), patience, len(ds), strings.Join(lost, ", "))
		}
	}
	got := in.deliveries()
	at := map[string]map[string]bool{} // id → "queue/offset" where it was consumed
	for _, d := range got {
		id := d.msg.GetProperty(idProperty)
		if at[id] == nil {
			at[id] = map[string]bool{}
		}
		at[id][fmt.Sprintf("%d/%d", d.msg.Queue.QueueId, d.msg.QueueOffset)] = true
	}
	for _, a := range all {
		require.True(t, at[a.id][fmt.Sprintf("%d/%d", a.queue, a.offset)],
			"%s acknowledged at queue %d offset %d (%s), consumed at %v", a.id, a.queue, a.offset, a.offsetMsgID, at[a.id])
	}
	t.Logf("%d sends acknowledged SEND_OK, %d not, across 3 graceful restarts of the master: every acknowledged one consumed where its answer said",
		len(all), failed.Load())
}

// startController builds mqcontroller and starts one on a free loopback
// port, its Raft on another.
func startController(t *testing.T, work string) *process {
	t.Helper()
	ctlBin, err := controllerBinary()
	require.NoError(t, err)
	ctl, err := start("mqcontroller", ctlBin, filepath.Join(work, "ctl.log"), regexp.MustCompile(`msg="mqcontroller: listening" addr=(\S+)`),
		nil, "--listen", "127.0.0.1:0", "--controller-id", "n0", "--controller-peers", "n0="+freeLoopback(t), "--controller-dir", filepath.Join(work, "ctl"))
	if err != nil && ctl != nil {
		ctl.dumpLog(&testWriter{t})
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = ctl.stop() })
	return ctl
}

// waitWhole waits until one of addrs is master with every member in its
// SyncStateSet, and returns its index.
func waitWhole(t *testing.T, addrs []string) int {
	t.Helper()
	master := -1
	require.Eventually(t, func() bool {
		for i, a := range addrs {
			s := memberStatus(t, a)
			if statusField(s, "brokerRole") == "MASTER" &&
				len(strings.Fields(strings.Trim(statusField(s, "syncStateSet"), "[]"))) == len(addrs) {
				master = i
				return true
			}
		}
		return false
	}, patience, 50*time.Millisecond, "a master with every member in its SyncStateSet")
	return master
}
