package client

import (
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
)

// AllocateStrategy decides which of a topic's queues each member of a
// clustering group consumes (RocketMQ's AllocateMessageQueueStrategy).
// Every member runs it on the same input and takes its own share, so all
// members of a group must use the same strategy (and, for
// AllocateByConsistentHash, the same number of virtual nodes).
type AllocateStrategy interface {
	// Allocate returns the queues of mqs that client me consumes. mqs is
	// every readable queue of one topic, sorted by topic, broker name and
	// queue id; cids are the group's client ids, sorted, me among them.
	// Queues returned that are not in mqs are ignored.
	Allocate(me string, mqs []MessageQueue, cids []string) []MessageQueue
}

// WithAllocateStrategy sets how a clustering push consumer (and
// PullConsumer.Assignment) shares a topic's queues among the group's
// members (default AllocateAveragely). Broadcasting consumers take every
// queue whatever the strategy.
func WithAllocateStrategy(s AllocateStrategy) Option { return func(c *config) { c.allocate = s } }

// AllocateAveragely gives each member a contiguous run of the sorted
// queues, the first len(mqs)%len(cids) members one more (RocketMQ's
// AllocateMessageQueueAveragely, spec §8.2; the default).
func AllocateAveragely() AllocateStrategy { return averagely{} }

// AllocateAveragelyByCircle deals the sorted queues out to the members in
// turn: member i gets queues i, i+k, i+2k, … of k members (RocketMQ's
// AllocateMessageQueueAveragelyByCircle).
func AllocateAveragelyByCircle() AllocateStrategy { return byCircle{} }

// AllocateByConsistentHash places virtualNodes points per member on a hash
// ring and gives each queue to the member owning the first point after
// the queue's hash, so a member joining or leaving moves only the queues
// between its points and their neighbours' (about 1/N of them), each to
// or from that member. It is the official Go client's
// AllocateByConsistentHash, point for point (CRC-32 of the decimal point
// index followed by the client id; queues hashed by their Java
// toString()), so a group mixing Sluice and rocketmq-client-go consumers
// agrees on the assignment. The Java client hashes with MD5 instead: a
// group mixing Sluice and Java consumers should use another strategy.
// virtualNodes must be at least 1 (Java's default is 10).
func AllocateByConsistentHash(virtualNodes int) AllocateStrategy {
	return consistentHash{nodes: virtualNodes}
}

// AllocateByConfig makes this member consume exactly the given queues (of
// every topic it subscribes to) that the topic's route has, whatever the
// other members do (RocketMQ's AllocateMessageQueueByConfig). Covering
// every queue once is up to whoever configures the members. List the
// queues of the group's retry topic (RetryTopic) in some member's
// configuration too, or messages consumed with ConsumeRetryLater are
// never redelivered.
func AllocateByConfig(queues ...MessageQueue) AllocateStrategy {
	return byConfig{queues: slices.Clone(queues)}
}

// checkStrategy reports a strategy that cannot allocate.
func checkStrategy(s AllocateStrategy) error {
	switch s := s.(type) {
	case nil:
		return invalidOption("nil allocate strategy")
	case consistentHash:
		if s.nodes < 1 {
			return invalidOption("consistent hash with %d virtual nodes: at least 1", s.nodes)
		}
	}
	return nil
}

// allocate runs s and keeps, in mqs's order and once each, the queues it
// returned that are in mqs.
func allocate(s AllocateStrategy, me string, mqs []MessageQueue, cids []string) []MessageQueue {
	if len(mqs) == 0 || !slices.Contains(cids, me) {
		return nil
	}
	got := s.Allocate(me, mqs, cids)
	var out []MessageQueue
	for _, q := range mqs {
		if slices.Contains(got, q) {
			out = append(out, q)
		}
	}
	return out
}

type averagely struct{}

func (averagely) Allocate(me string, mqs []MessageQueue, cids []string) []MessageQueue {
	i := slices.Index(cids, me)
	n, k := len(mqs), len(cids)
	if i < 0 || n == 0 {
		return nil
	}
	mod := n % k
	size := n / k
	switch {
	case n <= k:
		size = 1
	case i < mod:
		size++
	}
	start := i*size + mod
	if i < mod {
		start = i * size
	}
	var out []MessageQueue
	for j := range min(size, n-start) {
		out = append(out, mqs[(start+j)%n])
	}
	return out
}

type byCircle struct{}

func (byCircle) Allocate(me string, mqs []MessageQueue, cids []string) []MessageQueue {
	i := slices.Index(cids, me)
	if i < 0 {
		return nil
	}
	var out []MessageQueue
	for j := i; j < len(mqs); j += len(cids) {
		out = append(out, mqs[j])
	}
	return out
}

type consistentHash struct{ nodes int }

func (h consistentHash) Allocate(me string, mqs []MessageQueue, cids []string) []MessageQueue {
	// NB: as stathat.com/c/consistent, which the official Go client uses:
	// a point that two members share goes to the later one (cids sorted),
	// and a queue belongs to the first point strictly above its hash.
	owner := make(map[uint32]string, len(cids)*h.nodes)
	for _, cid := range cids {
		for i := range h.nodes {
			owner[crc32.ChecksumIEEE([]byte(strconv.Itoa(i)+cid))] = cid
		}
	}
	points := make([]uint32, 0, len(owner))
	for p := range owner {
		points = append(points, p)
	}
	slices.Sort(points)
	var out []MessageQueue
	for _, q := range mqs {
		key := crc32.ChecksumIEEE([]byte(javaString(q)))
		j, found := slices.BinarySearch(points, key)
		if found {
			j++
		}
		if j == len(points) {
			j = 0
		}
		if owner[points[j]] == me {
			out = append(out, q)
		}
	}
	return out
}

// javaString is q as RocketMQ's MessageQueue.toString (Java and Go) writes
// it.
func javaString(q MessageQueue) string {
	return fmt.Sprintf("MessageQueue [topic=%s, brokerName=%s, queueId=%d]", q.Topic, q.BrokerName, q.QueueID)
}

type byConfig struct{ queues []MessageQueue }

func (c byConfig) Allocate(string, []MessageQueue, []string) []MessageQueue { return c.queues }
