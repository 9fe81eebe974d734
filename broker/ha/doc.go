// Package ha replicates a broker's commitlog from its master to its slaves,
// with RocketMQ 4.x's HA protocol (spec rocketmq-ha-acl-filter.md §1), so
// that a Java slave or master could take either end.
//
// One TCP connection per slave, on the master's HA port:
//
//	slave → master: offset (8 bytes, big-endian): the end of the bytes the
//	                slave has written; on connect, once the chunks that
//	                arrived together are applied, and every
//	                HeartbeatInterval
//	master → slave: offset (8) | size (4) | size bytes of the commitlog
//	                starting at offset; size 0 is a heartbeat
//
// Chunks are cut at the master's segment ends and at ChunkSize, not at
// records; the slave writes them with store.ApplyReplica, which publishes
// each record once whole, and after its report has them indexed as the
// master's (store.IndexReplica: on its own goroutine while they are few).
// The master starts at the offset the slave reports (at its first retained
// segment for an empty slave). A chunk that is not exactly where the slave
// ends drops the connection, which the slave then opens again.
//
// A slave whose log is longer than its master's (an async master that lost
// its unflushed tail) would diverge if it went on: the master answers such
// a slave with heartbeats at its own end, and the slave stops replicating
// and reports it (Slave.Status) until an operator resolves it; see the
// README.
//
// SYNC_MASTER: the Master is the store's ReplicaGate. A put is answered once
// a slave acknowledged its end offset; at once with SLAVE_NOT_AVAILABLE when
// no slave is connected within MaxLag of the end; FLUSH_SLAVE_TIMEOUT after
// SyncTimeout.
//
// Controller mode (MasterOptions.InSync, Leased): a put is answered once
// the slaves of the SyncStateSet have it as the rule requires (all of
// them, or min_in_sync_replicas-1), and, while a change of the set is
// pending, those of every set asked for too (InSyncRule); never SUCCESS
// once the master's lease ran out (FLUSH_SLAVE_TIMEOUT, and OnLeaseLost
// fences the master).
//
// Handing over (either mode): the store refuses puts first, the broker
// lets the slaves confirm what is held (Drain, when closing), then removes
// the gate from the store and closes the Master, which answers every put
// it still holds, and any it is given afterwards, FLUSH_SLAVE_TIMEOUT:
// stored, not confirmed; never SUCCESS for want of a slave.
package ha
