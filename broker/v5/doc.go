// Package v5 serves RocketMQ 5 clients: the gRPC service
// apache.rocketmq.v2.MessagingService (the official Go v5 SDK's generated
// package protocol/v2 is the dependency that holds its messages and the
// server interface). Every broker serves it beside remoting, into the same
// store, through a Backend the broker implements.
//
// What works: QueryRoute (from the nameservers' routes: master entries
// only, queue ids from 0, each master's gRPC endpoint, accept_message_types
// from the topic's message.type attribute, MIXED when none), Heartbeat,
// NotifyClientTermination, Telemetry (the client's Settings answered with
// what the SDKs need; defaults for a client that sends none) and
// SendMessage (normal, FIFO by message group, delay by delivery time up to
// 3 days), with the v5 authorization header checked against the broker's
// ACL accounts; ReceiveMessage, AckMessage and ChangeInvisibleDuration for
// SimpleConsumers over POP (broker/pop, through a Backend that is also a
// Popper; FIFO per message group for an orderly group, TAG and SQL92
// filters; SendMessage refuses a type the topic's message.type does not
// take), transactions (a Transactor); PushConsumers (renew.go,
// assignment.go): QueryAssignment (one assignment per readable master,
// queue id -1, or per read queue for an orderly group), auto_renew (the
// invisible time of what a live client holds is extended, keeping its
// handle, until ack, nack or the client goes: its last Telemetry stream
// ends or its heartbeats stop for 30 s), attempt_id (a retried receive
// gets the same messages for a minute) and ForwardMessageToDeadLetterQueue
// (reconsume times are the broker's deliveries: a FIFO client's local
// retries are not added). What does not yet: the pull RPCs answer
// codes.Unimplemented.
//
// One port takes TLS and plaintext: the first byte of each connection is
// read (0x16 starts a TLS handshake), as on the remoting port; in enforcing
// mode plaintext is refused.
//
// Status codes: every answer carries a v5 Status (per entry for sends);
// bad input gets BAD_REQUEST or the specific 400xx code with a message
// naming the field, never a gRPC error, except an RPC that is not
// implemented.
package v5
