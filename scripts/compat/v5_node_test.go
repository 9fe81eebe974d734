package compat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
)

// The RocketMQ 5 Node.js SDK (npm rocketmq-client-nodejs, exactly 1.0.8,
// unmodified) against the broker's gRPC port. The SDK runs in node under
// scripts/compat/node/driver.mjs, which takes one JSON request a line
// (start a producer or a SimpleConsumer, send, receive, ack, ...) and
// answers each; these tests drive it and check what it saw, with the
// official 4.x Go client on the other side where that proves more.

// nodeSDKVersion is the SDK version the tests run (package.json pins it).
const nodeSDKVersion = "1.0.8"

// nodeInstall is how to install what these tests need.
const nodeInstall = "bash scripts/compat/node/install.sh (apt-get install nodejs npm; npm ci in scripts/compat/node)"

// nodeBinary is node's path, once the SDK is installed under node/; when
// either is missing the test fails under CI=true and is skipped elsewhere.
func nodeBinary(t *testing.T) string {
	t.Helper()
	missing := func(what string) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf("the Node.js SDK tests need %s: run %s", what, nodeInstall)
		}
		t.Skipf("%s is missing: run %s", what, nodeInstall)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node")
	}
	data, err := os.ReadFile(filepath.Join("node", "node_modules", "rocketmq-client-nodejs", "package.json"))
	if err != nil {
		missing("the npm package rocketmq-client-nodejs " + nodeSDKVersion)
	}
	var pkg struct{ Version string }
	require.NoError(t, json.Unmarshal(data, &pkg))
	if pkg.Version != nodeSDKVersion {
		missing(fmt.Sprintf("rocketmq-client-nodejs %s (node_modules has %s)", nodeSDKVersion, pkg.Version))
	}
	return node
}

// nodeDriver is one running driver.mjs.
type nodeDriver struct {
	t       *testing.T
	stdin   io.WriteCloser
	answers chan nodeAnswer
	stopped chan struct{} // closed at cleanup: answers nobody waits for are dropped
	exited  chan struct{}
	waitErr error
	mu      sync.Mutex
	stderr  bytes.Buffer
	nextID  int
}

type nodeAnswer struct {
	ID     int             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *nodeError      `json:"error"`
}

// nodeError is an error the SDK raised: its exception name, the v5 status
// code (or, for a call that failed in transport, the gRPC one), and its
// message with its causes.
type nodeError struct {
	Name    string `json:"name"`
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *nodeError) Error() string { return fmt.Sprintf("%s (code %d): %s", e.Name, e.Code, e.Message) }

// nodeTimeout bounds a driver's whole life: a safety net for a hung run.
const nodeTimeout = 3 * time.Minute

// startNode starts a driver speaking to the broker's gRPC port with the
// admin account (over TLS, trusting the broker's self-signed certificate,
// when the suite runs with SLUICE_COMPAT_TLS=1). env adds or overrides
// variables. It is stopped at cleanup.
func startNode(t *testing.T, env ...string) *nodeDriver {
	t.Helper()
	node := nodeBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	cmd := exec.CommandContext(ctx, node, "driver.mjs")
	cmd.Dir = "node"
	cmd.Env = append(os.Environ(),
		"HOME="+t.TempDir(), // NB: nothing of the SDK's goes to the real ~/logs
		"SLUICE_V5_ENDPOINT="+grpcEndpoint(t),
		"SLUICE_V5_ACCESS_KEY="+adminCreds.AccessKey,
		"SLUICE_V5_SECRET_KEY="+adminCreds.SecretKey)
	if overTLS {
		cmd.Env = append(cmd.Env, "SLUICE_V5_TLS=1", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH="+brokerCert(t))
	}
	cmd.Env = append(cmd.Env, env...)
	d := &nodeDriver{t: t, answers: make(chan nodeAnswer, 1), stopped: make(chan struct{}), exited: make(chan struct{})}
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = lockedWriter{&d.mu, &d.stderr}
	setParentDeathSignal(cmd)
	require.NoError(t, cmd.Start())
	d.stdin = stdin
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var a nodeAnswer
			if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
				a = nodeAnswer{ID: -1, Error: &nodeError{Name: "driver", Message: "not an answer: " + sc.Text()}}
			}
			select {
			case d.answers <- a:
			case <-d.stopped:
			}
		}
		d.waitErr = cmd.Wait()
		cancel()
		close(d.exited)
	}()
	t.Cleanup(func() {
		close(d.stopped)
		_ = d.stdin.Close() // NB: the driver shuts its clients down and exits
		select {
		case <-d.exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-d.exited
		}
		if t.Failed() {
			t.Logf("node driver's stderr:\n%s", d.log())
		}
	})
	return d
}

// brokerCert is the broker's self-signed certificate (kept under its
// store: the suite's servers run without --tls-cert).
func brokerCert(t *testing.T) string {
	t.Helper()
	path := filepath.Join(filepath.Dir(brokerLog), "store", "tls", "self-signed.crt")
	_, err := os.Stat(path)
	require.NoError(t, err, "the broker's self-signed certificate")
	return path
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (d *nodeDriver) log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stderr.String()
}

// call sends the request op with args and decodes its result into out
// (when not nil). An error the SDK raised is a *nodeError; a driver that
// does not answer within patience fails the test.
func (d *nodeDriver) call(op string, args map[string]any, out any) error {
	d.t.Helper()
	d.nextID++
	req := map[string]any{"id": d.nextID, "op": op}
	for k, v := range args {
		req[k] = v
	}
	line, err := json.Marshal(req)
	require.NoError(d.t, err)
	_, err = d.stdin.Write(append(line, '\n'))
	require.NoError(d.t, err, "writing to the node driver (stderr: %s)", d.log())
	select {
	case a := <-d.answers:
		require.Equal(d.t, d.nextID, a.ID, "answer to %s", op)
		if a.Error != nil {
			return a.Error
		}
		if out != nil {
			require.NoError(d.t, json.Unmarshal(a.Result, out), "result of %s: %s", op, a.Result)
		}
		return nil
	case <-d.exited:
		d.t.Fatalf("the node driver exited during %s: %v\n%s", op, d.waitErr, d.log())
	case <-time.After(patience):
		d.t.Fatalf("the node driver did not answer %s within %v\n%s", op, patience, d.log())
	}
	return nil
}

// requireQuiet checks that the SDK logged no warning and no error so far
// (a failed heartbeat, a telemetry stream the broker broke, a message it
// could not decode, ...).
func (d *nodeDriver) requireQuiet() {
	d.t.Helper()
	for _, line := range strings.Split(d.log(), "\n") {
		require.NotRegexp(d.t, `\[sdk (warn|error)\]`, line, "the SDK's log")
	}
}

// must is call that fails the test on an SDK error.
func (d *nodeDriver) must(op string, args map[string]any, out any) {
	d.t.Helper()
	require.NoError(d.t, d.call(op, args, out), "node %s", op)
}

// nodeReceipt is a producer's SendReceipt.
type nodeReceipt struct {
	MessageID     string `json:"messageId"`
	Offset        int64  `json:"offset"`
	TransactionID string `json:"transactionId"`
}

// nodeMessage is a SimpleConsumer's MessageView; ref names it for ack and
// changeInvisibleDuration.
type nodeMessage struct {
	Ref             string            `json:"ref"`
	MessageID       string            `json:"messageId"`
	Topic           string            `json:"topic"`
	Body            string            `json:"body"`
	Corrupted       bool              `json:"corrupted"`
	Tag             string            `json:"tag"`
	Keys            []string          `json:"keys"`
	Properties      map[string]string `json:"properties"`
	MessageGroup    string            `json:"messageGroup"`
	DeliveryTimeMs  int64             `json:"deliveryTimestampMs"`
	BornTimeMs      int64             `json:"bornTimestampMs"`
	DeliveryAttempt int               `json:"deliveryAttempt"`
	Offset          int64             `json:"offset"`
	Endpoints       string            `json:"endpoints"`
}

func (m nodeMessage) id() string { return m.Properties[idProperty] }

// receiveUntil receives (batches of up to 32, invisible for inv) until
// done holds for all received so far, failing after patience.
func (d *nodeDriver) receiveUntil(consumer string, inv time.Duration, what string, done func([]nodeMessage) bool) []nodeMessage {
	d.t.Helper()
	var got []nodeMessage
	deadline := time.Now().Add(patience)
	for !done(got) {
		require.True(d.t, time.Now().Before(deadline), "waiting for %s; got %d", what, len(got))
		var batch []nodeMessage
		d.must("receive", map[string]any{"client": consumer, "max": 32, "invisibleMs": inv.Milliseconds()}, &batch)
		got = append(got, batch...)
	}
	return got
}

// TestV5Node_ProducerNormalFIFODelay: the Node producer (signed with the
// admin account, over TLS when the suite is) sends normal, FIFO (two
// interleaved message groups) and delayed messages; a 4.x push consumer
// receives each once with the SDK's message id as its id and what the SDK
// set (body, tag, keys, properties), at the offset of the SDK's receipt;
// each group's messages on one queue in send order; the delayed one not
// before its time.
func TestV5Node_ProducerNormalFIFODelay(t *testing.T) {
	t.Parallel()
	topic := name(t, "topic")
	createTopic(t, topic, 4)
	in := consumeAll(t, topic)
	d := startNode(t)
	d.must("producer", map[string]any{"name": "p", "topics": []string{topic}}, nil)

	receipts := map[string]nodeReceipt{}
	send := func(id string, extra map[string]any) {
		t.Helper()
		args := map[string]any{"client": "p", "topic": topic, "body": "body of " + id, "tag": "TagA",
			"keys":       []string{"key-" + id, "alt-" + id},
			"properties": map[string]string{idProperty: id, "compat-note": "héllo, wörld = ✓"}}
		for k, v := range extra {
			args[k] = v
		}
		var r nodeReceipt
		d.must("send", args, &r)
		require.NotEmpty(t, r.MessageID, id)
		receipts[id] = r
	}
	var want []string
	for i := range 4 {
		id := "normal-" + strconv.Itoa(i)
		send(id, nil)
		want = append(want, id)
	}
	groups := map[string][]string{}
	for i := range 5 {
		for _, g := range []string{"order-7", "order-8"} {
			id := g + "-" + strconv.Itoa(i)
			send(id, map[string]any{"messageGroup": g})
			groups[g] = append(groups[g], id)
			want = append(want, id)
		}
	}
	deliverAt := time.Now().Add(2 * time.Second)
	send("delay-0", map[string]any{"deliveryTimestampMs": deliverAt.UnixMilli()})
	want = append(want, "delay-0")

	got := in.waitIDs(t, want)
	byID := map[string][]delivery{}
	for _, dl := range got {
		id := dl.msg.GetProperty(idProperty)
		byID[id] = append(byID[id], dl)
	}
	for _, id := range want {
		require.Len(t, byID[id], 1, "%s delivered once", id)
		m := byID[id][0].msg
		require.Equal(t, receipts[id].MessageID, m.MsgId, "%s: the 4.x id is the SDK's message id", id)
		require.Equal(t, "body of "+id, string(m.Body), id)
		require.Equal(t, "TagA", m.GetTags(), id)
		require.Equal(t, "key-"+id+" alt-"+id, m.GetKeys(), id)
		require.Equal(t, "héllo, wörld = ✓", m.GetProperty("compat-note"), id)
		if id != "delay-0" {
			require.Equal(t, receipts[id].Offset, m.QueueOffset, "%s: the receipt's offset", id)
		}
	}
	for g, ids := range groups {
		q := byID[ids[0]][0].msg.Queue.QueueId
		for i, id := range ids {
			m := byID[id][0].msg
			require.Equal(t, q, m.Queue.QueueId, "%s: group %s, one queue", id, g)
			if i > 0 {
				require.Greater(t, m.QueueOffset, byID[ids[i-1]][0].msg.QueueOffset, "%s after %s", id, ids[i-1])
			}
		}
	}
	// NB: a correctness bound, not a speed one: never a second early.
	require.True(t, byID["delay-0"][0].at.After(deliverAt.Add(-time.Second)),
		"delivered at %s, due at %s", byID["delay-0"][0].at, deliverAt)
	d.requireQuiet()
}

// TestV5Node_SimpleConsumer: messages a 4.x producer sent are received by
// the Node SimpleConsumer with what the producer set and a body digest the
// SDK verifies; a TagB message the subscription (TagA) does not take never
// comes. Of four received (two for 10 s, two for 30 s): the acked ones do
// not come back, the un-acked 10 s one comes back after its invisible time
// with delivery attempt 2, and the 30 s one whose invisible time
// changeInvisibleDuration set to 10 s comes back before its first 30 s are
// over; their new handles ack them, an acked handle is refused
// (INVALID_RECEIPT_HANDLE) and nothing is left.
func TestV5Node_SimpleConsumer(t *testing.T) {
	t.Parallel()
	topic := name(t, "topic")
	createTopic(t, topic, 1) // NB: one queue: received in send order
	p := newProducer(t, "p")
	want := map[string]sent{}
	for i := range 5 {
		id := "m-" + strconv.Itoa(i)
		tag := "TagA"
		if i == 2 {
			id, tag = "skip", "TagB"
		}
		want[id] = sendSync(t, p, id, newMessage(topic, id, tag))
	}
	d := startNode(t)
	d.must("simpleConsumer", map[string]any{"name": "c", "group": name(t, "group"),
		"subscriptions": map[string]string{topic: "TagA"}, "awaitMs": 2000}, nil)

	// receive receives n messages invisible for inv, in receives of at
	// most the count still missing (a receive may bring fewer: a message
	// the filter skips takes its place).
	receive := func(n int, inv time.Duration) []nodeMessage {
		t.Helper()
		var got []nodeMessage
		deadline := time.Now().Add(patience)
		for len(got) < n {
			require.True(t, time.Now().Before(deadline), "waiting for %d messages; got %d", n, len(got))
			var batch []nodeMessage
			d.must("receive", map[string]any{"client": "c", "max": n - len(got), "invisibleMs": inv.Milliseconds()}, &batch)
			got = append(got, batch...)
		}
		return got
	}
	first := receive(2, 10*time.Second)
	secondAt := time.Now()
	second := receive(2, 30*time.Second)
	all := append(slices.Clone(first), second...)
	require.Len(t, all, 4, "4 TagA messages")
	for i, m := range all {
		id := "m-" + strconv.Itoa([]int{0, 1, 3, 4}[i])
		require.Equal(t, id, m.id(), "receive %d in queue order, TagB skipped", i)
		s := want[id]
		require.Equal(t, s.msgID, m.MessageID, id)
		require.Equal(t, topic, m.Topic, id)
		require.Equal(t, "body of "+id, m.Body, id)
		require.False(t, m.Corrupted, "%s: the body matches its digest", id)
		require.Equal(t, "TagA", m.Tag, id)
		require.Equal(t, []string{"key-" + id, "alt-" + id}, m.Keys, id)
		require.Equal(t, "héllo, wörld = ✓", m.Properties["compat-note"], id)
		require.Equal(t, 1, m.DeliveryAttempt, id)
		require.Equal(t, int64(s.queueOffset), m.Offset, id)
		require.Equal(t, grpcEndpoint(t), m.Endpoints, id)
		require.LessOrEqual(t, s.before.Add(-time.Millisecond).UnixMilli(), m.BornTimeMs, "%s: born at the send", id)
	}
	d.must("ack", map[string]any{"client": "c", "ref": all[0].Ref}, nil)
	d.must("ack", map[string]any{"client": "c", "ref": all[2].Ref}, nil)
	var changed struct{ HandleChanged bool }
	d.must("changeInvisibleDuration", map[string]any{"client": "c", "ref": all[3].Ref, "invisibleMs": 10000}, &changed)
	require.True(t, changed.HandleChanged, "changeInvisibleDuration gives a new receipt handle")

	again := d.receiveUntil("c", 30*time.Second, "m-1 and m-4 again", func(got []nodeMessage) bool { return len(got) >= 2 })
	back := time.Now()
	require.Len(t, again, 2, "only the un-acked messages come back")
	slices.SortFunc(again, func(a, b nodeMessage) int { return strings.Compare(a.id(), b.id()) })
	require.Equal(t, "m-1", again[0].id())
	require.Equal(t, "m-4", again[1].id())
	for _, m := range again {
		require.Equal(t, 2, m.DeliveryAttempt, m.id())
		require.Equal(t, want[m.id()].msgID, m.MessageID, m.id())
		require.False(t, m.Corrupted, m.id())
	}
	// NB: a correctness bound: with its first invisible time (30 s) m-4
	// could not be back yet.
	require.Less(t, back.Sub(secondAt), 30*time.Second, "m-4 came back on its changed invisible time")

	d.must("changeInvisibleDuration", map[string]any{"client": "c", "ref": again[0].Ref, "invisibleMs": 60000}, &changed)
	require.True(t, changed.HandleChanged)
	d.must("ack", map[string]any{"client": "c", "ref": again[0].Ref}, nil)
	d.must("ack", map[string]any{"client": "c", "ref": again[1].Ref}, nil)
	var e *nodeError
	require.ErrorAs(t, d.call("ack", map[string]any{"client": "c", "ref": all[0].Ref}, nil), &e, "acking an acked message")
	require.Equal(t, int(v2.Code_INVALID_RECEIPT_HANDLE), e.Code, e.Message)
	var left []nodeMessage
	d.must("receive", map[string]any{"client": "c", "max": 32, "invisibleMs": 10000}, &left)
	require.Empty(t, left, "nothing left")
	d.requireQuiet()
}

// TestV5Node_RoundTrip: the Node producer's messages reach the Node
// SimpleConsumer whole: a 256 KiB body passes the SDK's digest check, the
// tag, keys and properties come through, a FIFO message carries its
// group, two interleaved groups arrive each in send order, a delayed
// message carries its delivery time and is not received before it.
func TestV5Node_RoundTrip(t *testing.T) {
	t.Parallel()
	topic := name(t, "topic")
	createTopic(t, topic, 4)
	d := startNode(t)
	d.must("producer", map[string]any{"name": "p", "topics": []string{topic}}, nil)
	d.must("simpleConsumer", map[string]any{"name": "c", "group": name(t, "group"),
		"subscriptions": map[string]string{topic: "*"}, "awaitMs": 2000}, nil)

	big := strings.Repeat("0123456789abcdef", 16<<10)
	ids := map[string]string{} // compat id → message id
	send := func(id, body string, extra map[string]any) {
		t.Helper()
		args := map[string]any{"client": "p", "topic": topic, "body": body, "tag": "T" + id,
			"keys": []string{"k-" + id}, "properties": map[string]string{idProperty: id}}
		for k, v := range extra {
			args[k] = v
		}
		var r nodeReceipt
		d.must("send", args, &r)
		ids[id] = r.MessageID
	}
	send("big", big, nil)
	var order []string
	for i := range 4 {
		for _, g := range []string{"ga", "gb"} {
			id := g + "-" + strconv.Itoa(i)
			send(id, "body of "+id, map[string]any{"messageGroup": g})
			order = append(order, id)
		}
	}
	deliverAt := time.Now().Add(2 * time.Second)
	send("delayed", "body of delayed", map[string]any{"deliveryTimestampMs": deliverAt.UnixMilli()})

	var delayedAt time.Time
	got := d.receiveUntil("c", 30*time.Second, "10 messages", func(got []nodeMessage) bool {
		if delayedAt.IsZero() && slices.ContainsFunc(got, func(m nodeMessage) bool { return m.id() == "delayed" }) {
			delayedAt = time.Now()
		}
		return len(got) >= 10
	})
	require.Len(t, got, 10)
	byID := map[string]nodeMessage{}
	seq := map[string][]string{}
	for _, m := range got {
		require.NotContains(t, byID, m.id(), "received once")
		byID[m.id()] = m
		require.Equal(t, ids[m.id()], m.MessageID, m.id())
		require.False(t, m.Corrupted, "%s: the body matches its digest", m.id())
		require.Equal(t, "T"+m.id(), m.Tag)
		require.Equal(t, []string{"k-" + m.id()}, m.Keys)
		if m.MessageGroup != "" {
			seq[m.MessageGroup] = append(seq[m.MessageGroup], m.id())
		}
	}
	require.Equal(t, big, byID["big"].Body)
	require.Equal(t, "body of delayed", byID["delayed"].Body)
	require.Equal(t, deliverAt.UnixMilli(), byID["delayed"].DeliveryTimeMs, "the delayed message's delivery time")
	require.True(t, delayedAt.After(deliverAt.Add(-time.Second)), "received at %s, due at %s", delayedAt, deliverAt)
	for _, g := range []string{"ga", "gb"} {
		var sentOrder []string
		for _, id := range order {
			if strings.HasPrefix(id, g) {
				sentOrder = append(sentOrder, id)
			}
		}
		require.Equal(t, sentOrder, seq[g], "group %s in send order", g)
	}
	for _, m := range got {
		d.must("ack", map[string]any{"client": "c", "ref": m.Ref}, nil)
	}
	d.requireQuiet()
}

// TestV5Node_ACL: the SDK's sessionCredentials against the broker's ACL:
// an account with SUB only starts a producer but its send is refused
// FORBIDDEN, naming the key, the topic and PUB and never the secret,
// while its SimpleConsumer receives what the admin account sent; a wrong
// secret and no credentials are refused UNAUTHORIZED at start.
func TestV5Node_ACL(t *testing.T) {
	t.Parallel()
	topic := name(t, "topic")
	createTopic(t, topic, 2)
	d := startNode(t)
	d.must("producer", map[string]any{"name": "admin", "topics": []string{topic}}, nil)
	var r nodeReceipt
	d.must("send", map[string]any{"client": "admin", "topic": topic, "body": "for sub",
		"properties": map[string]string{idProperty: "a1"}}, &r)

	sub := map[string]any{"accessKey": subCreds.AccessKey, "secretKey": subCreds.SecretKey}
	with := func(base map[string]any, kv ...any) map[string]any {
		out := map[string]any{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	d.must("producer", with(sub, "name", "sub", "topics", []string{topic}, "maxAttempts", 1), nil)
	var e *nodeError
	require.ErrorAs(t, d.call("send", map[string]any{"client": "sub", "topic": topic, "body": "x"}, nil), &e)
	require.Equal(t, int(v2.Code_FORBIDDEN), e.Code, e.Message)
	require.Equal(t, "ForbiddenException", e.Name)
	require.Contains(t, e.Message, subCreds.AccessKey)
	require.Contains(t, e.Message, topic)
	require.Contains(t, e.Message, "PUB")
	require.NotContains(t, e.Message, subCreds.SecretKey)

	d.must("simpleConsumer", with(sub, "name", "subc", "group", name(t, "group"),
		"subscriptions", map[string]string{topic: "*"}), nil)
	got := d.receiveUntil("subc", 10*time.Second, "the admin's message", func(got []nodeMessage) bool { return len(got) >= 1 })
	require.Len(t, got, 1)
	require.Equal(t, r.MessageID, got[0].MessageID)
	d.must("ack", map[string]any{"client": "subc", "ref": got[0].Ref}, nil)

	for _, c := range []struct {
		who, reason string
		args        map[string]any
	}{
		{"wrong secret", "signature does not match", map[string]any{"accessKey": adminCreds.AccessKey, "secretKey": "not-the-secret"}},
		{"no credentials", "no authorization header", map[string]any{"accessKey": ""}},
	} {
		err := d.call("producer", with(c.args, "name", c.who, "topics", []string{topic}), nil)
		require.ErrorAs(t, err, &e, c.who)
		require.Equal(t, int(v2.Code_UNAUTHORIZED), e.Code, "%s: %s", c.who, e.Message)
		require.Equal(t, "UnauthorizedException", e.Name, c.who)
		require.Contains(t, e.Message, c.reason, c.who)
		require.NotContains(t, e.Message, "not-the-secret", c.who)
	}
}

// TestV5Node_TLS (with SLUICE_COMPAT_TLS=1, where every other Node test
// runs over TLS): the broker's enforcing port refuses the SDK in plaintext,
// and over TLS the SDK checks the certificate: without the broker's
// certificate among its roots it does not start.
func TestV5Node_TLS(t *testing.T) {
	if !overTLS {
		t.Skip("the TLS case runs in the suite's TLS pass (SLUICE_COMPAT_TLS=1, as scripts/test.sh runs it)")
	}
	t.Parallel()
	topic := name(t, "topic")
	createTopic(t, topic, 1)
	d := startNode(t)
	d.must("producer", map[string]any{"name": "tls", "topics": []string{topic}}, nil)
	var e *nodeError
	require.ErrorAs(t, d.call("producer", map[string]any{"name": "plain", "topics": []string{topic}, "tls": false}, nil), &e)
	require.Equal(t, 14, e.Code, "plaintext: gRPC UNAVAILABLE: %s", e.Message)

	// NB: an empty path: grpc-js trusts the system's roots only.
	untrusting := startNode(t, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH=")
	require.ErrorAs(t, untrusting.call("producer", map[string]any{"name": "untrusting", "topics": []string{topic}}, nil), &e)
	require.Equal(t, 14, e.Code, "untrusted: gRPC UNAVAILABLE: %s", e.Message)
	require.Contains(t, e.Message, "self-signed certificate")
}

// TestV5Node_Compressed4xBody: a 4.x producer compresses a body of 4 KiB
// or more (zlib, the compressed flag); the Node SimpleConsumer receives it
// as it was sent, with a digest that matches.
func TestV5Node_Compressed4xBody(t *testing.T) {
	t.Parallel()
	topic := name(t, "topic")
	createTopic(t, topic, 1)
	p := newProducer(t, "p")
	m := newMessage(topic, "big", "TagA")
	m.Body = []byte(strings.Repeat("a compressible body, ", 1<<10))
	s := sendSync(t, p, "big", m)
	d := startNode(t)
	d.must("simpleConsumer", map[string]any{"name": "c", "group": name(t, "group"),
		"subscriptions": map[string]string{topic: "*"}}, nil)
	got := d.receiveUntil("c", 10*time.Second, "the message", func(got []nodeMessage) bool { return len(got) >= 1 })
	require.Len(t, got, 1)
	require.Equal(t, s.msgID, got[0].MessageID)
	require.False(t, got[0].Corrupted, "the body matches its digest")
	require.Equal(t, strings.Repeat("a compressible body, ", 1<<10), got[0].Body, "the body as sent")
	d.must("ack", map[string]any{"client": "c", "ref": got[0].Ref}, nil)
	d.requireQuiet()
}

// TestV5Node_FIFOConsumer: for a group made orderly (mqadmin updateSubGroup
// -o true), the Node SimpleConsumer receives a message group's next
// message only once it acked the one before, while the other group of
// the topic keeps flowing; each group arrives in the Node producer's send
// order.
func TestV5Node_FIFOConsumer(t *testing.T) {
	t.Parallel()
	topic, group := name(t, "topic"), name(t, "group")
	createTopic(t, topic, 2)
	out, err := exec.Command(mqadmin, mqadminArgs("updateSubGroup", "-g", group, "-b", brokerAddr, "-o", "true")...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	d := startNode(t)
	d.must("producer", map[string]any{"name": "p", "topics": []string{topic}}, nil)
	for _, id := range []string{"A1", "B1", "A2", "B2", "A3"} {
		d.must("send", map[string]any{"client": "p", "topic": topic, "body": id, "messageGroup": id[:1],
			"properties": map[string]string{idProperty: id}}, nil)
	}
	d.must("simpleConsumer", map[string]any{"name": "c", "group": group,
		"subscriptions": map[string]string{topic: "*"}, "awaitMs": 1000}, nil)
	receive := func() []nodeMessage {
		t.Helper()
		var got []nodeMessage
		d.must("receive", map[string]any{"client": "c", "max": 32, "invisibleMs": 30000}, &got)
		slices.SortFunc(got, func(a, b nodeMessage) int { return strings.Compare(a.id(), b.id()) })
		return got
	}
	ids := func(ms []nodeMessage) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.id())
			require.Equal(t, m.id()[:1], m.MessageGroup, m.id())
		}
		return out
	}
	ack := func(m nodeMessage) { t.Helper(); d.must("ack", map[string]any{"client": "c", "ref": m.Ref}, nil) }

	heads := receive()
	require.Equal(t, []string{"A1", "B1"}, ids(heads), "each group's first message only")
	require.Empty(t, ids(receive()), "the next ones wait for the acks")
	ack(heads[1])
	got := receive()
	require.Equal(t, []string{"B2"}, ids(got), "B flows while A1 is not acked")
	ack(got[0])
	ack(heads[0])
	got = receive()
	require.Equal(t, []string{"A2"}, ids(got), "A2 once A1 is acked")
	ack(got[0])
	got = receive()
	require.Equal(t, []string{"A3"}, ids(got))
	ack(got[0])
	require.Empty(t, ids(receive()), "nothing left")
	d.requireQuiet()
}

// TestV5Node_SQL92: the Node SimpleConsumer subscribed with a SQL92
// expression receives exactly the messages whose properties match.
func TestV5Node_SQL92(t *testing.T) {
	t.Parallel()
	topic := name(t, "topic")
	createTopic(t, topic, 2)
	d := startNode(t)
	d.must("producer", map[string]any{"name": "p", "topics": []string{topic}}, nil)
	var want []string
	for i := range 6 {
		id := "m-" + strconv.Itoa(i)
		props := map[string]string{idProperty: id, "n": strconv.Itoa(i)}
		if i == 5 {
			delete(props, "n") // NB: no property: does not match
		}
		d.must("send", map[string]any{"client": "p", "topic": topic, "body": id, "tag": "T", "properties": props}, nil)
		if i >= 3 && i != 5 {
			want = append(want, id)
		}
	}
	d.must("simpleConsumer", map[string]any{"name": "c", "group": name(t, "group"),
		"subscriptions": map[string]any{topic: map[string]string{"sql": "n >= 3 AND TAGS = 'T'"}}, "awaitMs": 1000}, nil)
	got := d.receiveUntil("c", 30*time.Second, "the matching messages", func(got []nodeMessage) bool { return len(got) >= len(want) })
	var ids []string
	for _, m := range got {
		ids = append(ids, m.id())
		d.must("ack", map[string]any{"client": "c", "ref": m.Ref}, nil)
	}
	require.ElementsMatch(t, want, ids)
	var left []nodeMessage
	d.must("receive", map[string]any{"client": "c", "max": 32, "invisibleMs": 10000}, &left)
	require.Empty(t, left, "the others do not match")
	d.requireQuiet()
}

// TestV5Node_BadInput: what the SDK is refused comes back as its v5 code
// with the broker's reason: a topic that does not exist (NotFoundException
// TOPIC_NOT_FOUND at start), an invisible time under 10 s
// (ILLEGAL_INVISIBLE_TIME).
func TestV5Node_BadInput(t *testing.T) {
	t.Parallel()
	topic := name(t, "topic")
	createTopic(t, topic, 1)
	d := startNode(t)
	var e *nodeError
	require.ErrorAs(t, d.call("producer", map[string]any{"name": "p", "topics": []string{name(t, "missing")}}, nil), &e)
	require.Equal(t, int(v2.Code_TOPIC_NOT_FOUND), e.Code, e.Message)
	require.Equal(t, "NotFoundException", e.Name)
	require.Contains(t, e.Message, name(t, "missing")+" does not exist")

	d.must("simpleConsumer", map[string]any{"name": "c", "group": name(t, "group"),
		"subscriptions": map[string]string{topic: "*"}}, nil)
	require.ErrorAs(t, d.call("receive", map[string]any{"client": "c", "max": 1, "invisibleMs": 5000}, nil), &e)
	require.Equal(t, int(v2.Code_ILLEGAL_INVISIBLE_TIME), e.Code, e.Message)
	require.Equal(t, "BadRequestException", e.Name)
	require.Contains(t, e.Message, "5s")
}

// TestV5Node_Connections: the Node SDK's clients show in mqadmin's
// connection lists (as a Java proxy's do): the SimpleConsumer in
// consumerConnection of its group with its client id, NODE_JS and its
// subscription, the producer in producerConnection under its topic; a
// client that shut down (NotifyClientTermination) is gone from them.
func TestV5Node_Connections(t *testing.T) {
	t.Parallel()
	topic, group := name(t, "topic"), name(t, "group")
	createTopic(t, topic, 1)
	d := startNode(t)
	var p, c struct{ ClientID string }
	d.must("producer", map[string]any{"name": "p", "topics": []string{topic}}, &p)
	d.must("simpleConsumer", map[string]any{"name": "c", "group": group,
		"subscriptions": map[string]string{topic: "TagA || TagB"}}, &c)
	type conn struct {
		ClientID      string            `json:"clientId"`
		Language      string            `json:"language"`
		Subscriptions map[string]string `json:"subscriptions"`
	}
	list := func(args ...string) []conn {
		t.Helper()
		out, err := exec.Command(mqadmin, mqadminArgs(append([]string{"--json"}, args...)...)...).CombinedOutput()
		if err != nil {
			require.Contains(t, string(out), "has no live client", "mqadmin %v: %v", args, err)
			return nil
		}
		var l struct{ Connections []conn }
		require.NoError(t, json.Unmarshal(out, &l), "%s", out)
		return l.Connections
	}
	consumers := func() []conn { return list("consumerConnection", "-g", group) }
	producers := func() []conn { return list("producerConnection", "-g", topic, "-t", topic) }

	require.Equal(t, []conn{{ClientID: c.ClientID, Language: "NODE_JS", Subscriptions: map[string]string{topic: "TagA || TagB"}}}, consumers())
	require.Equal(t, []conn{{ClientID: p.ClientID, Language: "NODE_JS"}}, producers())
	d.must("shutdown", map[string]any{"client": "c"}, nil)
	d.must("shutdown", map[string]any{"client": "p"}, nil)
	require.Empty(t, consumers(), "the consumer is gone once it shut down")
	require.Empty(t, producers(), "the producer is gone once it shut down")
	d.requireQuiet()
}

// TestV5Node_DeadLetter: a message the Node SimpleConsumer of a group with
// retryMaxTimes 1 (max attempts 2) receives twice and never acks is not
// delivered a third time: it goes to %DLQ%group, where mqadmin
// consumeMessage reads it whole.
func TestV5Node_DeadLetter(t *testing.T) {
	t.Parallel()
	topic, group := name(t, "topic"), name(t, "group")
	createTopic(t, topic, 1)
	out, err := exec.Command(mqadmin, mqadminArgs("updateSubGroup", "-g", group, "-b", brokerAddr, "-r", "1")...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	p := newProducer(t, "p")
	s := sendSync(t, p, "dead", newMessage(topic, "dead", "TagA"))
	d := startNode(t)
	d.must("simpleConsumer", map[string]any{"name": "c", "group": group,
		"subscriptions": map[string]string{topic: "*"}}, nil)
	for attempt := 1; attempt <= 2; attempt++ {
		got := d.receiveUntil("c", 10*time.Second, "attempt "+strconv.Itoa(attempt), func(got []nodeMessage) bool { return len(got) >= 1 })
		require.Len(t, got, 1)
		require.Equal(t, s.msgID, got[0].MessageID)
		require.Equal(t, attempt, got[0].DeliveryAttempt)
	}

	// The receives after the second invisible time dead-letter it.
	type dlqMsg struct {
		MsgID      string            `json:"msgId"`
		Body       string            `json:"body"`
		Properties map[string]string `json:"properties"`
	}
	var dead []dlqMsg
	var again []nodeMessage
	deadline := time.Now().Add(patience)
	for len(dead) == 0 {
		require.True(t, time.Now().Before(deadline), "waiting for the dead letter")
		var batch []nodeMessage
		d.must("receive", map[string]any{"client": "c", "max": 32, "invisibleMs": 10000}, &batch)
		again = append(again, batch...)
		out, err := exec.Command(mqadmin, mqadminArgs("--json", "consumeMessage", "-t", "%DLQ%"+group)...).CombinedOutput()
		if err != nil {
			continue // NB: no dead-letter topic yet
		}
		var l struct{ Messages []dlqMsg }
		require.NoError(t, json.Unmarshal(out, &l), "%s", out)
		dead = l.Messages
	}
	require.Empty(t, again, "no third delivery")
	require.Len(t, dead, 1)
	require.Equal(t, s.msgID, dead[0].MsgID)
	require.Equal(t, "body of dead", dead[0].Body)
	require.Equal(t, "dead", dead[0].Properties[idProperty])
	d.requireQuiet()
}

// TestV5Node_MessageType: a topic made FIFO (mqadmin updateTopic -a
// +message.type=FIFO) takes the Node producer's FIFO messages, and the SDK
// itself refuses a NORMAL one from the route's accept_message_types.
func TestV5Node_MessageType(t *testing.T) {
	t.Parallel()
	topic := name(t, "topic")
	createTopic(t, topic, 2)
	out, err := exec.Command(mqadmin, mqadminArgs("updateTopic", "-t", topic, "-b", brokerAddr, "-r", "2", "-w", "2",
		"-a", "+message.type=FIFO")...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	d := startNode(t)
	d.must("producer", map[string]any{"name": "p", "topics": []string{topic}}, nil)
	d.must("send", map[string]any{"client": "p", "topic": topic, "body": "fifo", "messageGroup": "g"}, nil)
	var e *nodeError
	require.ErrorAs(t, d.call("send", map[string]any{"client": "p", "topic": topic, "body": "normal"}, nil), &e)
	require.Equal(t, "TypeError", e.Name)
	require.Contains(t, e.Message, "accept message types")
	d.requireQuiet()
}

// TestV5Node_PushConsumer: the Node PushConsumer (auto-renewed receives,
// issue 42's broker side) consumes what the Node producer sent, each
// message once when its listener succeeds; a message its listener fails
// is nacked (ChangeInvisibleDuration with the SDK's backoff) and consumed
// again with delivery attempt 2.
func TestV5Node_PushConsumer(t *testing.T) {
	t.Parallel()
	topic := name(t, "topic")
	createTopic(t, topic, 2)
	d := startNode(t)
	d.must("producer", map[string]any{"name": "p", "topics": []string{topic}}, nil)
	ids := map[string]string{}
	for _, id := range []string{"a", "b", "c"} {
		props := map[string]string{idProperty: id}
		if id == "b" {
			props["fail"] = "1" // NB: the listener fails its first delivery
		}
		var r nodeReceipt
		d.must("send", map[string]any{"client": "p", "topic": topic, "body": "body of " + id, "properties": props}, &r)
		ids[id] = r.MessageID
	}
	d.must("pushConsumer", map[string]any{"name": "c", "group": name(t, "group"),
		"subscriptions": map[string]string{topic: "*"}}, nil)
	var got []nodeMessage
	deadline := time.Now().Add(patience)
	for len(got) < 4 {
		require.True(t, time.Now().Before(deadline), "waiting for 4 consumptions; got %v", got)
		time.Sleep(100 * time.Millisecond) // NB: polling the driver for a condition, with a deadline
		d.must("pushed", map[string]any{"client": "c"}, &got)
	}
	attempts := map[string][]int{}
	for _, m := range got {
		require.Equal(t, ids[m.id()], m.MessageID, m.id())
		require.Equal(t, "body of "+m.id(), m.Body)
		require.False(t, m.Corrupted, m.id())
		attempts[m.id()] = append(attempts[m.id()], m.DeliveryAttempt)
	}
	require.Equal(t, map[string][]int{"a": {1}, "b": {1, 2}, "c": {1}}, attempts)
	d.requireQuiet()
}
