package compat

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/require"
)

var servingRE = regexp.MustCompile(`serving on (\S+) \(nameserver`)

// startGroupMember starts one mqbroker of the broker group "broker-ha".
func startGroupMember(t *testing.T, dir, listen string, args ...string) *process {
	t.Helper()
	bin := filepath.Dir(mqadmin)
	base := []string{"-n", nameserverAddr, "--listen", listen, "--store-dir", filepath.Join(dir, "store"),
		"--broker-name", "broker-ha", "--cluster", "DefaultCluster", "--ha-listen", "127.0.0.1:0"}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	logs, _ := filepath.Glob(filepath.Join(dir, "log-*"))
	logPath := filepath.Join(dir, fmt.Sprintf("log-%d", len(logs)))
	env := append([]string{"SLUICE_STORE_SEGMENT_SIZE=1048576", "SLUICE_STORE_MAX_MESSAGE_SIZE=65536", "SLUICE_REGISTER_INTERVAL=200ms"},
		securityEnv...)
	p, err := start(filepath.Base(dir), filepath.Join(bin, "mqbroker"), logPath, servingRE, env,
		append(append(base, securityArgs...), args...)...)
	if err != nil && p != nil {
		p.dumpLog(&testWriter{t})
	}
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			p.dumpLog(&testWriter{t})
		}
		_ = p.stop()
	})
	return p
}

type testWriter struct{ t *testing.T }

func (w *testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }

// memberStatus runs mqadmin brokerStatus against addr ("" when it fails:
// a broker that is not up yet; the callers wait for a value).
func memberStatus(t *testing.T, addr string) string {
	out, err := exec.Command(mqadmin, mqadminArgs("brokerStatus", "-b", addr)...).CombinedOutput()
	if err != nil {
		t.Logf("mqadmin brokerStatus -b %s: %v: %s", addr, err, out)
		return ""
	}
	return string(out)
}

// statusField reads one "key : value" line of brokerStatus.
func statusField(out, key string) string {
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestReplication_KillSyncMaster: a SYNC_MASTER and its slave; the official
// client sends with SendSync from several goroutines and the master is
// killed (SIGKILL) mid-stream. Every acknowledged message is consumed from
// the slave by the official push consumer while the master is down; the
// master restarts on its store, the slave catches up to it, and the
// acknowledged messages are in their queues in the order they were
// acknowledged.
func TestReplication_KillSyncMaster(t *testing.T) {
	// NB: not parallel: its brokers register with the shared nameserver in
	// DefaultCluster and serve TBW102, so a parallel test's auto-created
	// topic or cluster-wide topic could land on them (TestAutoCreateTopic
	// found broker-handover).
	work := t.TempDir()
	masterDir, slaveDir := filepath.Join(work, "master"), filepath.Join(work, "slave")
	master := startGroupMember(t, masterDir, "127.0.0.1:0", "--role", "SYNC_MASTER", "--flush", "sync")
	startGroupMember(t, slaveDir, "127.0.0.1:0", "--role", "SLAVE", "--broker-id", "1")
	topic := name(t, "topic")
	ctx := waitContext(t, patience)
	require.NoError(t, topicAdmin.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(master.addr),
		admin.WithReadQueueNums(4), admin.WithWriteQueueNums(4)))

	// A consumer running before the master dies (the official client asks
	// the master for a new group's offsets, so a group must be running to
	// fall back to the slave; it does at its route refresh), whose handler
	// holds its first message until the master is dead: the messages after
	// it are left for the slave. NB: a consumer that was merely slow (5 ms a
	// message) kept up with the senders on a loaded machine.
	in := newInbox()
	var handled atomic.Int64
	gate := make(chan struct{})
	in.decide = func(delivery) consumer.ConsumeResult {
		handled.Add(1)
		<-gate // NB: with the inbox locked: nothing reads it until the gate opens
		return consumer.ConsumeSuccess
	}
	startPushConsumer(t, topic, "*", in, "c1", consumerOptions(name(t, "group"), name(t, "c1"), consumer.WithConsumeGoroutineNums(1)))
	release := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release) // NB: before the consumer's shutdown, should the test fail first
	p := newProducer(t, "producer")
	// The slave has connected once a send is acknowledged SEND_OK.
	require.Eventually(t, func() bool {
		res, err := p.SendSync(waitContext(t, patience), primitive.NewMessage(topic, []byte("probe")))
		return err == nil && res.Status == primitive.SendOK
	}, 30*time.Second, 50*time.Millisecond)

	type ack struct {
		id     string
		queue  int
		offset int64
	}
	var (
		mu    sync.Mutex
		acked []ack
		stop  atomic.Bool
		wg    sync.WaitGroup
	)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				id := fmt.Sprintf("g%d-%d", g, i)
				m := primitive.NewMessage(topic, []byte(id))
				m.WithProperty(idProperty, id)
				res, err := p.SendSync(waitContext(t, 5*time.Second), m)
				if err != nil || res.Status != primitive.SendOK {
					continue // NB: not acknowledged: may or may not be stored
				}
				mu.Lock()
				acked = append(acked, ack{id, res.MessageQueue.QueueId, res.QueueOffset})
				mu.Unlock()
			}
		}()
	}
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 300 }, 60*time.Second, time.Millisecond)
	require.NoError(t, master.cmd.Process.Kill())
	<-master.exited
	stop.Store(true)
	wg.Wait()
	atKill := int(handled.Load())
	release()
	t.Logf("%d sends acknowledged, %d messages consumed when the master was killed", len(acked), atKill)

	// Every acknowledged message is consumed, those left from the slave.
	want := map[string]bool{}
	for _, a := range acked {
		want[a.id] = true
	}
	got := in.waitFor(t, "every acknowledged message, from the slave", func(ds []delivery) bool {
		seen := 0
		for _, d := range ds {
			if want[d.msg.GetProperty(idProperty)] {
				seen++
			}
		}
		return seen >= len(want)
	})
	require.Less(t, atKill, len(want), "the consumer was behind when the master died")
	for _, d := range got {
		if id := d.msg.GetProperty(idProperty); want[id] {
			require.Equal(t, "broker-ha", d.msg.Queue.BrokerName)
		}
	}
	// Within a queue, acknowledged messages are in acknowledgement order
	// at the offsets the master gave them.
	byQueue := map[int]map[int64]string{}
	for _, d := range got {
		if byQueue[d.msg.Queue.QueueId] == nil {
			byQueue[d.msg.Queue.QueueId] = map[int64]string{}
		}
		byQueue[d.msg.Queue.QueueId][d.msg.QueueOffset] = d.msg.GetProperty(idProperty)
	}
	for _, a := range acked {
		require.Equal(t, a.id, byQueue[a.queue][a.offset], "queue %d offset %d", a.queue, a.offset)
	}

	// The master returns on its store; the slave catches up with it.
	master = startGroupMember(t, masterDir, "127.0.0.1:0", "--role", "SYNC_MASTER", "--flush", "sync")
	res, err := p.SendSync(waitContext(t, patience), primitive.NewMessage(topic, []byte("after")))
	for i := 0; (err != nil || res.Status != primitive.SendOK) && i < 600; i++ {
		time.Sleep(50 * time.Millisecond) // NB: the producer's route refresh; the condition is the send itself
		res, err = p.SendSync(waitContext(t, patience), primitive.NewMessage(topic, []byte("after")))
	}
	require.NoError(t, err)
	require.Equal(t, primitive.SendOK, res.Status, "the restarted master acknowledges with the slave caught up")
	ms := memberStatus(t, master.addr)
	require.Equal(t, "SYNC_MASTER", statusField(ms, "brokerRole"))
	require.Equal(t, "1", statusField(ms, "haSlaves"))
}

// TestControllerMode_OfficialClientFollows: two brokers in controller mode
// under one controller; the official client sends to the elected master;
// the master is killed (SIGKILL); the other broker is elected within
// seconds and the client, unchanged, sends to it once its route refresh
// (every 30 s) sees it. It reports how long that took.
func TestControllerMode_OfficialClientFollows(t *testing.T) {
	// NB: not parallel: its brokers register with the shared nameserver in
	// DefaultCluster and serve TBW102, so a parallel test's auto-created
	// topic or cluster-wide topic could land on them (TestAutoCreateTopic
	// found broker-handover).
	work := t.TempDir()
	ctlBin, err := controllerBinary()
	require.NoError(t, err)
	peer := freeLoopback(t)
	ctl, err := start("mqcontroller", ctlBin, filepath.Join(work, "ctl.log"), regexp.MustCompile(`msg="mqcontroller: listening" addr=(\S+)`),
		nil, "--listen", "127.0.0.1:0", "--controller-id", "n0", "--controller-peers", "n0="+peer, "--controller-dir", filepath.Join(work, "ctl"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ctl.stop() })

	var members []*process
	for i := range 2 {
		members = append(members, startGroupMember(t, filepath.Join(work, fmt.Sprintf("b%d", i)), "127.0.0.1:0",
			"--controller", ctl.addr, "--broker-name", "broker-ctl"))
	}
	master := -1
	require.Eventually(t, func() bool {
		for i, m := range members {
			if statusField(memberStatus(t, m.addr), "brokerRole") == "MASTER" {
				master = i
				return true
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond)
	topic := name(t, "topic")
	ctx := waitContext(t, patience)
	require.NoError(t, topicAdmin.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(members[master].addr),
		admin.WithReadQueueNums(4), admin.WithWriteQueueNums(4)))
	p := newProducer(t, "producer")
	sendOK := func() bool {
		res, err := p.SendSync(waitContext(t, 3*time.Second), primitive.NewMessage(topic, []byte("x")))
		return err == nil && res.Status == primitive.SendOK
	}
	require.Eventually(t, sendOK, 30*time.Second, 50*time.Millisecond, "the master")
	// NB: only an in-sync replica is elected: wait for the slave to join.
	require.Eventually(t, func() bool {
		return statusField(memberStatus(t, members[master].addr), "syncStateSet") == "[1 2]"
	}, 30*time.Second, 50*time.Millisecond, "both brokers in the SyncStateSet")

	killed := time.Now()
	require.NoError(t, members[master].cmd.Process.Kill())
	<-members[master].exited
	other := members[1-master]
	require.Eventually(t, func() bool { return statusField(memberStatus(t, other.addr), "brokerRole") == "MASTER" },
		30*time.Second, 20*time.Millisecond)
	elected := time.Since(killed)
	require.Eventually(t, sendOK, 90*time.Second, 100*time.Millisecond, "the official client sends to the new master")
	t.Logf("new master %v after the kill; the official client sent again after %v", elected.Round(time.Millisecond),
		time.Since(killed).Round(time.Millisecond))
}

// freeLoopback returns a loopback address whose port was free a moment ago.
func freeLoopback(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}
