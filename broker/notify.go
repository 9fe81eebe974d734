package broker

import (
	"sync"

	"github.com/sluicemq/sluice/internal/protocol"
)

// notifier tells the members of consumer groups whose membership changed
// to rebalance now (NOTIFY_CONSUMER_IDS_CHANGED), from one goroutine the
// broker owns (notifyLoop). Heartbeats, unregistrations, closed
// connections and housekeeping only mark a group, so they never wait for a
// member's network, and a burst of changes to one group makes one round
// of notifications.
type notifier struct {
	mu      sync.Mutex
	pending map[string]struct{} // guarded by mu
	kick    chan struct{}
}

func newNotifier() *notifier {
	return &notifier{pending: map[string]struct{}{}, kick: make(chan struct{}, 1)}
}

// consumersChanged marks group g for notification.
func (b *Broker) consumersChanged(g string) {
	n := b.notify
	n.mu.Lock()
	n.pending[g] = struct{}{}
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// notifyLoop sends the marked groups' notifications until Close.
func (b *Broker) notifyLoop() {
	defer b.wg.Done()
	n := b.notify
	for {
		select {
		case <-b.quit:
			return
		case <-n.kick:
		}
		n.mu.Lock()
		groups := n.pending
		n.pending = map[string]struct{}{}
		n.mu.Unlock()
		for g := range groups {
			b.tellGroup(g, protocol.NotifyConsumerIDsChanged, &protocol.NotifyConsumerIDsChangedRequestHeader{ConsumerGroup: g}, nil)
		}
	}
}
