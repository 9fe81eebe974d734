// Package remoting is Sluice's RocketMQ 4.x remoting layer: the frame
// codec, the three header codecs, and a netpoll-based Server and Client
// that multiplex requests over one TCP connection by opaque. Wire facts
// are from spec/rocketmq-4x.md §1; the request vocabulary lives in
// internal/protocol. This is the only package that imports netpoll.
//
// # Frame
//
// Big-endian:
//
//	+----------------+----------------------+-----------------+-----------------+
//	| length : int32 | headerWord : int32   | header bytes    | body bytes      |
//	+----------------+----------------------+-----------------+-----------------+
//	  length     = 4 + headerLen + bodyLen   (does not count itself)
//	  headerWord = serializeType<<24 | headerLen   (headerLen: 24 bits)
//
// Serialize types: 0 JSON (what the official clients send), 1 ROCKETMQ
// binary, 2 msgpack (Sluice's own: a map with exactly the JSON keys). A
// reply always uses its request's serialize type. Command.Flag bit 0 marks
// a response, bit 1 a oneway request (never answered).
//
// The reader checks length (4 ≤ length, length+4 ≤ MaxFrameSize, 16 MiB by
// default) and the header word (known serialize type, 0 < headerLen ≤
// length-4) before it consumes or allocates anything else. Any garbage
// (bad length, unknown type, header past the frame, undecodable header,
// oversize frame) closes that connection only, logged with the remote
// address and counted by reason (Server.Stats). netpoll buffers bytes as
// they arrive, so a claimed size is never allocated up front.
//
// # Hostile peers
//
// What a server's peer can hold or trigger is bounded: a frame must
// complete within FrameTimeout (30 s) of its first bytes, a deadline for
// the whole frame (netpoll's read timeout bounds each wait on its own, so a
// peer sending a byte now and then would reset it); a remote IP address may
// hold MaxConnsPerAddr connections (1000), later ones are closed at
// accept; a connection that sends no frame for IdleTimeout is closed; a
// connection whose peer has sent more than MaxInputBacklog bytes (four
// frames) that its reader has not read is closed (netpoll reads the socket
// into memory whatever the reader does, and a reader can be held up, by a
// write to that same peer when it does not read, for one). The
// log lines a peer triggers (bad frames, frame timeouts, refused and idle
// connections, SYSTEM_BUSY answers, and a handler's own through
// Conn.WarnPeer) are limited to one per remote IP and reason a minute
// (peerLog), the held-back lines counted in one more line when the minute
// ends; Server.Stats has the totals for metrics. An answer larger than a
// frame is replaced by a SYSTEM_ERROR saying so.
//
// JSON headers are read as the Java broker (fastjson) reads them: an
// extFields value or remark may be a number, boolean, null, object or
// array (read as its text; null as absent), and unknown keys are skipped
// (jsonDecoder has the details). A JSON code that fits an int32 but not
// 16 bits is not garbage: a request with one is answered
// REQUEST_CODE_NOT_SUPPORTED (3) naming the code and the connection reads
// on; a response with one fails its call (CodeRangeError).
//
// # Concurrency contract
//
// Reading: netpoll runs one OnRequest at a time per connection, on its
// own goroutine. It reads exactly one frame (Peek → validate → Skip/Next →
// decode header → ReadBinary body → Release) and never blocks on anything
// but the rest of that frame (bounded by FrameTimeout). Decoded commands own
// their memory (headers are decoded into fresh strings, the body is one
// copy), so nothing refers to netpoll's buffers after Release. A response
// completes the call waiting for its opaque; a request goes to the
// dispatcher.
//
// Dispatch: each request runs its Handler on a goroutine of its own (a
// workpool one, whose stack has grown already), so a slow handler never
// stalls the other requests of its connection. A code
// may also have an InlineHandler (HandleInline), tried first on the
// reader itself: it serves the request only if it can without blocking
// (the broker's sends in the common case) and otherwise declines. The
// requests of such codes keep their order per connection: one declined
// starts the connection's ordered executor, a goroutine that runs its
// Handler and then, in arrival order, every such request that came
// meanwhile (they skip the inline try while it runs), and ends when none is
// left (see dispatcher). An InlineHandler may defer work to the end of the
// reader's burst (Conn.AtBatchEnd): the hooks run once no whole frame is
// left to read, before the burst's answers are flushed, so the broker
// stores a burst of sends with one append and answers them in one write. Running
// handlers are bounded by MaxInflight per Server (or Client); over the
// bound, and during Shutdown, the reader answers SYSTEM_BUSY (2) itself.
// Unknown codes get REQUEST_CODE_NOT_SUPPORTED (3) naming the code. A
// handler panic is recovered, logged with the remote address and answered
// with SYSTEM_ERROR (1); the connection stays open, because the panic
// happened above an intact frame stream. A panic in the frame reader
// itself closes the connection.
//
// Replies: a handler answers through its ResponseWriter, at once or later
// from any goroutine (a long-polled pull parks the writer and returns).
// The first Write wins; it stamps the request's opaque and serialize type
// and the response flag. Oneway requests get no reply.
//
// Writing: every frame written on a connection (requests, replies, busy
// answers) goes through Conn.write under the connection's write mutex,
// the single writer: Malloc/WriteBinary/Flush on a netpoll connection are
// not safe for concurrent use. The header is encoded into a pooled buffer
// outside the lock. A body up to 4 KiB is copied behind the header; a
// larger one is handed to netpoll by reference (no copy) and is flushed at
// once: it must not change until the write returns. Other frames are
// flushed, in one sendmsg with whatever else is pending: at once when they
// are their connection's only exchange in progress (a lone call or
// answer; a request parked with Parked and a LongPoll call waiting for
// its answer do not count); by the reader once it has no whole frame left to read, for
// answers written by InlineHandlers (one write answers a burst); otherwise
// by the connection's flusher goroutine, which first yields once so that
// writers woken together (callers a burst of responses completed) share
// its flush. WriteSoon is for writers that must not wait on one peer (the
// store's notifier): a lone answer on a connection with nothing unflushed
// is written by its writer in one system call that never waits
// (MSG_DONTWAIT); what the socket does not take then, and every frame
// with company, goes to the flusher. Close flushes what is pending
// first. Flush returns once the kernel has the bytes or the WriteTimeout
// passes; a failed write closes the connection. A flush waiting for a
// peer that does not read holds the connection's write lock, so WriteSoon
// never waits for that lock: when it is held the frame goes to a queue
// that its next holder writes first (up to 16 MiB, past which the
// connection is closed).
//
// Calls: one entry point, Invoke (Client.Invoke dials first, Conn.Invoke
// uses its connection), with options (CallOption). By default it registers
// the call under a fresh opaque from its owner's counter, writes, and
// waits for the response, the context, or the connection's end. Deadline
// adds a deadline that the Clients' sweeper (every 10 ms) enforces instead
// of a timer per call (a context deadline on a Server's connection);
// Oneway returns once the frame is written; Async hands the outcome to a
// callback on a goroutine of the owner's, Inline to one run where the call
// completes (a context watcher, context.AfterFunc, fails it when ctx ends
// first); NoDial uses only an open connection. Whoever removes the call
// from the pending map (the reader, the timeout, the context watcher, the
// close) completes it, exactly once; a late response finds nothing and is
// dropped. Closing a connection fails its
// pending calls with ErrConnClosed (ErrClosed when the Client was closed),
// cancels its context and runs the owner's disconnect hook once.
//
// Goroutines and their owners:
//
//	| goroutine                  | owner             | ends on                           |
//	|----------------------------|-------------------|-----------------------------------|
//	| netpoll pollers            | netpoll (global)  | never (ignored by goleak)         |
//	| OnRequest per connection   | netpoll, run on a | input drained / connection closed |
//	|                            | workpool worker   |                                   |
//	| Server.serveLoop           | Server            | Shutdown                          |
//	| Server.houseLoop           | Server            | Shutdown                          |
//	| request handlers           | Server / Client   | handler return; waited in Shutdown/Close |
//	| ordered executor per conn  | Server / Client   | no ordered request left; waited   |
//	|                            |                   | in Shutdown/Close                 |
//	| OnDisconnect hooks         | Server            | hook return; waited in Shutdown   |
//	| flusher per connection     | Conn              | the connection's close            |
//	| deadline sweeper, one per  | the open Clients  | the Close that leaves no Client   |
//	| process (sweeper.go)       | together          | registered, which waits for it    |
//	|                            |                   | (a Client registers at its first  |
//	|                            |                   | call with a Deadline)             |
//	| Async calls: the dial and  | Server / Client   | callback return; waited in        |
//	| the callback               |                   | Shutdown/Close                    |
//	| workpool workers (parked   | the open Servers  | the Shutdown/Close that leaves no |
//	| between tasks: OnRequest,  | and Clients       | Server or Client open (a Client   |
//	| handlers, Async calls)     | together          | counts from its first dial)       |
//	| context watcher of an      | context.AfterFunc | at once: it fails the call (an    |
//	| Async or Inline call whose |                   | Inline callback runs on it, an    |
//	| ctx ends first             |                   | Async one goes to the owner's)    |
//
// Locks: Conn.mu (pending calls, closed state) and Conn.wmu (the writer)
// are never held together; neither is held while calling user code or
// netpoll's Close. dispatcher.orderedMu guards the connections' queues of
// ordered requests only (a leaf). Server.mu guards the connection table,
// the open connections per remote address and the state only; peerLog.mu
// its windows only (lines are logged after it is released).
package remoting
