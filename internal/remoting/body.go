package remoting

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// EncodeBody marshals a body that is not a message record in the family of
// the request's header codec (DESIGN.md): JSON for JSON and ROCKETMQ
// requests, msgpack for msgpack ones. The msgpack form uses the JSON field
// names, so both decode into the same Go types.
func EncodeBody(st SerializeType, v any) ([]byte, error) {
	if st != SerializeMsgpack {
		return json.Marshal(v)
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetCustomStructTag("json")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// DecodeBody unmarshals a body written by EncodeBody (or by a RocketMQ
// client, for JSON) into v.
func DecodeBody(st SerializeType, b []byte, v any) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: empty body", ErrBadFrame)
	}
	if st != SerializeMsgpack {
		return json.Unmarshal(b, v)
	}
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	dec.SetCustomStructTag("json")
	return dec.Decode(v)
}
