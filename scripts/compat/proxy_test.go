package compat

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// proxy is a RocketMQ remoting proxy on loopback for fault tests: it
// forwards frames both ways between its clients and target, and can
// rewrite the server's answers (rewrite) and lose the answers of the next
// sends (loseSends), as a network that drops replies would.
type proxy struct {
	t       *testing.T
	ln      net.Listener
	target  string
	rewrite func(frame []byte) []byte // server to client, whole frames; nil: as is

	mu        sync.Mutex
	loseNext  int      // sends whose answers are still to lose
	lostIDs   []string // the msgId of each answer lost
	conns     []net.Conn
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// remotingHeader is what the proxy reads of a JSON remoting header.
type remotingHeader struct {
	Code      int            `json:"code"`
	Flag      int            `json:"flag"`
	Opaque    int32          `json:"opaque"`
	ExtFields map[string]any `json:"extFields"`
}

// Request codes of sends: SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE.
var sendCodes = map[int]bool{10: true, 310: true, 320: true}

func startProxy(t *testing.T, target string, rewrite func([]byte) []byte) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{t: t, ln: ln, target: target, rewrite: rewrite}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

// loseSends makes the proxy lose the answers of the next n sends.
func (p *proxy) loseSends(n int) {
	p.mu.Lock()
	p.loseNext = n
	p.mu.Unlock()
}

// lost returns the msgId of every answer lost so far.
func (p *proxy) lost() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lostIDs...)
}

func (p *proxy) close() {
	p.closeOnce.Do(func() {
		p.ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		lose := &sync.Map{} // opaque → true: this connection's sends whose answer is lost
		p.wg.Add(2)
		go p.pipe(c, s, func(h remotingHeader, frame []byte) []byte {
			p.mu.Lock()
			if sendCodes[h.Code] && h.Flag&1 == 0 && p.loseNext > 0 {
				p.loseNext--
				lose.Store(h.Opaque, true)
			}
			p.mu.Unlock()
			return frame
		})
		go p.pipe(s, c, func(h remotingHeader, frame []byte) []byte {
			if _, ok := lose.LoadAndDelete(h.Opaque); ok && h.Flag&1 == 1 {
				p.mu.Lock()
				p.lostIDs = append(p.lostIDs, fmt.Sprint(h.ExtFields["msgId"]))
				p.mu.Unlock()
				return nil
			}
			if p.rewrite != nil {
				return p.rewrite(frame)
			}
			return frame
		})
	}
}

// pipe copies frames from src to dst through fn (nil: the frame is
// dropped) until either side closes.
func (p *proxy) pipe(src, dst net.Conn, fn func(remotingHeader, []byte) []byte) {
	defer p.wg.Done()
	defer src.Close()
	defer dst.Close()
	for {
		frame, h, err := readFrame(src)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				p.t.Logf("proxy: %v", err)
			}
			return
		}
		if out := fn(h, frame); out != nil {
			if _, err := dst.Write(out); err != nil {
				return
			}
		}
	}
}

// readFrame reads one frame: length, serialize type and header length,
// header, body. Only JSON headers are decoded (the official client's).
func readFrame(r io.Reader) ([]byte, remotingHeader, error) {
	var h remotingHeader
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return nil, h, err
	}
	n := binary.BigEndian.Uint32(pre[:4])
	if n < 4 || n > 16<<20 {
		return nil, h, fmt.Errorf("bad frame length %d", n)
	}
	frame := make([]byte, 4+n)
	copy(frame, pre[:])
	if _, err := io.ReadFull(r, frame[8:]); err != nil {
		return nil, h, err
	}
	word := binary.BigEndian.Uint32(pre[4:])
	hlen := word & 0xFFFFFF
	if word>>24 == 0 && 8+hlen <= uint32(len(frame)) {
		_ = json.Unmarshal(frame[8:8+hlen], &h)
	}
	return frame, h, nil
}

// replaceInFrame rewrites old to new in a frame's header and body, with
// the lengths fixed.
func replaceInFrame(frame []byte, old, new string) []byte {
	word := binary.BigEndian.Uint32(frame[4:8])
	hlen := word & 0xFFFFFF
	hdr := bytes.ReplaceAll(frame[8:8+hlen], []byte(old), []byte(new))
	body := bytes.ReplaceAll(frame[8+hlen:], []byte(old), []byte(new))
	out := make([]byte, 8, 8+len(hdr)+len(body))
	binary.BigEndian.PutUint32(out[:4], uint32(4+len(hdr)+len(body)))
	binary.BigEndian.PutUint32(out[4:8], word&0xFF000000|uint32(len(hdr)))
	return append(append(out, hdr...), body...)
}
