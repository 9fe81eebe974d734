package remoting

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
)

// TestServer_AnswerTooLargeForAFrame: an answer larger than the server's
// frame limit (a body, or a remark echoing what the client sent) is not
// sent; the caller gets SYSTEM_ERROR saying so instead of waiting out its
// timeout, the handler gets ErrFrameTooLarge, and the connection goes on.
func TestServer_AnswerTooLargeForAFrame(t *testing.T) {
	const limit = 64 << 10
	writeErrs := make(chan error, 2)
	big := func(_ context.Context, w ResponseWriter, req *Command) {
		resp := NewResponse(req, protocol.Success, "")
		switch string(req.Body) {
		case "body":
			resp.Body = bytes.Repeat([]byte{'b'}, 2*limit)
		case "remark":
			resp.Code, resp.Remark = protocol.SystemError, "no such group "+strings.Repeat("g", 2*limit)
		default:
			resp.Body = req.Body
		}
		writeErrs <- w.Write(resp)
	}
	s := startServer(t, ServerOptions{MaxFrameSize: limit}, map[int16]Handler{codeEcho: big})
	for _, st := range serializeTypes {
		c := newClient(t, st)
		for _, what := range []string{"body", "remark"} {
			resp, err := c.Invoke(ctxTimeout(t, 30*time.Second), s.Addr().String(), NewRequest(codeEcho, nil, []byte(what)))
			require.NoError(t, err, "%v %s", st, what)
			require.Equal(t, int16(protocol.SystemError), resp.Code, "%v %s", st, what)
			require.Contains(t, resp.Remark, "larger than a frame may be", "%v %s", st, what)
			require.Less(t, len(resp.Remark), 256)
			require.ErrorIs(t, <-writeErrs, ErrFrameTooLarge)
		}
		resp, err := c.Invoke(ctxTimeout(t, 30*time.Second), s.Addr().String(), NewRequest(codeEcho, nil, []byte("small")))
		require.NoError(t, err)
		require.Equal(t, int16(protocol.Success), resp.Code)
		require.Equal(t, "small", string(resp.Body))
		require.NoError(t, <-writeErrs)
	}
}
