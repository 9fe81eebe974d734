package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sluicemq/sluice/internal/protocol"
)

// topicRoute is a topic's route with the queue lists derived from it.
type topicRoute struct {
	data  protocol.TopicRouteData
	write []MessageQueue      // writable queues of brokers with a master, sorted; or an ordered topic's (see orderQueues)
	read  []MessageQueue      // readable queues, sorted
	addrs map[string]string   // broker name → master address
	all   map[string][]string // broker name → every address (master first)
}

func newTopicRoute(topic string, d protocol.TopicRouteData) *topicRoute {
	r := &topicRoute{data: d, addrs: make(map[string]string), all: make(map[string][]string)}
	for _, b := range d.BrokerDatas {
		ids := make([]int64, 0, len(b.BrokerAddrs))
		for id := range b.BrokerAddrs {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			r.all[b.BrokerName] = append(r.all[b.BrokerName], b.BrokerAddrs[id])
		}
		if a, ok := b.BrokerAddrs[0]; ok {
			r.addrs[b.BrokerName] = a
		}
	}
	ordered := orderQueues(topic, d.OrderTopicConf)
	r.write = ordered
	for _, q := range d.QueueDatas {
		if ordered == nil && q.Perm&protocol.PermWrite != 0 && r.addrs[q.BrokerName] != "" {
			for i := range int(q.WriteQueueNums) {
				r.write = append(r.write, MessageQueue{Topic: topic, BrokerName: q.BrokerName, QueueID: i})
			}
		}
		if q.Perm&protocol.PermRead != 0 {
			for i := range int(q.ReadQueueNums) {
				r.read = append(r.read, MessageQueue{Topic: topic, BrokerName: q.BrokerName, QueueID: i})
			}
		}
	}
	if ordered == nil {
		// NB: an ordered topic's queues stay in its config's order, as
		// the official client keeps them: equal keys hash to equal
		// queues in both.
		slices.SortFunc(r.write, compareQueues)
	}
	slices.SortFunc(r.read, compareQueues)
	return r
}

// orderQueues returns the queues an ordered topic's orderTopicConf
// ("brokerA:8;brokerB:8", from ORDER_TOPIC_CONFIG) lists, or nil when it
// lists none. As with the official client, they are the topic's write
// queues whatever the brokers' state: a sharding key keeps its queue while
// that queue's broker is down, and its sends fail meanwhile.
func orderQueues(topic, conf string) []MessageQueue {
	var out []MessageQueue
	for _, e := range strings.Split(conf, ";") {
		name, num, ok := strings.Cut(strings.TrimSpace(e), ":")
		n, err := strconv.Atoi(num)
		if !ok || name == "" || err != nil || n < 1 || n > 1024 {
			continue
		}
		for i := range n {
			out = append(out, MessageQueue{Topic: topic, BrokerName: name, QueueID: i})
		}
	}
	return out
}

// routeCache holds the routes of the topics a client uses, fetched from
// the name servers. Safe for concurrent use.
type routeCache struct {
	tr      *transport
	ns      []string
	timeout func(context.Context) (context.Context, context.CancelFunc)
	next    atomic.Uint32 // name server to ask first
	// changed, when set, is called after a refresh found a cached
	// route's readable queues or master addresses changed.
	changed func(topic string)

	mu      sync.RWMutex
	topics  map[string]*topicRoute // guarded by mu
	brokers map[string]string      // guarded by mu: broker name → master address, from every route seen
	// readers: broker name → its addresses in the last route that listed
	// it, master first (guarded by mu): where reads go (readAddr).
	readers  map[string][]string
	masterUp map[string]bool // guarded by mu: that route listed a master
	// onSlave is called when reads of a broker move to a slave because
	// the routes list no master for it, once per move (nil: not told).
	onSlave func(broker, addr string)
	slaved  map[string]string // guarded by mu: broker name → the slave reads went to last
}

func newRouteCache(tr *transport, ns []string, timeout func(context.Context) (context.Context, context.CancelFunc)) *routeCache {
	return &routeCache{tr: tr, ns: ns, timeout: timeout, topics: make(map[string]*topicRoute), brokers: make(map[string]string),
		readers: make(map[string][]string), masterUp: make(map[string]bool), slaved: make(map[string]string)}
}

// get returns the cached route of topic, fetching it if there is none.
func (c *routeCache) get(ctx context.Context, topic string) (*topicRoute, error) {
	c.mu.RLock()
	r := c.topics[topic]
	c.mu.RUnlock()
	if r != nil {
		return r, nil
	}
	return c.refresh(ctx, topic)
}

// cached returns the cached route of topic, or nil.
func (c *routeCache) cached(topic string) *topicRoute {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.topics[topic]
}

// fetch asks the name servers, in turn, for topic's route.
func (c *routeCache) fetch(ctx context.Context, topic string) (protocol.TopicRouteData, error) {
	return c.fetchWith(ctx, topic, false)
}

// fetchWith is fetch; withGrpc also asks a Sluice nameserver for the
// brokers' RocketMQ 5 endpoints (BrokerData.GrpcAddrs; others ignore it).
func (c *routeCache) fetchWith(ctx context.Context, topic string, withGrpc bool) (protocol.TopicRouteData, error) {
	var d protocol.TopicRouteData
	req := request{code: protocol.GetRouteInfoByTopic, ext: protocol.Ext(&protocol.GetRouteInfoRequestHeader{Topic: topic, WithGrpc: withGrpc})}
	var errs []error
	start := int(c.next.Load())
	for i := range c.ns {
		addr := c.ns[(start+i)%len(c.ns)]
		cctx, cancel := c.timeout(ctx)
		resp, err := c.tr.call(cctx, addr, req)
		cancel()
		if err == nil {
			err = decode(resp, &d)
		}
		if err == nil {
			return d, nil
		}
		var be *BrokerError
		if errors.As(err, &be) && be.Code == CodeTopicNotExist {
			return d, fmt.Errorf("%w %s: %w", ErrNoRoute, topic, err)
		}
		if errors.Is(err, ErrClosed) || ctx.Err() != nil {
			return d, err
		}
		errs = append(errs, err)
		c.next.Store(uint32((start + i + 1) % len(c.ns)))
	}
	return d, fmt.Errorf("%w %s: no name server answered: %w", ErrNoRoute, topic, errors.Join(errs...))
}

// refresh fetches topic's route and caches it. A failed fetch keeps the
// cached route, if any, and returns the error.
func (c *routeCache) refresh(ctx context.Context, topic string) (*topicRoute, error) {
	d, err := c.fetch(ctx, topic)
	if err != nil {
		return nil, err
	}
	r := newTopicRoute(topic, d)
	c.mu.Lock()
	old := c.topics[topic]
	c.topics[topic] = r
	for name, a := range r.addrs {
		c.brokers[name] = a
	}
	for name, as := range r.all {
		c.readers[name] = as
		c.masterUp[name] = r.addrs[name] != ""
	}
	c.mu.Unlock()
	if old != nil && c.changed != nil && (!slices.Equal(old.read, r.read) || !maps.Equal(old.addrs, r.addrs)) {
		c.changed(topic)
	}
	return r, nil
}

// refreshAll refreshes every cached topic; failures keep the old routes.
func (c *routeCache) refreshAll(ctx context.Context) {
	for _, t := range c.topicNames() {
		if ctx.Err() != nil {
			return
		}
		_, _ = c.refresh(ctx, t)
	}
}

func (c *routeCache) topicNames() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]string, 0, len(c.topics))
	for t := range c.topics {
		out = append(out, t)
	}
	return out
}

// brokerAddr returns the master address of a broker name from any route
// seen so far.
func (c *routeCache) brokerAddr(name string) (string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	a, ok := c.brokers[name]
	return a, ok
}

// readAddr returns where reads of a broker go (pulls, consumer offsets,
// queue offsets): its master, or, while the routes list it with no master
// (the master is down: the nameservers drop it at once), its slave of the
// lowest id, as RocketMQ's consumers do. Offsets committed there stay in
// the slave's memory; the consumer commits them to the master once it is
// back. slave says the address is a slave's.
func (c *routeCache) readAddr(name string) (addr string, slave, ok bool) {
	c.mu.RLock()
	as, up := c.readers[name], c.masterUp[name]
	master, known := c.brokers[name]
	noted, wasSlave := c.slaved[name]
	c.mu.RUnlock()
	switch {
	case len(as) == 0:
		return master, false, known
	case up:
		if wasSlave { // NB: the write lock only when reads move back, not per pull
			c.mu.Lock()
			delete(c.slaved, name)
			c.mu.Unlock()
		}
		return as[0], false, true // NB: ids sorted: the master's first
	}
	if noted != as[0] {
		c.mu.Lock()
		c.slaved[name] = as[0]
		c.mu.Unlock()
		if c.onSlave != nil {
			c.onSlave(name, as[0])
		}
	}
	return as[0], true, true
}

// addrsOf returns the addresses (masters, and slaves when all is set) of the
// brokers serving topics, deduplicated and sorted.
func (c *routeCache) addrsOf(topics []string, all bool) []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []string
	for _, t := range topics {
		r := c.topics[t]
		if r == nil {
			continue
		}
		if all {
			for _, as := range r.all {
				out = append(out, as...)
			}
			continue
		}
		for _, a := range r.addrs {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
