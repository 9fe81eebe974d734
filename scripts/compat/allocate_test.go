package compat

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/require"
)

// TestAllocate_Golden: the official client allocates queues as Sluice's
// client test file client/testdata/allocate_official.json says, so the
// file Sluice's TestAllocate_OfficialGoClient checks against is the
// official client's behaviour. Each case names a strategy, the group's
// members (sorted) and a queue count n: topic "orders", the first half of
// the queues (rounded up) on broker-a, the rest on broker-b; and the index
// of the member that owns each queue.
func TestAllocate_Golden(t *testing.T) {
	strategies := map[string]consumer.AllocateStrategy{
		"averagely": consumer.AllocateByAveragely, "circle": consumer.AllocateByAveragelyCircle,
		"consistent-hash-10": consumer.AllocateByConsistentHash(10), "consistent-hash-3": consumer.AllocateByConsistentHash(3),
	}
	var cases []struct {
		Strategy string   `json:"strategy"`
		Members  []string `json:"members"`
		Queues   int      `json:"queues"`
		Owners   []int    `json:"owners"`
	}
	b, err := os.ReadFile("../../client/testdata/allocate_official.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &cases))
	require.Len(t, cases, 140)
	for _, c := range cases {
		allocate, ok := strategies[c.Strategy]
		require.True(t, ok, "strategy %q", c.Strategy)
		var mqs []*primitive.MessageQueue
		for i := range c.Queues {
			b, id := "broker-a", i
			if i >= (c.Queues+1)/2 {
				b, id = "broker-b", i-(c.Queues+1)/2
			}
			mqs = append(mqs, &primitive.MessageQueue{Topic: "orders", BrokerName: b, QueueId: id})
		}
		got := make([]int, len(mqs))
		for i := range got {
			got[i] = -1
		}
		for m, cid := range c.Members {
			for _, q := range allocate("g", cid, mqs, c.Members) {
				for i, mq := range mqs {
					if mq == q {
						got[i] = m
					}
				}
			}
		}
		require.Equal(t, c.Owners, got, fmt.Sprintf("%s, %d members, %d queues", c.Strategy, len(c.Members), c.Queues))
	}
}
