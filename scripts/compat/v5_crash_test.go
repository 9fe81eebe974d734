package compat

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

var grpcServingRE = regexp.MustCompile(`serving RocketMQ 5 clients \(gRPC\)" grpc=(\S+)`)

// startV5Broker starts a broker of its own (broker name brokerName) on
// store dir/store, its gRPC port picked at start, and returns it with its
// gRPC address. The caller stops it.
func startV5Broker(t *testing.T, dir, brokerName string) (*process, string) {
	t.Helper()
	env := append([]string{"SLUICE_STORE_SEGMENT_SIZE=8388608", "SLUICE_REGISTER_INTERVAL=200ms"}, securityEnv...)
	args := append([]string{"-n", nameserverAddr, "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0",
		"--store-dir", filepath.Join(dir, "store"), "--flush", "async", "--broker-name", brokerName,
		"--cluster", "DefaultCluster"}, securityArgs...)
	logs, _ := filepath.Glob(filepath.Join(dir, "log-*"))
	br, err := start(brokerName, filepath.Join(filepath.Dir(mqadmin), "mqbroker"),
		filepath.Join(dir, "log-"+strconv.Itoa(len(logs))), servingRE, env, args...)
	if err != nil {
		if br != nil {
			br.dumpLog(&testWriter{t})
			_ = br.stop()
		}
		t.Fatal(err)
	}
	logBytes, err := os.ReadFile(br.logPath)
	require.NoError(t, err)
	m := grpcServingRE.FindSubmatch(logBytes)
	require.NotNil(t, m, "the broker logs its gRPC address")
	return br, string(m[1])
}

// popInflight reads the broker's saved POP state (store/config/pop: a
// msgpack document and its big-endian CRC32, broker/pop's snapshot) and
// returns the offsets in flight of group's queue 0 of topic; nil while
// there is no file yet.
func popInflight(t *testing.T, storeDir, group, topic string) []int64 {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(storeDir, "config", "pop"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	require.Greater(t, len(raw), 4)
	doc, sum := raw[:len(raw)-4], binary.BigEndian.Uint32(raw[len(raw)-4:])
	require.Equal(t, crc32.ChecksumIEEE(doc), sum, "a saved state file is whole (written to a temp file, then renamed)")
	var snap struct {
		Queues []struct {
			Group    string `msgpack:"g"`
			Topic    string `msgpack:"t"`
			Queue    int32  `msgpack:"q"`
			Inflight []struct {
				Offset int64 `msgpack:"o"`
			} `msgpack:"f"`
		} `msgpack:"queues"`
	}
	require.NoError(t, msgpack.NewDecoder(bytes.NewReader(doc)).Decode(&snap))
	offs := []int64{}
	for _, q := range snap.Queues {
		if q.Group == group && q.Topic == topic && q.Queue == 0 {
			for _, e := range q.Inflight {
				offs = append(offs, e.Offset)
			}
		}
	}
	slices.Sort(offs)
	return offs
}

// TestV5SimpleConsumer_KillDashNine: the official v5 SimpleConsumer
// receives every message of a one-queue topic and acks half; once the
// broker's POP state file holds exactly the un-acked offsets in flight
// (the acks are saved: PersistInterval is 1 s, and a kill -9 loses what
// was not saved), the broker is killed with SIGKILL and started again on
// the same store. After the invisible time, a new SimpleConsumer gets
// exactly the un-acked messages again, each with delivery attempt 2, and
// none of the acked ones.
func TestV5SimpleConsumer_KillDashNine(t *testing.T) {
	grpcEndpoint(t) // NB: the SDK's logging and TLS switch
	dir := t.TempDir()
	const bname = "broker-v5-crash"
	br, endpoint := startV5Broker(t, dir, bname)
	defer func() {
		if t.Failed() {
			br.dumpLog(&testWriter{t})
		}
		_ = br.stop()
	}()
	topic, group := name(t, "topic"), name(t, "group")
	ctx := waitContext(t, patience)
	require.NoError(t, topicAdmin.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(br.addr),
		admin.WithReadQueueNums(1), admin.WithWriteQueueNums(1)))
	creds := &credentials.SessionCredentials{AccessKey: adminCreds.AccessKey, AccessSecret: adminCreds.SecretKey}

	p, err := rmq.NewProducer(&rmq.Config{Endpoint: endpoint, Credentials: creds}, rmq.WithTopics(topic))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	const n = 20
	offsetOf := map[string]int64{} // compat id → queue offset
	for i := range n {
		id := "m-" + strconv.Itoa(i)
		m := &rmq.Message{Topic: topic, Body: []byte("body of " + id)}
		m.AddProperty(idProperty, id)
		rs, err := p.Send(waitContext(t, patience), m)
		require.NoError(t, err, id)
		require.Len(t, rs, 1)
		offsetOf[id] = rs[0].Offset
	}
	require.NoError(t, p.GracefulStop())

	const invisible = 10 * time.Second // the least the SDK and the broker take
	newConsumer := func(endpoint string) rmq.SimpleConsumer {
		t.Helper()
		sc, err := rmq.NewSimpleConsumer(&rmq.Config{Endpoint: endpoint, ConsumerGroup: group, Credentials: creds},
			rmq.WithSimpleAwaitDuration(2*time.Second),
			rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
		require.NoError(t, err)
		require.NoError(t, sc.Start())
		return sc
	}
	sc := newConsumer(endpoint)
	got := map[string]*rmq.MessageView{}
	deadline := time.Now().Add(patience)
	for len(got) < n {
		require.True(t, time.Now().Before(deadline), "received %d of %d", len(got), n)
		mvs, _ := sc.Receive(waitContext(t, patience), 16, invisible)
		for _, mv := range mvs {
			id := mv.GetProperties()[idProperty]
			require.NotContains(t, got, id, "delivered once before the crash")
			require.Equal(t, int32(1), mv.GetDeliveryAttempt())
			got[id] = mv
		}
	}
	acked, unacked := map[string]bool{}, map[string]bool{}
	var wantInflight []int64
	for i := range n {
		id := "m-" + strconv.Itoa(i)
		if i%2 == 0 {
			require.NoError(t, sc.Ack(waitContext(t, patience), got[id]), id)
			acked[id] = true
		} else {
			unacked[id] = true
			wantInflight = append(wantInflight, offsetOf[id])
		}
	}
	slices.Sort(wantInflight)
	storeDir := filepath.Join(dir, "store")
	deadline = time.Now().Add(patience)
	for saved := popInflight(t, storeDir, group, topic); !slices.Equal(saved, wantInflight); saved = popInflight(t, storeDir, group, topic) {
		require.True(t, time.Now().Before(deadline), "the saved POP state holds %v in flight, want the un-acked %v", saved, wantInflight)
		time.Sleep(50 * time.Millisecond) // NB: polling a file another process writes
	}
	require.NoError(t, sc.GracefulStop())

	require.NoError(t, br.cmd.Process.Kill()) // kill -9
	<-br.exited
	br, endpoint = startV5Broker(t, dir, bname)

	sc = newConsumer(endpoint)
	defer func() { _ = sc.GracefulStop() }()
	again := map[string]int32{}
	deadline = time.Now().Add(invisible + patience)
	for len(again) < len(unacked) {
		require.True(t, time.Now().Before(deadline), "after the restart, received %v of %d", slices.Sorted(maps.Keys(again)), len(unacked))
		mvs, _ := sc.Receive(waitContext(t, patience), 16, time.Minute)
		for _, mv := range mvs {
			id := mv.GetProperties()[idProperty]
			require.NotContains(t, acked, id, "an acked message came back")
			require.NotContains(t, again, id, "delivered once after the restart")
			again[id] = mv.GetDeliveryAttempt()
			require.Equal(t, "body of "+id, string(mv.GetBody()))
			require.NoError(t, sc.Ack(waitContext(t, patience), mv))
		}
	}
	for id := range unacked {
		require.Equal(t, int32(2), again[id], "%s: its second delivery", id)
	}
	mvs, _ := sc.Receive(waitContext(t, patience), 16, time.Minute)
	require.Empty(t, mvs, "nothing else: no acked message comes back")
}

// TestV5And4x_OneTopic: a 4.x producer and the official v5 producer send
// to one topic; a 4.x push consumer (its group) and the official v5
// SimpleConsumer (another group) each get every message of both once,
// with the same body, tag and keys.
func TestV5And4x_OneTopic(t *testing.T) {
	topic := name(t, "topic")
	createTopic(t, topic, 2)
	p4 := newProducer(t, "p4")
	p5 := newV5Producer(t, topic)
	in := consumeAll(t, topic)

	var want []string
	for i := range 4 {
		id := "from4x-" + strconv.Itoa(i)
		sendSync(t, p4, id, newMessage(topic, id, "TagA"))
		want = append(want, id)
	}
	for i := range 4 {
		id := "from5-" + strconv.Itoa(i)
		m := &rmq.Message{Topic: topic, Body: []byte("body of " + id)}
		m.SetTag("TagA")
		m.SetKeys("key-"+id, "alt-"+id)
		m.AddProperty(idProperty, id)
		_, err := p5.Send(waitContext(t, patience), m)
		require.NoError(t, err, id)
		want = append(want, id)
	}

	// The 4.x push consumer.
	got4 := map[string]int{}
	for _, d := range in.waitIDs(t, want) {
		id := d.msg.GetProperty(idProperty)
		got4[id]++
		require.Equal(t, "body of "+id, string(d.msg.Body))
		require.Equal(t, "TagA", d.msg.GetTags())
		require.Equal(t, "key-"+id+" alt-"+id, d.msg.GetKeys())
	}
	for _, d := range in.quiet() {
		require.Equal(t, 1, got4[d.msg.GetProperty(idProperty)], "4.x: %s once", d.msg.GetProperty(idProperty))
	}

	// The v5 SimpleConsumer.
	sc, err := rmq.NewSimpleConsumer(&rmq.Config{Endpoint: grpcEndpoint(t), ConsumerGroup: name(t, "group5"),
		Credentials: &credentials.SessionCredentials{AccessKey: adminCreds.AccessKey, AccessSecret: adminCreds.SecretKey}},
		rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	require.NoError(t, err)
	require.NoError(t, sc.Start())
	t.Cleanup(func() { _ = sc.GracefulStop() })
	got5 := map[string]bool{}
	deadline := time.Now().Add(patience)
	for len(got5) < len(want) {
		require.True(t, time.Now().Before(deadline), "v5: received %v", slices.Sorted(maps.Keys(got5)))
		mvs, _ := sc.Receive(waitContext(t, patience), 16, 30*time.Second)
		for _, mv := range mvs {
			id := mv.GetProperties()[idProperty]
			require.NotContains(t, got5, id, "v5: delivered once")
			got5[id] = true
			require.Equal(t, "body of "+id, string(mv.GetBody()))
			require.Equal(t, "TagA", *mv.GetTag())
			require.ElementsMatch(t, []string{"key-" + id, "alt-" + id}, mv.GetKeys())
			require.NoError(t, sc.Ack(waitContext(t, patience), mv))
		}
	}
	require.ElementsMatch(t, want, slices.Collect(maps.Keys(got5)))
	require.ElementsMatch(t, want, slices.Collect(maps.Keys(got4)))
}
