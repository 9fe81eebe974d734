package nameserver

import (
	"fmt"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// Replies and the body codec.
//
// Bodies that are not message records follow the request's header codec
// (DESIGN.md): JSON for serialize types 0 and 1, msgpack for 2. The
// msgpack form is remoting.EncodeBody's: a map keyed like the JSON (the
// json tag names, or the msgpack tag where a type declares one), so both
// forms decode into the same protocol structs. map[int64]string keys
// (BrokerData.BrokerAddrs) are msgpack integers and decode back into
// int64; in JSON they are quoted decimal strings ("0"), compact.

// ok returns a SUCCESS response to req.
func ok(req *remoting.Command) *remoting.Command {
	return remoting.NewResponse(req, protocol.Success, "")
}

// fail returns a response to req with code and a formatted remark.
func fail(req *remoting.Command, code int16, format string, args ...any) *remoting.Command {
	return remoting.NewResponse(req, code, fmt.Sprintf(format, args...))
}

// withBody encodes v in req's codec as resp's body. An encoding failure
// (which would be a bug: every body is a plain struct) turns the reply
// into SYSTEM_ERROR.
func withBody(req, resp *remoting.Command, v any) *remoting.Command {
	b, err := remoting.EncodeBody(req.SerializeType, v)
	if err != nil {
		return fail(req, protocol.SystemError, "nameserver: cannot encode the %s reply body: %v",
			protocol.CodeName(req.Code), err)
	}
	resp.Body = b
	return resp
}

// decodeHeader reads req's extFields into h. On failure it returns the
// SYSTEM_ERROR reply naming the missing or malformed field.
func decodeHeader(req *remoting.Command, h protocol.ExtHeader) *remoting.Command {
	if err := h.FromExt(req.ExtFields); err != nil {
		return fail(req, protocol.SystemError, "nameserver: bad %s request header: %v",
			protocol.CodeName(req.Code), err)
	}
	return nil
}

// Bounds of the values (array elements, map entries, a struct's fields)
// of a request body, counted before it is decoded: decoding allocates what
// each value's Go type takes, whatever it takes on the wire (3 bytes of
// JSON, {}, make a topic config of about 150 bytes). A topic's config is
// about ten values, so a registration may hold some 100,000 topics.
const (
	maxRegisterValues = 1 << 20
	maxSmallValues    = 64 // a DataVersion
)

// decodeBody reads req's body into v with req's codec, refusing one of
// more than maxValues values. On failure it returns the SYSTEM_ERROR reply
// saying what is wrong.
func decodeBody(req *remoting.Command, v any, what string, maxValues int) *remoting.Command {
	if len(req.Body) == 0 {
		return fail(req, protocol.SystemError, "nameserver: %s: empty body, expected %s",
			protocol.CodeName(req.Code), what)
	}
	if err := remoting.DecodeBodyMax(req.SerializeType, req.Body, v, maxValues); err != nil {
		return fail(req, protocol.SystemError, "nameserver: %s: body is not a valid %s %s: %v",
			protocol.CodeName(req.Code), req.SerializeType, what, err)
	}
	return nil
}
