package remoting

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
)

// TestConn_AnswerExtForm: over msgpack, the answer to a send or a pull
// keeps its custom header as pairs (the producer and the consumer read
// them without a map); every other answer arrives with its map, as
// callers expect.
func TestConn_AnswerExtForm(t *testing.T) {
	answer := func(_ context.Context, w ResponseWriter, req *Command) {
		resp := NewResponse(req, protocol.Success, "")
		resp.ExtFields = req.ExtMap() // NB: a send request's arrives as pairs
		_ = w.Write(resp)
	}
	s := startServer(t, ServerOptions{}, map[int16]Handler{codeEcho: answer, protocol.SendMessageV2: answer, protocol.PullMessage: answer})
	ext := map[string]string{"msgId": "m", "queueId": "3", "queueOffset": "7"}
	for _, st := range serializeTypes {
		c := newClient(t, st)
		for _, code := range []int16{protocol.SendMessageV2, protocol.PullMessage, codeEcho} {
			resp, err := c.Invoke(ctxTimeout(t, 10e9), s.Addr().String(), NewRequest(code, ext, nil))
			require.NoError(t, err)
			require.Equal(t, ext, resp.ExtMap())
			pairs := st == SerializeMsgpack && code != codeEcho
			require.Equal(t, pairs, resp.ExtPairs.Valid(), "serialize %v code %d", st, code)
			require.Equal(t, !pairs, resp.ExtFields != nil, "serialize %v code %d", st, code)
		}
	}
}
