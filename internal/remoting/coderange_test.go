package remoting

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
)

// jsonFrame is a frame with a hand-written JSON header.
func jsonFrame(header string, body []byte) []byte {
	return append(rawFrame(int32(4+len(header)+len(body)), 0, len(header), []byte(header)), body...)
}

// TestServer_CodeOutOfRange (issue 15): a JSON request whose code does not
// fit in 16 bits is answered REQUEST_CODE_NOT_SUPPORTED naming the code,
// as the Java broker does, and the connection reads on; a oneway one gets
// no answer. Before, the connection closed with no answer.
func TestServer_CodeOutOfRange(t *testing.T) {
	s := startServer(t, ServerOptions{}, map[int16]Handler{codeEcho: echo})
	conn := dialRaw(t, s)
	_, err := conn.Write(jsonFrame(`{"code":99999,"language":"NODE_JS","version":317,"opaque":5,"flag":0,"remark":null,`+
		`"extFields":{"topic":"t","queueId":0}}`, []byte("body")))
	require.NoError(t, err)
	resp := readRaw(t, conn)
	require.True(t, resp.IsResponse())
	require.Equal(t, int32(5), resp.Opaque)
	require.Equal(t, SerializeJSON, resp.SerializeType)
	require.EqualValues(t, protocol.RequestCodeNotSupported, resp.Code)
	require.Equal(t, "request code 99999 is not supported", resp.Remark)

	// A oneway one gets no answer: the next frame answers the next request.
	_, err = conn.Write(jsonFrame(`{"code":-40000,"opaque":6,"flag":2}`, nil))
	require.NoError(t, err)
	echoReq := NewRequest(codeEcho, map[string]string{"x": "1"}, []byte("after"))
	echoReq.SerializeType, echoReq.Opaque = SerializeJSON, 7
	writeRaw(t, conn, echoReq)
	resp = readRaw(t, conn)
	require.Equal(t, int32(7), resp.Opaque)
	require.EqualValues(t, protocol.Success, resp.Code)
	require.Equal(t, "after", string(resp.Body))
}

// TestClient_ResponseCodeOutOfRange: a response whose code does not fit in
// 16 bits fails the call it answers, with the code, and the connection
// stays up for the next call.
func TestClient_ResponseCodeOutOfRange(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	served := make(chan error, 1)
	go func() {
		served <- func() error {
			conn, err := ln.Accept()
			if err != nil {
				return err
			}
			defer conn.Close()
			for _, code := range []string{"70000", "0"} {
				req, err := readRawErr(conn)
				if err != nil {
					return err
				}
				hdr := `{"code":` + code + `,"language":"JAVA","version":409,"opaque":` +
					strconv.Itoa(int(req.Opaque)) + `,"flag":1}`
				if _, err := conn.Write(jsonFrame(hdr, nil)); err != nil {
					return err
				}
			}
			return nil
		}()
	}()
	c := newClient(t, SerializeJSON)
	_, err = c.Invoke(ctxTimeout(t, 5*time.Second), ln.Addr().String(), NewRequest(codeEcho, nil, nil))
	var wide *CodeRangeError
	require.ErrorAs(t, err, &wide)
	require.Equal(t, int32(70000), wide.Code)
	resp, err := c.Invoke(ctxTimeout(t, 5*time.Second), ln.Addr().String(), NewRequest(codeEcho, nil, nil))
	require.NoError(t, err)
	require.EqualValues(t, protocol.Success, resp.Code)
	require.NoError(t, <-served)
}
