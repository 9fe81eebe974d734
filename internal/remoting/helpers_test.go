package remoting

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
)

// Frame folders under testdata (see testdata/README.md).
const (
	goldenDir  = "rocketmq-client-go" // captured from the official Go client
	lenientDir = "lenient-json"       // hand-made, as other clients write JSON headers
)

func loadFrame(t testing.TB, name string) []byte { return loadFrameIn(t, goldenDir, name) }

func loadFrameIn(t testing.TB, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", dir, name))
	require.NoError(t, err)
	return b
}

// goldenFiles lists the captured frames.
func goldenFiles(t testing.TB) []string { return framesIn(t, goldenDir, 42) }

// lenientFiles lists the hand-made frames with lenient JSON headers.
func lenientFiles(t testing.TB) []string { return framesIn(t, lenientDir, 4) }

func framesIn(t testing.TB, dir string, want int) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join("testdata", dir, "*.bin"))
	require.NoError(t, err)
	require.Len(t, m, want)
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

// goldenHeaderBytes returns the header bytes of a captured frame.
func goldenHeaderBytes(t testing.TB, name string) []byte {
	return goldenHeaderBytesIn(t, goldenDir, name)
}

func goldenHeaderBytesIn(t testing.TB, dir, name string) []byte {
	t.Helper()
	b := loadFrameIn(t, dir, name)
	hl := int(b[5])<<16 | int(b[6])<<8 | int(b[7])
	return b[8 : 8+hl]
}

// sampleHeaders are headers every codec must carry unchanged.
func sampleHeaders() map[string]Header {
	return map[string]Header{
		"zero": {},
		"request": {Code: protocol.SendMessage, Language: protocol.LanguageGo, Version: protocol.Version452, Opaque: 2,
			ExtFields: map[string]string{"topic": "SluiceTopic", "queueId": "1", "properties": "TAGS\x01TagA\x02KEYS\x01a b\x02"}},
		"response": {Code: protocol.PullNotFound, Language: protocol.LanguageJava, Version: protocol.Version498, Opaque: -7,
			Flag: FlagResponse, Remark: "OFFSET_OVERFLOW_ONE",
			ExtFields: map[string]string{"nextBeginOffset": "2", "minOffset": "0", "maxOffset": "2", "suggestWhichBrokerId": "0"}},
		"oneway": {Code: protocol.NotifyConsumerIDsChanged, Language: protocol.LanguageRust, Opaque: 1 << 30, Flag: FlagOneway,
			ExtFields: map[string]string{"consumerGroup": "cg"}},
		"extremes": {Code: -32768, Language: protocol.LanguageNodeJS, Version: 32767, Opaque: -2147483648, Flag: 2147483647},
		"escapes": {Code: 1, Language: protocol.LanguageOther, Remark: "quote \" backslash \\ nl \n tab \t ctl \x00\x1f uni é 日本 😀 \u2028",
			ExtFields: map[string]string{"": "", "k\"ey": "v\\al", "\x01": "\x02", "日本": "😀"}},
	}
}

// manyExt is a header with a large extFields map.
func manyExt(n int) Header {
	h := Header{Code: 11, Language: protocol.LanguageGo, ExtFields: map[string]string{}}
	for i := 0; i < n; i++ {
		h.ExtFields[string(rune('a'+i%26))+string(rune('A'+i/26%26))+string(rune('0'+i/676))] = string(bytes.Repeat([]byte{'x'}, i%40))
	}
	return h
}

// logBuffer is a slog destination tests can search.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// normal returns h with its custom header as a map, whichever form it was
// decoded in (the msgpack codec gives a send's as ExtPairs).
func normal(h Header) Header {
	if h.ExtFields == nil {
		h.ExtFields = h.ExtMap()
	}
	h.ExtPairs, h.ExtWriter = protocol.ExtPairs{}, nil
	return h
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// echo answers with the request's code as SUCCESS, its ext and body.
func echo(_ context.Context, w ResponseWriter, req *Command) {
	resp := NewResponse(req, protocol.Success, "")
	resp.ExtFields = req.ExtFields
	resp.Body = req.Body
	_ = w.Write(resp)
}

// startServer starts a server on 127.0.0.1:0 with the given handlers and
// shuts it down at the end of the test.
func startServer(t testing.TB, opts ServerOptions, handlers map[int16]Handler) *Server {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	s := NewServer("127.0.0.1:0", opts)
	for code, h := range handlers {
		s.Handle(code, h)
	}
	require.NoError(t, s.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Shutdown(ctx))
	})
	return s
}

func newClient(t testing.TB, st SerializeType) *Client {
	t.Helper()
	opts := DefaultClientOptions()
	opts.SerializeType = st
	opts.Logger = quietLogger()
	c := NewClient(opts)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

var serializeTypes = []SerializeType{SerializeJSON, SerializeRocketMQ, SerializeMsgpack}
