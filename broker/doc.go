// Package broker serves RocketMQ 4.x's broker protocol (spec sections 3, 4,
// 7.9, 8, 10) over a store.Store: sends (single, V2, batch), pulls with long
// polling, heartbeats and the consumer registry, consumer offsets, queue
// locks for orderly consumers, retry and DLQ, delay levels, transaction
// commits, topic administration and lookups, and registration with the
// nameservers.
//
// Handlers run on goroutines of the remoting server (one per request,
// bounded). Sends are the exception: the server tries them inline on the
// connection's reader first (trySendInline), where a burst of sends is
// stored with one store.Submit and answered with one write; a send that
// could block there (a topic to create, a retry or transactional redirect)
// goes to the connection's ordered executor, and the sends behind it wait
// for it, so one connection's sends are stored in the order it sent them.
// Every put goes through store.Submit and is answered from its Done;
// codes.go is the one table from store results to response codes. A pull
// that finds nothing new is parked in a longpoll.Hold and its handler
// returns at once, so the connection keeps serving; the pull is answered
// when the dispatcher reports an arrival in its queue or its suspend time
// runs out.
//
// Flow control: at most store.send_queue_size sends wait for the store at
// once; a send beyond that is answered SYSTEM_BUSY (2) with a remark and
// counted, and clients retry it. A store that cannot write (disk above the
// full watermark, write failure) answers SERVICE_NOT_AVAILABLE (14) with the
// store's explanation.
//
// # Goroutines
//
//	| goroutine              | owner (starts / waits)        | wakes on                          | stops on            |
//	|------------------------|-------------------------------|-----------------------------------|---------------------|
//	| netpoll pollers        | netpoll (process-global)      | epoll                             | never               |
//	| request handlers       | remoting.Server               | a request frame                   | handler returns     |
//	| workpool workers       | remoting (open Servers and    | a task: a read event, a handler,  | the last Shutdown;  |
//	|                        | Clients together)             | a woken pull                      | parked at most 128  |
//	| ordered executor       | remoting.Server (per conn)    | a send declined inline            | its queue is empty  |
//	| connection flusher     | remoting.Conn (per conn)      | a kick: frames written to flush   | conn closed         |
//	|                        |                               | later, WriteSoon's queued frames  |                     |
//	| houseLoop              | remoting.Server               | idle check (≤ 10 s), input backlog| Shutdown            |
//	|                        |                               | check (100 ms), peer log windows  |                     |
//	| connection abort       | remoting.Conn (not waited)    | input backlog or WriteSoon queue  | closeWith returns   |
//	|                        |                               | over its bound: Close, then close |                     |
//	| flushLoop              | commitlog.Log                 | waiter kick, interval             | Log.Close           |
//	| fsync reaper           | internal/fsync (process; the  | an AIO fsync completed: hands     | no fsync waits      |
//	|                        | first fsync waiting starts it)| each its result                   |                     |
//	| warmer (sync mode)     | commitlog.Log                 | the log end nears the warm edge   | Log.Close           |
//	| read-ahead adviser     | commitlog.Log (ReadAhead)     | a stream of reads that miss the   | Log.Close           |
//	|                        |                               | page cache asks for advice        |                     |
//	| next segment's creation| commitlog.Log (PrecreateNext) | a roll (and Open): one at a time  | segment made; Close |
//	|                        |                               |                                   | waits for it        |
//	| durableLoop (sync mode)| store.Store                   | fsync done, put waiting, 10 ms    | Store.Close         |
//	| retentionLoop          | store.Store                   | retention_interval ticker         | Store.Close         |
//	| dispatchLoop           | store.Store                   | append kick, fsync (sync mode)    | Store.Close, drained|
//	|                        |                               | (a small put in async mode, and a |                     |
//	|                        |                               | slave's IndexReplica, run their   |                     |
//	|                        |                               | own pass: dispatchInline)         |                     |
//	| checkpointLoop         | store.Store                   | interval                          | Store.Close         |
//	| diskLoop               | store.Store                   | 1 s ticker (disk use, reserve)    | Store.Close         |
//	| dedup table unmap      | store dedupWindow (not waited)| the old table, once moved         | munmap returns      |
//	| dedup preparer         | store dedupWindow (close      | the window filling: its next      | handed over (freed  |
//	|                        | waits; one at a time)         | chunk or table is due             | if closed meanwhile)|
//	| rebuildDedupLoop       | store.Store (Open / Close)    | once after Open: the window's     | rebuilt, Store.Close|
//	|                        |                               | last minutes of log               |                     |
//	| expireLoop             | longpoll.Hold                 | earliest deadline                 | Hold.Close          |
//	| woken pull (workpool)  | longpoll.Hold                 | arrival or deadline               | reply written       |
//	| persistLoop (offsets)  | offset.Table                  | 5 s ticker                        | Table.Close         |
//	| registerLoop           | Broker (Start / Close)        | register_interval, topic change   | Close               |
//	| housekeepingLoop       | Broker                        | 10 s ticker                       | Close               |
//	| scheduler.loop (delay) | Broker                        | due time, delayed arrival         | Close               |
//	| tx checkLoop           | Broker                        | transaction check interval        | Close               |
//	| notifyLoop             | Broker                        | a consumer group changed          | Close               |
//	| metrics HTTP server    | Broker metrics (close waits)  | a scrape                          | Close               |
//	| ha accept (4.x master) | ha.Master (Serve)             | a slave's connection              | Master.Close        |
//	| ha secure + readReports| ha.Master (per slave)         | TLS/auth handshake, a report      | conn closed, Close  |
//	| ha sendLoop            | ha.Master (per slave)         | log end moved, heartbeat timer    | conn closed, Close  |
//	| ha gateLoop            | ha.Master                     | an ack, a held put, 10 ms ticks   | Master.Close        |
//	| ha sampleLoop          | ha.Master                     | 10 ms ticker (lag in seconds)     | Master.Close        |
//	| ha slave run + reporter| ha.Slave                      | a frame, 5 s report ticker, retry | Slave.Close         |
//	| metaSyncLoop (slave)   | Broker                        | 10 s timer (MetaSyncInterval)     | Close               |
//	| controllerLoop         | Broker (controller mode)      | 300 ms tick (register, lease,     | Close               |
//	|                        |                               | set), role notice, set re-read    |                     |
//	| beatLoop               | Broker (controller mode; one  | 300 ms heartbeat to its controller| Close               |
//	|                        | per controller)               | (a hung one holds up only its own)|                     |
//	| confirmLoop            | Broker (controller mode)      | 1 s ticker (confirmed offset)     | Close               |
//	| fence                  | the gate's OnLeaseLost (not   | the lease ran out                 | the master stopped  |
//	|                        | waited; takes ctlMode.mu)     |                                   |                     |
//	| haAcceptLoop           | Broker (controller mode)      | a slave's connection              | Close (HA listener) |
//	| registration fan-out   | registerAll (waits)           | one per nameserver                | its call returns    |
//	| gRPC server (v5)       | broker/v5 Server (Close waits)| a v5 client's connection; per     | Close (GracefulStop,|
//	|                        |                               | stream, grpc's own goroutines     | bounded)            |
//	| POP persistLoop        | pop.Table                     | 1 s ticker while state changes    | Table.Close         |
//	| popApplyLoop           | Broker                        | a POP state record indexed on a   | Close               |
//	|                        |                               | slave; 1 s ticker (slaves only)   |                     |
//	| v5 Telemetry receiver  | broker/v5 Telemetry (one per  | a client's Telemetry stream       | the stream ends     |
//	|                        | stream; the handler sends)    |                                   | (keepalive: 40 s)   |
//	| v5 renewal loop        | broker/v5 renewals            | the first auto_renew receive;     | Server.Close        |
//	|                        |                               | 1 s ticker                        | (stopRenewing)      |
//	| v5 put drain           | grpc.go v5Puts                | a submitter past 8 rounds of      | nothing pending     |
//	|                        |                               | other calls' puts                 |                     |
//	| consumer status fan-out| handleGetConsumerStatus waits | one per group member              | its call returns    |
//
// Close order: answer parked pulls, stop the loops, unregister from the
// nameservers, shut the server, close the store (dispatcher drains, indexes
// checkpointed, commitlog fsynced) and the tables.
package broker
