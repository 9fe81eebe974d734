// Package client is Sluice's Go client: a Producer, a PushConsumer
// (clustering or broadcasting, concurrent or orderly), a PullConsumer and an
// Admin, speaking RocketMQ 4.x's remoting protocol (spec/rocketmq-4x.md).
// It works against Sluice and, in JSON, against Apache RocketMQ.
//
//	p, err := client.NewProducer(client.WithNameServers("127.0.0.1:9876"), client.WithGroup("pg"))
//	err = p.Start()
//	defer p.Close()
//	res, err := p.Send(ctx, &client.Message{Topic: "orders", Body: b, Tags: "new", Keys: []string{id}})
//
//	c, err := client.NewPushConsumer("cg", client.WithNameServers("127.0.0.1:9876"))
//	err = c.Subscribe("orders", "new || paid", func(ctx context.Context, msgs []*client.Message) client.ConsumeResult {
//		return client.ConsumeSuccess
//	})
//	err = c.Start()
//	defer c.Close()
//
// SubscribeSelector takes a MessageSelector instead: Tag("new || paid") as
// above, or SQL92("amount BETWEEN 50 AND 99 AND region IN ('eu','us')"),
// a RocketMQ SQL92 expression over the message's properties that the
// broker evaluates (a message lacking a compared property does not match).
// The expression is compiled at Subscribe, so a bad one fails there. A SQL92
// subscription goes in the heartbeat (expressionType SQL92, subString,
// subVersion, no tags) and in every pull, so a member that comes back with
// a new expression is filtered by it from its first pull.
//
// # Wire
//
// Requests use Sluice's msgpack header (serialize type 2) and bodies that are
// not message records in the same codec family. A server that rejects
// msgpack (Apache RocketMQ closes the connection; others answer
// REQUEST_CODE_NOT_SUPPORTED) gets the request again in JSON, once, and that
// address is then spoken to in JSON only. WithJSONHeaders starts in JSON.
// Single messages go as SEND_MESSAGE_V2 (310), batches as
// SEND_BATCH_MESSAGE (320), both with the one-letter header.
//
// # Shared core
//
// Every client owns one core: the transport (a remoting client per codec,
// each with one connection per address, and a second msgpack one for async
// sends; see below), the route cache, the client
// id (ip@instance, the instance defaulting to the process id), and two
// loops. routeLoop refreshes the cached routes every 30 s and at once after a
// connection failure; a send answered TOPIC_NOT_EXIST refreshes its topic
// before the retry. heartbeatLoop heartbeats the registered producer group
// or consumer group to every broker of the topics in use every 30 s.
// Brokers call back over the same connections: NOTIFY_CONSUMER_IDS_CHANGED
// makes a push consumer rebalance at once; a consumer answers
// GET_CONSUMER_RUNNING_INFO, GET_CONSUMER_STATUS_FROM_CLIENT and
// CONSUME_MESSAGE_DIRECTLY (admin tools, relayed by a broker), a
// requester gets its replies (PUSH_REPLY_MESSAGE_TO_CLIENT), and a
// transactional producer answers CHECK_TRANSACTION_STATE.
//
// # Producer
//
// A send picks a queue with the QueueSelector (RoundRobinSelector by
// default, which skips brokers that recently failed or answered slowly;
// HashSelector by ShardingKey; ManualSelector), retries failures on another
// queue, preferably another broker (WithRetries), and retries SYSTEM_BUSY
// with doubling backoff until the context ends. A topic unknown to the name
// servers is sent through the TBW102 template route so that the broker
// creates it. Bodies of single messages from 4 KiB on are zlib-compressed
// (sysFlag 1). Every message, batch members included, gets a UNIQ_KEY id
// unless Message.MsgID is set.
//
// SendAsync and SendBatchAsync keep up to WithAsyncInflight sends waiting
// for their answers. Once a topic's route is cached and the connection to
// its broker open, the first attempt of an async send takes no goroutine:
// the request is written (several go out in one write under load), the
// answer is handled on the connection's reader, and the callbacks of sends
// answered together run in order on one completion goroutine. A failed
// first attempt goes on as Send does, on a reused worker goroutine. Calls
// carry a deadline that one sweeper per process enforces, not a timer
// each. To a Sluice broker async sends go over two connections: a
// queue with an even id uses the first, one with an odd id the second, so
// each queue's sends keep their order while the two connections' round
// trips overlap (one connection bounds a producer's async rate: 95.5k
// against 109.5k msgs/s of 1 KiB, measured side by side). Replies, checks
// and all other requests use the first.
//
// WithAutoBatch (off by default; RocketMQ 5's autoBatch, a Kafka
// producer's batching without linger) lets SendAsync combine messages
// bound for one queue: the queue is picked per message, a message goes
// out at once when its queue has no batch in flight, and the ones sent
// meanwhile wait for that answer, or until they fill a batch, and go as
// one SEND_BATCH_MESSAGE. Each callback gets its own id, offset id and
// queue offset. Delayed, compressed and retry-topic messages go alone.
//
// # Transactions
//
// A producer made WithTransactionListener sends with SendInTransaction: the
// message is stored as a half message (sysFlag prepared, TRAN_MSG, PGROUP),
// the listener's ExecuteLocal runs, and END_TRANSACTION commits or rolls it
// back. An undecided half message makes the broker ask a producer of the
// group (CHECK_TRANSACTION_STATE), which answers with CheckLocal.
//
// # Request-reply
//
// Producer.Request sends a message and waits for the reply a consumer
// builds with NewReply and sends with any Producer (RocketMQ 4.6's
// request-reply): the reply goes to the cluster's reply topic, and the
// broker that stores it pushes it on the requester's own connection
// (PUSH_REPLY_MESSAGE_TO_CLIENT). Replies go as SEND_REPLY_MESSAGE_V2.
//
// # Pull consumer
//
// Pull answers at once; PullWait long-polls an empty queue (suspend time
// of WithLongPolling, bounded by the caller's deadline less a third of it,
// at least 100 ms, for the answer to come back), as RocketMQ's
// pullBlockIfNotFound does.
//
// # Push consumer
//
// Rebalance (at start, every 20 s, on NOTIFY, and as soon as a route
// refresh finds a subscribed topic's readable queues or brokers changed;
// the brokers are heartbeated then too) shares each subscribed
// topic's readable queues among the group's members (clustering) by the
// allocate strategy: averagely by default, averagely by circle,
// consistent hash or an explicit per-member configuration
// (WithAllocateStrategy; each allocates as the official Go client's
// namesake does, so mixed groups agree). Broadcasting consumers take them
// all. Each owned queue has a pull loop that
// long-polls the broker (suspend 20 s, timeout 30 s) and a processQueue
// holding the in-flight window: messages pulled and not yet acknowledged.
// Pulling pauses while the window holds WithPullThreshold messages or
// bytes. The committed offset is the lowest unacknowledged offset of the
// window, so a crash or a rebalance redelivers at most the window.
// Offsets are committed every 5 s, when a queue is dropped and at Close: on
// the brokers (clustering) or in <dir>/<group>/<instance>/offsets.json
// (broadcasting, replaced atomically).
//
// Concurrent consumers hand batches to WithConsumeGoroutines handler
// goroutines; a pull loop whose answer reached the queue's end lets the
// handler it woke run before it sends its next pull (the broker holds that
// pull anyway), one with a backlog sends its next pull first.
// ConsumeRetryLater sends the messages back
// (CONSUMER_SEND_MSG_BACK; if the broker refuses, a SEND_MESSAGE to
// %RETRY%<group>); they return through the group's retry topic, which
// clustering consumers subscribe to automatically, with their original
// topic restored. Orderly consumers lock each queue on its broker before
// pulling it (LOCK_BATCH_MQ, renewed every 20 s, unlocked when the queue is
// dropped, after its batch in progress, and at Close; a queue allocated
// while its previous owner still holds it is tried again from 100 ms on,
// backing off, not a whole rebalance round later) and run one handler
// call at a time per queue; a
// failed batch is retried in place, and past WithMaxReconsumeTimes sent to
// the DLQ.
//
// # Goroutines and their owners
//
//	| goroutine                 | owner (starts / waits)          | stops on                               |
//	|---------------------------|---------------------------------|----------------------------------------|
//	| routeLoop, heartbeatLoop  | core (client Start / Close)     | core quit channel                      |
//	| untilClosed watchers      | the call that made the context  | its cancel, or the quit channel        |
//	| remoting readers, request | remoting.Client (in core)       | core stop → remoting Close             |
//	| handlers (NOTIFY)         |                                 |                                        |
//	| SendAsync workers         | Producer (SendAsync / Close)    | idle 10 s, or Close after the sends    |
//	| SendAsync completions     | Producer (on the first answer;  | no callback left to run; Close waits   |
//	|                           | a workpool worker)              |                                        |
//	| connection flushers,      | remoting.Client (in core)       | the connection's close / Client Close  |
//	| deadline sweeper          |                                 |                                        |
//	| workpool workers, parked  | remoting (its open Clients and  | the Close that leaves none open        |
//	| between tasks             | Servers together)               |                                        |
//	| rebalanceLoop, commitLoop | PushConsumer (Start / Close)    | consumer quit channel                  |
//	| lockLoop (orderly)        | PushConsumer (Start / Close)    | consumer quit channel                  |
//	| consumeLoop × N           | PushConsumer (Start / Close)    | consumer quit channel, after its batch |
//	| pullLoop per queue        | PushConsumer (rebalance / Close)| the queue's context (drop or Close)    |
//	| orderlyLoop per queue     | PushConsumer (rebalance / Close)| the queue's context (drop or Close)    |
//
// Close cancels handler contexts, drops every queue, waits for all of the
// above, commits offsets, releases locks, unregisters from the brokers and
// closes the connections: no goroutine outlives Close.
//
// # Errors
//
// Broker answers are *BrokerError (code, remark, address, request);
// errors.Is matches them by code (ErrTopicNotExist, ErrBusy for
// SYSTEM_BUSY, &BrokerError{Code: c}). Other sentinels: ErrClosed,
// ErrNotStarted, ErrStarted, ErrNoRoute, ErrInvalidMessage,
// ErrInvalidOption, ErrGroupInUse. Connection failures wrap the remoting
// errors and name the address.
package client
