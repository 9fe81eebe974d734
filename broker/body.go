package broker

import (
	"github.com/sluicemq/sluice/internal/acl"
	"github.com/sluicemq/sluice/internal/remoting"
)

// maxBodyValues bounds the values (array elements, map entries) of a
// request body the broker decodes: heartbeats, queue locks, group configs.
// Decoding allocates for each value what its Go type takes (about 100
// bytes for a heartbeat's consumer entry), whatever it takes on the wire
// (1 byte in msgpack): 65,536 values are a heartbeat of some 3,000
// subscriptions, or a lock of 16,000 queues, and a few MiB decoded. It is
// the ACL guard's bound: a heartbeat the guard cannot decode needs no
// permission there, because this bound refuses it here.
const maxBodyValues = acl.MaxBodyValues

// decodeBody reads a request's body into v with the request's codec,
// refusing a body of more than maxBodyValues values.
func decodeBody(req *remoting.Command, v any) error {
	return remoting.DecodeBodyMax(req.SerializeType, req.Body, v, maxBodyValues)
}
