// Package nameserver is Sluice's name server (RocketMQ's namesrv): brokers
// register their topics with it, producers, consumers and mqadmin ask it
// for routes. It keeps everything in memory; brokers re-register every
// 30 s, so a restarted nameserver is whole again within one period. Wire
// facts are from spec/rocketmq-4x.md §5.
//
// # Tables
//
// One routeTable (RocketMQ's RouteInfoManager, nsq's RegistrationDB) holds
// four maps behind one sync.RWMutex:
//
//	| table    | RocketMQ name    | key → value                                                     |
//	|----------|------------------|-----------------------------------------------------------------|
//	| topics   | topicQueueTable  | topic → broker name → QueueData{read/write queue nums, perm, …} |
//	| brokers  | brokerAddrTable  | broker name → cluster, broker id → "ip:port" (0 = master)       |
//	| clusters | clusterAddrTable | cluster → set of broker names                                   |
//	| live     | brokerLiveTable  | broker address → last update, data version, connection id, HA   |
//
// INVARIANT: an address appears under one broker name and one id at most;
// cluster sets and broker names match one to one; no topic is left without
// queue data; every queue data's broker name is in brokers.
//
// # Registration (REGISTER_BROKER, 103)
//
//  1. A non-zero bodyCrc32 must equal crc32.ChecksumIEEE(body) & 0x7FFFFFFF
//     (spec §6.2), else SYSTEM_ERROR "crc32 not match". Compressed bodies
//     are refused. The body is RegisterBrokerBody (TopicConfigSerializeWrapper
//     alone for senders below V3_0_11); an empty body registers the broker
//     and leaves its queue data alone.
//  2. The broker name joins its cluster (leaving the old one if it moved).
//     Its address is removed from any other id or broker name, then set
//     under its id.
//  3. For a master (id 0), when the data version differs from the one last
//     seen from that address or the registration is the first, the queue
//     data of every topic in the body is upserted. Topics missing from the
//     body are not removed: a broker drops a topic with
//     DELETE_TOPIC_IN_NAMESRV.
//  4. The live entry is refreshed: now, data version, HA address, and the
//     connection the request came over.
//  5. A slave is answered with its master's address and HA address.
//
// The response body is the ORDER_TOPIC_CONFIG KV namespace as
// {"table":{…}}, when it has keys.
//
// # Liveness
//
// A broker address leaves the tables when
//   - it sends UNREGISTER_BROKER (104) (found by address, not id, so a
//     stale unregister cannot remove a newer instance elsewhere);
//   - it has not registered for BrokerExpiry (120 s by default), checked
//     every ScanInterval by livenessLoop. An unchanged QUERY_DATA_VERSION
//     counts as a registration;
//   - the connection it registered over closes, for whatever reason: the
//     remoting server's OnDisconnect hook drops it at once.
//
// Removing an address drops its live entry and its id; a broker name left
// without addresses goes from its cluster (an empty cluster disappears)
// and its queue data goes from every topic (an empty topic disappears).
// A registration whose connection has already closed is not applied, so a
// request racing with its connection's close cannot resurrect a broker the
// disconnect cleanup just removed.
//
// # Requests
//
//	103 REGISTER_BROKER                     ext masterAddr, haServerAddr (slaves); KV table body
//	104 UNREGISTER_BROKER                   SUCCESS
//	105 GET_ROUTEINFO_BY_TOPIC              TopicRouteData, or TOPIC_NOT_EXIST (17) naming the topic
//	106 GET_BROKER_CLUSTER_INFO             ClusterInfo
//	206 GET_ALL_TOPIC_LIST_FROM_NAMESERVER  TopicList
//	216 DELETE_TOPIC_IN_NAMESRV             SUCCESS; optional clusterName limits it to that cluster
//	224 GET_TOPICS_BY_CLUSTER               TopicList
//	322 QUERY_DATA_VERSION                  ext changed; the known DataVersion as body
//	100 PUT_KV_CONFIG                       SUCCESS (in memory only)
//	101 GET_KV_CONFIG                       ext value, or QUERY_NOT_FOUND (22)
//	102 DELETE_KV_CONFIG                    SUCCESS
//	219 GET_KVLIST_BY_NAMESPACE             {"table":{…}}, or QUERY_NOT_FOUND (22)
//	205 WIPE_WRITE_PERM_OF_BROKER           ext wipeTopicCount (write bit cleared)
//	327 ADD_WRITE_PERM_OF_BROKER            ext addTopicCount (write bit set, other bits kept)
//
// Other codes are answered REQUEST_CODE_NOT_SUPPORTED (3) by remoting.
// Failures are response codes with a remark saying what was wrong:
// malformed headers and bodies get SYSTEM_ERROR (1) naming the field or
// the decode error; nothing a peer sends can panic a handler.
//
// Routes list queue and broker data sorted by broker name, with
// queueDatas never null and filterServerTable {}; orderTopicConf is left
// out (the Go client would build its queues from it). Bodies follow the
// request's codec: compact JSON for serialize types 0 and 1 (brokerAddrs
// as {"0":"ip:port"}, which the Go client's hand parser needs free of
// whitespace), msgpack for type 2, decoding into the same protocol structs.
//
// # Concurrency
//
// remoting runs each request's handler on its own goroutine; handlers
// only touch memory and never block. routeTable.mu is taken for writing by
// registration, removal, expiry, topic deletion and permission changes,
// for reading by queries, which copy what they return before the lock is
// released and encode outside it. kvStore.mu guards the KV store; it is
// never held with routeTable.mu. No lock is held while writing to a
// connection. routeTable.mu may call remoting.Conn.Closed (which takes
// Conn.mu, a leaf lock).
//
// Goroutines:
//
//	| goroutine                    | owner                  | stops on                      |
//	|------------------------------|------------------------|-------------------------------|
//	| livenessLoop                 | Server (Start / Close) | quit channel, closed by Close |
//	| handlers, OnDisconnect hooks | remoting.Server        | Close → remoting Shutdown     |
package nameserver
