package client

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRoundRobin_RandomStart: each new round-robin selector starts at a
// random queue, as RocketMQ's clients do, so producers that send one
// message each (mqadmin sendMessage) do not all land on queue 0; each then
// takes the queues in turn.
func TestRoundRobin_RandomStart(t *testing.T) {
	queues := make([]MessageQueue, 8)
	for i := range queues {
		queues[i] = MessageQueue{Topic: "t", BrokerName: "b", QueueID: i}
	}
	starts := map[int]bool{}
	for range 64 {
		s := RoundRobinSelector()
		first := s.Select(&Message{}, queues).QueueID
		starts[first] = true
		for i := 1; i < 10; i++ {
			require.Equal(t, (first+i)%len(queues), s.Select(&Message{}, queues).QueueID)
		}
	}
	require.Greater(t, len(starts), 4, "64 selectors started at %v", starts)
}
