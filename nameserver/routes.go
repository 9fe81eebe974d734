package nameserver

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
)

// routeTable is the nameserver's registry (RocketMQ's RouteInfoManager, nsq's
// RegistrationDB): four maps behind one RWMutex. See doc.go for the tables
// and the rules that change them.
//
// INVARIANT: a broker address appears at most once in brokers (under one
// broker name and one id); every name in a cluster set has a brokers entry
// and vice versa; topics holds no empty inner map; every queue data's broker
// name has a brokers entry.
type routeTable struct {
	mu sync.RWMutex
	// topics: topic → broker name → queues of that broker (topicQueueTable).
	topics map[string]map[string]protocol.QueueData
	// brokers: broker name → cluster and addresses by id (brokerAddrTable).
	brokers map[string]*brokerEntry
	// clusters: cluster → broker names (clusterAddrTable).
	clusters map[string]map[string]struct{}
	// live: broker address → liveness (brokerLiveTable).
	live map[string]*liveBroker
}

// brokerEntry is one broker name: a master (id 0) and its slaves.
type brokerEntry struct {
	cluster string
	addrs   map[int64]string // broker id → "ip:port"
}

// liveBroker is what the nameserver knows about one registered address.
type liveBroker struct {
	brokerName   string
	lastUpdate   time.Time            // last REGISTER_BROKER (or unchanged QUERY_DATA_VERSION)
	dataVersion  protocol.DataVersion // of the last registration
	connID       uint64               // connection it registered over; 0 = none (tests)
	haServerAddr string
	grpcAddr     string // its RocketMQ 5 gRPC address; "" when it serves none
}

// registration is one REGISTER_BROKER, decoded and checked.
type registration struct {
	cluster, brokerName, brokerAddr, haServerAddr string
	grpcAddr                                      string
	brokerID                                      int64
	connID                                        uint64
	// topics is nil when the request had no body: the broker is registered
	// and its queue data left alone.
	topics      map[string]protocol.TopicConfig
	dataVersion protocol.DataVersion
}

// registerResult is what a registration did.
type registerResult struct {
	registered    bool   // false: the connection had closed, nothing changed
	first         bool   // the address is new to the table
	topicsUpdated int    // topics whose queue data was upserted
	masterAddr    string // slaves: the master's address, if registered
	haServerAddr  string // slaves: the master's HA address
}

// removedBroker names an address dropped from the table, for logs.
type removedBroker struct {
	addr, brokerName string
	idle             time.Duration // expiry only: time since the last registration
}

func newRouteTable() *routeTable {
	return &routeTable{
		topics:   make(map[string]map[string]protocol.QueueData),
		brokers:  make(map[string]*brokerEntry),
		clusters: make(map[string]map[string]struct{}),
		live:     make(map[string]*liveBroker),
	}
}

// register applies one registration (spec 5.2, steps 2–5). alive, if not
// nil, is called under the lock: when it reports false (the connection the
// request came over has closed, and its disconnect cleanup may already have
// run) nothing is registered, so a dead connection cannot leave a broker
// behind until expiry.
func (rt *routeTable) register(r registration, now time.Time, alive func() bool) registerResult {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if alive != nil && !alive() {
		return registerResult{}
	}
	res := registerResult{registered: true}

	// NB: an address re-registering under another broker name (a host
	// reused for a different broker) leaves its old name first, so the
	// address is in the table once.
	for name, e := range rt.brokers {
		if name != r.brokerName {
			rt.dropAddrFromEntryLocked(name, e, r.brokerAddr)
		}
	}

	e := rt.brokers[r.brokerName]
	if e == nil {
		e = &brokerEntry{cluster: r.cluster, addrs: make(map[int64]string)}
		rt.brokers[r.brokerName] = e
		res.first = true
	} else if e.cluster != r.cluster {
		rt.leaveClusterLocked(e.cluster, r.brokerName)
		e.cluster = r.cluster
	}
	set := rt.clusters[r.cluster]
	if set == nil {
		set = make(map[string]struct{})
		rt.clusters[r.cluster] = set
	}
	set[r.brokerName] = struct{}{}

	// A broker switching roles (slave → master) keeps its address under
	// its new id only.
	for id, addr := range e.addrs {
		if addr == r.brokerAddr && id != r.brokerID {
			delete(e.addrs, id)
		}
	}
	if _, had := e.addrs[r.brokerID]; !had {
		res.first = true
	}
	e.addrs[r.brokerID] = r.brokerAddr

	prev := rt.live[r.brokerAddr]
	if prev == nil {
		res.first = true
	}
	changed := prev == nil || prev.dataVersion != r.dataVersion
	if r.brokerID == 0 && r.topics != nil && (changed || res.first) {
		for _, tc := range r.topics {
			rt.upsertQueueDataLocked(r.brokerName, tc)
			res.topicsUpdated++
		}
	}
	rt.live[r.brokerAddr] = &liveBroker{
		brokerName:   r.brokerName,
		lastUpdate:   now,
		dataVersion:  r.dataVersion,
		connID:       r.connID,
		haServerAddr: r.haServerAddr,
		grpcAddr:     r.grpcAddr,
	}

	if r.brokerID != 0 {
		if master := e.addrs[0]; master != "" {
			if ml := rt.live[master]; ml != nil {
				res.masterAddr, res.haServerAddr = master, ml.haServerAddr
			}
		}
	}
	return res
}

// REQUIRES: mu held for writing.
func (rt *routeTable) upsertQueueDataLocked(brokerName string, tc protocol.TopicConfig) {
	byBroker := rt.topics[tc.TopicName]
	if byBroker == nil {
		byBroker = make(map[string]protocol.QueueData)
		rt.topics[tc.TopicName] = byBroker
	}
	byBroker[brokerName] = protocol.QueueData{
		BrokerName:     brokerName,
		ReadQueueNums:  tc.ReadQueueNums,
		WriteQueueNums: tc.WriteQueueNums,
		Perm:           tc.Perm,
		TopicSysFlag:   tc.TopicSysFlag,
	}
}

// unregister drops the broker at addr (spec 5.3). The broker is found by
// its address, not its id, so a late UNREGISTER_BROKER from an old instance
// cannot remove a new instance that registered the same id elsewhere.
func (rt *routeTable) unregister(addr string) (removedBroker, bool) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.removeAddrLocked(addr)
}

// expire drops every address whose last registration is older than expiry.
func (rt *routeTable) expire(now time.Time, expiry time.Duration) []removedBroker {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var out []removedBroker
	for addr, lb := range rt.live {
		if idle := now.Sub(lb.lastUpdate); idle > expiry {
			if rb, ok := rt.removeAddrLocked(addr); ok {
				rb.idle = idle
				out = append(out, rb)
			}
		}
	}
	return out
}

// dropConn drops every address registered over connection connID.
func (rt *routeTable) dropConn(connID uint64) []removedBroker {
	if connID == 0 {
		return nil
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var out []removedBroker
	for addr, lb := range rt.live {
		if lb.connID == connID {
			if rb, ok := rt.removeAddrLocked(addr); ok {
				out = append(out, rb)
			}
		}
	}
	return out
}

// removeAddrLocked removes addr from the live table and from its broker
// name; a name left without addresses goes with its queue data.
// REQUIRES: mu held for writing.
func (rt *routeTable) removeAddrLocked(addr string) (removedBroker, bool) {
	rb := removedBroker{addr: addr}
	found := false
	if lb := rt.live[addr]; lb != nil {
		rb.brokerName, found = lb.brokerName, true
		delete(rt.live, addr)
	}
	for name, e := range rt.brokers {
		if rt.dropAddrFromEntryLocked(name, e, addr) {
			rb.brokerName, found = name, true
		}
	}
	return rb, found
}

// dropAddrFromEntryLocked removes addr from e (named name) and, when e has
// no address left, the name itself with its queue data and cluster
// membership. It reports whether addr was in e.
// REQUIRES: mu held for writing.
func (rt *routeTable) dropAddrFromEntryLocked(name string, e *brokerEntry, addr string) bool {
	found := false
	for id, a := range e.addrs {
		if a == addr {
			delete(e.addrs, id)
			found = true
		}
	}
	if found && len(e.addrs) == 0 {
		delete(rt.brokers, name)
		rt.leaveClusterLocked(e.cluster, name)
		for topic, byBroker := range rt.topics {
			delete(byBroker, name)
			if len(byBroker) == 0 {
				delete(rt.topics, topic)
			}
		}
	}
	return found
}

// REQUIRES: mu held for writing.
func (rt *routeTable) leaveClusterLocked(cluster, name string) {
	if set := rt.clusters[cluster]; set != nil {
		delete(set, name)
		if len(set) == 0 {
			delete(rt.clusters, cluster)
		}
	}
}

// route returns the route of topic (spec 5.1), or false when no queue data
// of a known broker exists. Queue and broker data are sorted by broker
// name; QueueDatas is never nil, FilterServerTable is empty, not nil.
func (rt *routeTable) route(topic string) (protocol.TopicRouteData, bool) {
	return rt.routeWith(topic, false)
}

// routeWith is route; withGrpc adds each broker's gRPC address
// (BrokerData.GrpcAddrs) where it registered one.
func (rt *routeTable) routeWith(topic string, withGrpc bool) (protocol.TopicRouteData, bool) {
	rt.mu.RLock()
	defer rt.mu.RUnlock()
	byBroker := rt.topics[topic]
	rd := protocol.TopicRouteData{
		QueueDatas:        make([]protocol.QueueData, 0, len(byBroker)),
		BrokerDatas:       make([]protocol.BrokerData, 0, len(byBroker)),
		FilterServerTable: map[string][]string{},
	}
	for _, name := range slices.Sorted(maps.Keys(byBroker)) {
		rd.QueueDatas = append(rd.QueueDatas, byBroker[name])
		if e := rt.brokers[name]; e != nil {
			bd := e.data(name)
			if withGrpc {
				for id, addr := range e.addrs {
					if l := rt.live[addr]; l != nil && l.grpcAddr != "" {
						if bd.GrpcAddrs == nil {
							bd.GrpcAddrs = make(map[int64]string, len(e.addrs))
						}
						bd.GrpcAddrs[id] = l.grpcAddr
					}
				}
			}
			rd.BrokerDatas = append(rd.BrokerDatas, bd)
		}
	}
	return rd, len(rd.QueueDatas) > 0 && len(rd.BrokerDatas) > 0
}

func (e *brokerEntry) data(name string) protocol.BrokerData {
	return protocol.BrokerData{Cluster: e.cluster, BrokerName: name, BrokerAddrs: maps.Clone(e.addrs)}
}

// clusterInfo returns every broker name with its addresses, and every
// cluster with its sorted broker names.
func (rt *routeTable) clusterInfo() protocol.ClusterInfo {
	rt.mu.RLock()
	defer rt.mu.RUnlock()
	ci := protocol.ClusterInfo{
		BrokerAddrTable:  make(map[string]protocol.BrokerData, len(rt.brokers)),
		ClusterAddrTable: make(map[string][]string, len(rt.clusters)),
	}
	for name, e := range rt.brokers {
		ci.BrokerAddrTable[name] = e.data(name)
	}
	for cluster, set := range rt.clusters {
		ci.ClusterAddrTable[cluster] = slices.Sorted(maps.Keys(set))
	}
	return ci
}

// topicList returns every topic, sorted.
func (rt *routeTable) topicList() []string {
	rt.mu.RLock()
	defer rt.mu.RUnlock()
	out := slices.Sorted(maps.Keys(rt.topics))
	if out == nil {
		out = []string{}
	}
	return out
}

// topicsByCluster returns the sorted topics with queue data on at least one
// broker of cluster (empty for an unknown cluster).
func (rt *routeTable) topicsByCluster(cluster string) []string {
	rt.mu.RLock()
	defer rt.mu.RUnlock()
	out := []string{}
	set := rt.clusters[cluster]
	for topic, byBroker := range rt.topics {
		for name := range byBroker {
			if _, ok := set[name]; ok {
				out = append(out, topic)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// deleteTopic removes topic's queue data: all of it, or only that of the
// brokers of cluster when cluster is not empty. It reports how many broker
// names lost queue data.
func (rt *routeTable) deleteTopic(topic, cluster string) int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	byBroker := rt.topics[topic]
	n := 0
	for name := range byBroker {
		if cluster != "" {
			if _, ok := rt.clusters[cluster][name]; !ok {
				continue
			}
		}
		delete(byBroker, name)
		n++
	}
	if byBroker != nil && len(byBroker) == 0 {
		delete(rt.topics, topic)
	}
	return n
}

// setWritePerm clears (wipe) or sets the write permission bit of every
// queue data of brokerName and returns the number of topics it touched
// (WIPE_WRITE_PERM_OF_BROKER, ADD_WRITE_PERM_OF_BROKER). Other bits are
// kept: a topic that was read-only stays unreadable after a wipe and add.
func (rt *routeTable) setWritePerm(brokerName string, wipe bool) int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	n := 0
	for _, byBroker := range rt.topics {
		qd, ok := byBroker[brokerName]
		if !ok {
			continue
		}
		if wipe {
			qd.Perm &^= protocol.PermWrite
		} else {
			qd.Perm |= protocol.PermWrite
		}
		byBroker[brokerName] = qd
		n++
	}
	return n
}

// queryDataVersion compares dv with the data version last registered from
// addr (QUERY_DATA_VERSION). changed is true for an unknown address. When
// unchanged it refreshes the address's liveness, as a registration would.
// known reports whether the nameserver has a version for addr, returned in
// have.
func (rt *routeTable) queryDataVersion(addr string, dv protocol.DataVersion, now time.Time) (changed bool, have protocol.DataVersion, known bool) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	lb := rt.live[addr]
	if lb == nil {
		return true, protocol.DataVersion{}, false
	}
	if lb.dataVersion == dv {
		lb.lastUpdate = now
		return false, lb.dataVersion, true
	}
	return true, lb.dataVersion, true
}
