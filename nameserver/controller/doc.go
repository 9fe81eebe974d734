// Package controller is Sluice's controller mode (RocketMQ 5's RIP-44): a
// Raft group (github.com/hashicorp/raft, BoltDB log and stable store, file
// snapshots, all under one directory) whose replicated state machine holds,
// per broker group (broker name), its members (controller-assigned id,
// remoting and HA addresses), its master and master epoch, and its
// SyncStateSet (the in-sync replicas) with its own epoch.
//
// Commands applied through Raft: register (join or re-join a group; the
// first broker of a new group is its master), elect (a new master, or
// none), alter (replace the SyncStateSet, fenced by both epochs), announce
// (a new leader's remoting address, so followers can point at it). Each
// carries the leader's decision and the epochs it was made at; a decision
// made on stale state is refused, never applied twice.
//
// Liveness is not replicated: every node receives every broker's
// heartbeats (BROKER_HEARTBEAT 904), and only the leader acts. Its
// electLoop replaces a master silent for the master timeout (or whose
// connection closed) with the alive in-sync replica with the highest epoch
// and end offset; with none alive it clears the master and elects nobody,
// unless ElectUnclean allows the other members. A node gives every broker
// one master timeout of grace from its own start (brokers heartbeat to
// every node, so a new leader already knows who is alive).
//
// Leases (Sluice, issue 40): a broker announces its lease as master with
// its heartbeats (leaseMillis); it stops acknowledging once no leader
// answered a heartbeat it sent within the lease. The leader replaces a
// master whose connection closed or that fell silent only once that lease
// plus Config.LeaseMargin ran out since the last heartbeat it heard, and
// since it began to lead (a heartbeat the previous leader answered may not
// have reached it), so two masters never acknowledge at once; a master
// that resigns (a heartbeat with resign: it has stopped taking sends, a
// graceful stop) is replaced at once. A broker that announces no lease (a
// Java broker) is replaced when its connection closes, as in Java.
//
// Role changes are pushed (NOTIFY_BROKER_ROLE_CHANGED 1008, oneway) to each
// member over the connection it heartbeats on, by the leader, for every
// change committed (whoever proposed it and whatever its proposer heard),
// and for every group when a node becomes leader. Every heartbeat answer
// carries the group's role too, with its SyncStateSet as body (as
// GET_REPLICA_INFO's), so a lost notice is made up within one heartbeat.
//
// Server is the remoting front (RocketMQ 5's codes and header names); it
// runs alone (mqcontroller) or on the nameserver's remoting server
// (mqnamesrv --controller). Client is what a broker and mqadmin call.
//
// A broker in controller mode (the broker side, not in this package):
//
//  1. NewClient with the controllers' addresses and an OnRoleChange
//     callback; Register with its cluster, name, remoting and HA addresses
//     and the id it registered with before (NoMaster the first time; the
//     controller reuses the id of a known address). Keep the returned
//     BrokerID: controller ids are 1, 2, …; a master registers with the
//     nameservers as id 0, a slave as its controller id.
//  2. Heartbeat every master_timeout/3 or faster, to each controller on
//     its own (HeartbeatTo: one that hangs delays no other), with its last
//     master epoch, commitlog end offset (the election prefers the
//     highest) and lease. Each answer carries the group's role and
//     SyncStateSet, so a lost notice is made up within one heartbeat; an
//     answer from the leader renews the lease from when the heartbeat was
//     sent, and a master whose lease ran out stops acknowledging.
//  3. On a role with MasterID == its BrokerID: become master in
//     MasterEpoch; otherwise replicate from MasterHAAddr, refusing a
//     master of a lower epoch.
//  4. As master, AlterSyncStateSet(name, id, epoch, set, setEpoch) when a
//     replica falls behind or catches up, acknowledging against both sets
//     until it learns the outcome; a FENCED_MASTER_EPOCH answer means it
//     was deposed, FENCED_SYNC_STATE_SET_EPOCH that it must read the set
//     again (ReplicaInfo).
//  5. Stopping, a master first stops taking sends and answers those it
//     holds, then calls Resign, so that another is elected at once.
//
// Security: whoever calls a controller decides what every replica keeps.
// The front runs behind its remoting server's ACL (every controller code
// needs an admin account: internal/acl) and TLS; the Raft transport runs
// over mutually verified TLS with Config.RaftTLS (RaftTLS builds it from
// controller.raft_tls); a registration naming the id of a member at
// another address is refused while that member is alive, and from any
// account but the one it registered with (Member.Account). Brokers refuse
// on their side any automatic cut below what their group acknowledged.
//
// Goroutines, each owned by Node (started by Open, waited for by Close):
//
//	leaderLoop  leadership changes: barrier, announce, serve
//	electLoop   the leader's master checks: ticker and kicks
//	notifyLoop  role change notices to brokers
//
// plus hashicorp/raft's own, stopped by Shutdown, and the transport's,
// whose connections the stream closes.
package controller
