// Package protocol holds the RocketMQ 4.x remoting vocabulary Sluice speaks:
// request codes, response codes, language codes, version ordinals, and the
// typed custom headers that travel flattened in a command's extFields.
//
// Facts come from spec/rocketmq-4x.md §1.2–§1.7 (codes, languages,
// versions), §2 (request code table) and §3–§5 (header fields per request).
// The package imports only the standard library, so the broker, the
// nameserver, the client and the tools can share it without pulling in the
// network stack.
//
// # Custom headers
//
// RocketMQ flattens every typed header into extFields as strings: numbers
// and booleans travel as decimal text ("queueId":"3", "unitMode":"false").
// Each header type here has hand-written
//
//	ToExt(ext map[string]string)        // writes the fields into ext
//	FromExt(ext map[string]string) error // reads them back
//
// using strconv, no reflection. FromExt checks every required field and
// returns a *FieldError naming the header, the field and the bad value; the
// broker turns that text into the remark of a MESSAGE_ILLEGAL or
// SYSTEM_ERROR response, so it is written for the client's eyes. Unknown
// keys (the Go client's "bname", Java's extras) are ignored.
//
// Optional fields keep Java's defaults when absent: false for booleans, 0
// for numbers, "" for strings. Where absence itself matters to the broker
// (SendMessageRequestHeader.MaxReconsumeTimes: absent means "use the group
// config") the field is a pointer.
//
// SEND_MESSAGE (10) uses long key names; SEND_MESSAGE_V2 (310) and
// SEND_BATCH_MESSAGE (320) use the one-letter names of
// SendMessageRequestHeaderV2. DecodeSendMessageRequestHeader picks the
// right form by request code.
package protocol
