package client

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// testQueues returns n queues of topic "orders", the first half (rounded
// up) on broker-a, the rest on broker-b, sorted.
func testQueues(n int) []MessageQueue {
	var out []MessageQueue
	for i := range n {
		b, id := "broker-a", i
		if i >= (n+1)/2 {
			b, id = "broker-b", i-(n+1)/2
		}
		out = append(out, MessageQueue{Topic: "orders", BrokerName: b, QueueID: id})
	}
	return out
}

func testMembers(k int) []string {
	var out []string
	for i := range k {
		out = append(out, fmt.Sprintf("10.0.0.%d@%d", 1+i%3, 4000+i))
	}
	slices.Sort(out)
	return out
}

// owners returns, for each queue of mqs, the index in cids of the member
// that allocates it to itself, failing the test when a queue has no owner
// or two.
func owners(t *testing.T, s func(me string) AllocateStrategy, mqs []MessageQueue, cids []string) []int {
	t.Helper()
	out := make([]int, len(mqs))
	for i := range out {
		out[i] = -1
	}
	for m, cid := range cids {
		for _, q := range allocate(s(cid), cid, mqs, cids) {
			i := slices.Index(mqs, q)
			require.GreaterOrEqual(t, i, 0)
			require.Equal(t, -1, out[i], "%v allocated to members %d and %d", q, out[i], m)
			out[i] = m
		}
	}
	for i, o := range out {
		require.NotEqual(t, -1, o, "%v allocated to nobody", mqs[i])
	}
	return out
}

// same returns a strategy every member uses.
func same(s AllocateStrategy) func(string) AllocateStrategy {
	return func(string) AllocateStrategy { return s }
}

// TestAllocate_ExactlyOnce: with every strategy, 1 to 7 members and 1 to
// 64 queues, every queue has exactly one owner.
func TestAllocate_ExactlyOnce(t *testing.T) {
	for k := 1; k <= 7; k++ {
		cids := testMembers(k)
		for n := 1; n <= 64; n++ {
			mqs := testQueues(n)
			// Per-member configuration: member i is configured with the
			// queues j where j%k == i.
			config := func(me string) AllocateStrategy {
				i := slices.Index(cids, me)
				var qs []MessageQueue
				for j := i; j < n; j += k {
					qs = append(qs, mqs[j])
				}
				return AllocateByConfig(qs...)
			}
			for name, s := range map[string]func(string) AllocateStrategy{
				"averagely":          same(AllocateAveragely()),
				"circle":             same(AllocateAveragelyByCircle()),
				"consistent-hash-1":  same(AllocateByConsistentHash(1)),
				"consistent-hash-10": same(AllocateByConsistentHash(10)),
				"config":             config,
			} {
				t.Run(fmt.Sprintf("%s/members=%d/queues=%d", name, k, n), func(t *testing.T) {
					got := owners(t, s, mqs, cids)
					if name == "averagely" || name == "circle" {
						counts := make([]int, k)
						for _, o := range got {
							counts[o]++
						}
						require.LessOrEqual(t, slices.Max(counts)-slices.Min(counts), 1, "even shares: %v", counts)
					}
				})
			}
		}
	}
}

// TestAllocate_Layouts pins the two list strategies to RocketMQ's layouts.
func TestAllocate_Layouts(t *testing.T) {
	ids := func(mqs []MessageQueue) []int {
		out := []int{}
		for _, q := range mqs {
			out = append(out, q.QueueID)
		}
		return out
	}
	qs := func(n int) []MessageQueue {
		var out []MessageQueue
		for i := range n {
			out = append(out, MessageQueue{Topic: "t", BrokerName: "b", QueueID: i})
		}
		return out
	}
	avg, circle := AllocateAveragely(), AllocateAveragelyByCircle()
	cids := []string{"a", "b", "c"}
	require.Equal(t, []int{0, 1, 2}, ids(allocate(avg, "a", qs(8), cids)))
	require.Equal(t, []int{3, 4, 5}, ids(allocate(avg, "b", qs(8), cids)))
	require.Equal(t, []int{6, 7}, ids(allocate(avg, "c", qs(8), cids)))
	require.Equal(t, []int{0}, ids(allocate(avg, "a", qs(2), cids)))
	require.Equal(t, []int{1}, ids(allocate(avg, "b", qs(2), cids)))
	require.Empty(t, allocate(avg, "c", qs(2), cids))
	require.Empty(t, allocate(avg, "z", qs(2), cids))
	require.Equal(t, []int{0, 1, 2, 3}, ids(allocate(avg, "a", qs(4), []string{"a"})))
	require.Equal(t, []int{0, 3, 6}, ids(allocate(circle, "a", qs(8), cids)))
	require.Equal(t, []int{1, 4, 7}, ids(allocate(circle, "b", qs(8), cids)))
	require.Equal(t, []int{2, 5}, ids(allocate(circle, "c", qs(8), cids)))
	require.Empty(t, allocate(circle, "z", qs(8), cids))
}

// TestAllocateByConfig_KeepsRouteQueues: a configuration naming queues the
// route does not have (another topic, a queue id past the route's) or
// naming one twice allocates the route's queues it names, once each.
func TestAllocateByConfig_KeepsRouteQueues(t *testing.T) {
	mqs := testQueues(4) // broker-a 0,1; broker-b 0,1
	s := AllocateByConfig(
		MessageQueue{Topic: "orders", BrokerName: "broker-b", QueueID: 1},
		MessageQueue{Topic: "orders", BrokerName: "broker-a", QueueID: 0},
		MessageQueue{Topic: "orders", BrokerName: "broker-a", QueueID: 0},
		MessageQueue{Topic: "orders", BrokerName: "broker-a", QueueID: 7},
		MessageQueue{Topic: "other", BrokerName: "broker-a", QueueID: 1})
	require.Equal(t, []MessageQueue{mqs[0], mqs[3]}, allocate(s, "m", mqs, []string{"m", "n"}))
	require.Empty(t, allocate(s, "m", mqs, []string{"n"}), "not a member (yet): nothing")
}

// TestAllocate_OfficialGoClient: each strategy allocates as the official
// Go client (rocketmq-client-go v2) does. testdata/allocate_official.json
// holds the official client's allocations: members and queues as
// testMembers and testQueues make them, and the owner of each queue.
// scripts/compat's TestAllocate_Golden checks the file against the
// official client itself.
func TestAllocate_OfficialGoClient(t *testing.T) {
	strategies := map[string]AllocateStrategy{
		"averagely": AllocateAveragely(), "circle": AllocateAveragelyByCircle(),
		"consistent-hash-10": AllocateByConsistentHash(10), "consistent-hash-3": AllocateByConsistentHash(3),
	}
	var cases []struct {
		Strategy string   `json:"strategy"`
		Members  []string `json:"members"`
		Queues   int      `json:"queues"`
		Owners   []int    `json:"owners"`
	}
	b, err := os.ReadFile("testdata/allocate_official.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &cases))
	require.Len(t, cases, 140)
	for _, c := range cases {
		s, ok := strategies[c.Strategy]
		require.True(t, ok, "strategy %q", c.Strategy)
		require.Equal(t, testMembers(len(c.Members)), c.Members)
		require.Equal(t, c.Owners, owners(t, same(s), testQueues(c.Queues), c.Members),
			"%s, %d members, %d queues", c.Strategy, len(c.Members), c.Queues)
	}
}

// TestAllocateByConsistentHash_Stable: when a member joins, the only
// queues that move go to it; when one leaves, the only queues that move
// are its own. Over many groups, a join moves about 1/N of the queues.
func TestAllocateByConsistentHash_Stable(t *testing.T) {
	s := same(AllocateByConsistentHash(10))
	mqs := testQueues(64)
	var moved, share float64
	for k := 1; k <= 6; k++ {
		for g := range 20 {
			var cids []string
			for i := range k + 1 {
				cids = append(cids, fmt.Sprintf("192.168.%d.%d@%d", g, i, 100*g+i))
			}
			slices.Sort(cids)
			newcomer := cids[g%len(cids)]
			before := slices.DeleteFunc(slices.Clone(cids), func(c string) bool { return c == newcomer })
			was, is := owners(t, s, mqs, before), owners(t, s, mqs, cids)
			n := 0
			for i := range mqs {
				from, to := before[was[i]], cids[is[i]]
				if from != to {
					require.Equal(t, newcomer, to, "a join moves queues to the newcomer only")
					n++
				}
				if to == newcomer {
					require.NotEqual(t, from, to)
				}
			}
			// Read backwards, the same pair is the newcomer leaving: the
			// queues that move are exactly the leaver's.
			moved += float64(n) / float64(len(mqs))
			share += 1 / float64(k+1)
		}
	}
	t.Logf("a join moved %.1f%% of the queues on average; 1/N is %.1f%%", 100*moved/120, 100*share/120)
	require.Less(t, moved, 1.5*share, "a join moves about 1/N of the queues")
	require.Greater(t, moved, 0.5*share)
}

// TestWithAllocateStrategy_Invalid: a strategy that cannot allocate is
// refused.
func TestWithAllocateStrategy_Invalid(t *testing.T) {
	for _, s := range []AllocateStrategy{nil, AllocateByConsistentHash(0), AllocateByConsistentHash(-3)} {
		_, err := NewPushConsumer("g", WithNameServers("127.0.0.1:9876"), WithAllocateStrategy(s))
		require.ErrorIs(t, err, ErrInvalidOption, "%v", s)
		_, err = NewPullConsumer("g", WithNameServers("127.0.0.1:9876"), WithAllocateStrategy(s))
		require.ErrorIs(t, err, ErrInvalidOption, "%v", s)
	}
}
