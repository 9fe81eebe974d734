package remoting

import (
	"strconv"

	"github.com/sluicemq/sluice/internal/protocol"
)

// SerializeType is the header codec of a frame: the top byte of the header
// word (spec §1.1).
type SerializeType uint8

// Serialize types. 0 and 1 are RocketMQ's; 2 is Sluice's own.
const (
	SerializeJSON     SerializeType = 0 // what the official clients send
	SerializeRocketMQ SerializeType = 1 // RocketMQ's compact binary header
	SerializeMsgpack  SerializeType = 2 // Sluice's native header
)

func (t SerializeType) String() string {
	switch t {
	case SerializeJSON:
		return "JSON"
	case SerializeRocketMQ:
		return "ROCKETMQ"
	case SerializeMsgpack:
		return "MSGPACK"
	}
	return "SerializeType(" + strconv.Itoa(int(t)) + ")"
}

// Flag bits of a command (spec §1.2).
const (
	FlagResponse int32 = 1 // set on responses
	FlagOneway   int32 = 2 // request: the sender wants no reply
)

// Header is the codec-neutral command header (spec §1.2). Every codec maps
// exactly these fields.
type Header struct {
	Code      int16                 // request code in requests, response code in responses
	Language  protocol.LanguageCode // sender's client library
	Version   int16                 // sender's MQVersion ordinal
	Opaque    int32                 // request id; a response carries its request's
	Flag      int32                 // FlagResponse | FlagOneway
	Remark    string                // human-readable text, mostly on failed responses
	ExtFields map[string]string     // custom header; nil when empty
	// ExtWriter, when ExtFields is nil, is the custom header of an
	// outgoing command, written without a map: the msgpack codec encodes
	// it straight into the frame, the others through a map. Decoded
	// headers have ExtFields instead.
	ExtWriter protocol.ExtWriter
	// ExtPairs, when ExtFields is nil, is a decoded custom header as its
	// fields in order: the msgpack codec decodes a send's or a pull's
	// request header so (no map; its handler reads it with FromExtPairs),
	// and a response's, which a connection turns into a map unless it
	// answers a send or a pull (see pairsAnswer). ExtMap returns either as
	// a map.
	ExtPairs protocol.ExtPairs
}

// ExtMap returns the custom header as a map, whichever form it has.
func (h *Header) ExtMap() map[string]string {
	switch {
	case h.ExtFields != nil:
		return h.ExtFields
	case h.ExtPairs.Valid():
		m := make(map[string]string, h.ExtPairs.Len())
		for i := range h.ExtPairs.Len() {
			m[h.ExtPairs.Key(i)] = h.ExtPairs.Value(i)
		}
		return m
	case h.ExtWriter != nil:
		return protocol.ExtMap(h.ExtWriter)
	}
	return nil
}

// withExtMap returns h, or a copy whose ExtWriter or ExtPairs is turned
// into ExtFields: for the codecs that encode a map.
func withExtMap(h *Header) *Header {
	if h.ExtFields != nil || h.ExtWriter == nil && !h.ExtPairs.Valid() {
		return h
	}
	c := *h
	c.ExtFields, c.ExtWriter, c.ExtPairs = h.ExtMap(), nil, protocol.ExtPairs{}
	return &c
}

// Command is one remoting command: a header, the serialize type it travels
// in, and an opaque body.
//
// Body is referenced, not copied, on the write path: a body above 4 KiB is
// handed to the connection by reference and must not change until the
// write returns. On the read path Body is owned by the receiver, except
// in a request an InlineHandler serves: there it may be a view of the
// connection's input buffer, valid until the reader's burst ends (see
// InlineHandler).
type Command struct {
	Header
	SerializeType SerializeType
	Body          []byte
	borrowed      bool // Body is a view of the reader's input buffer
	// inlineW is the ResponseWriter serveInline gives a request read off
	// a connection, allocated with it (see inbound); nil otherwise.
	inlineW *responseWriter
}

// inbound is a frame read off a connection: the command and the writer
// that answers it if it is a request served inline, in one allocation
// (the writer lives as long as the request, which handlers keep).
type inbound struct {
	cmd Command
	w   responseWriter
}

// own makes Body the command's own copy if it was a view of the reader's
// input buffer; the request can then leave the reader.
func (c *Command) own() {
	if c.borrowed {
		c.Body = append([]byte(nil), c.Body...)
		c.borrowed = false
	}
}

// IsResponse reports whether c is a response (flag bit 0).
func (c *Command) IsResponse() bool { return c.Flag&FlagResponse != 0 }

// IsOneway reports whether c is a request that wants no reply (flag bit 1).
func (c *Command) IsOneway() bool { return c.Flag&FlagOneway != 0 }

// CodeName returns the RocketMQ name of c's code, read as a response code
// for responses and as a request code otherwise.
func (c *Command) CodeName() string {
	if c.IsResponse() {
		return protocol.ResponseCodeName(c.Code)
	}
	return protocol.CodeName(c.Code)
}

// NewRequest returns a request with Sluice's language (GO) and version.
// Invoke fills in the opaque and the serialize type.
func NewRequest(code int16, ext map[string]string, body []byte) *Command {
	return &Command{
		Header: Header{
			Code:      code,
			Language:  protocol.LanguageGo,
			Version:   protocol.CurrentVersion,
			ExtFields: ext,
		},
		Body: body,
	}
}

// NewResponse returns the response to req: the request's opaque and
// serialize type, the response flag, and the given code and remark.
func NewResponse(req *Command, code int16, remark string) *Command {
	return &Command{
		Header: Header{
			Code:     code,
			Language: protocol.LanguageGo,
			Version:  protocol.CurrentVersion,
			Opaque:   req.Opaque,
			Flag:     FlagResponse,
			Remark:   remark,
		},
		SerializeType: req.SerializeType,
	}
}
