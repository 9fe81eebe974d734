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
// unless ElectUnclean allows the other members. A new leader gives every
// broker one master timeout of grace from the start of its term. Role
// changes are pushed (NOTIFY_BROKER_ROLE_CHANGED 1008, oneway) to each
// member over the connection it heartbeats on.
//
// Server is the remoting front (RocketMQ 5's codes and header names); it
// runs alone (mqcontroller) or on the nameserver's remoting server
// (mqnamesrv --controller). Client is what a broker and mqadmin call.
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
