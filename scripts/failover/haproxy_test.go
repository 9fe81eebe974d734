package failover

import (
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// linkProxy stands between a master's HA port and its slaves (each
// broker advertises its proxy with --ha-advertise), so that the HA link
// alone can be cut while the brokers still reach the controllers, the
// name server and the clients. A cut is silent (bytes stop, connections
// stay open, as a partition) or a reset (every connection closed and new
// ones closed at once); healing a silent cut lets the held bytes through.
type linkProxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cond   *sync.Cond
	silent bool                  // bytes are held until healed
	reset  bool                  // connections are closed at once
	conns  map[net.Conn]struct{} // both ends of every proxied connection
	closed bool
	wg     sync.WaitGroup
}

// newLinkProxy listens on a free loopback port and forwards to target.
func newLinkProxy(t *testing.T, target string) *linkProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &linkProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *linkProxy) addr() string { return p.ln.Addr().String() }

func (p *linkProxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.reset || p.closed {
			p.mu.Unlock()
			in.Close()
			continue
		}
		p.mu.Unlock()
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(out, in)
		go p.pipe(in, out)
	}
}

// pipe copies src to dst, holding each chunk while the link is silently
// cut.
func (p *linkProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
		dst.Close()
		src.Close()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.silent && !p.closed {
				p.cond.Wait()
			}
			done := p.closed
			p.mu.Unlock()
			if done {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // NB: EOF or a closed end: both ends close
		}
	}
}

// cut cuts the link: silently, or by closing every connection.
func (p *linkProxy) cut(silent bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if silent {
		p.silent = true
		return
	}
	p.reset = true
	for c := range p.conns {
		c.Close()
	}
}

// heal lets bytes and connections through again.
func (p *linkProxy) heal() {
	p.mu.Lock()
	p.silent, p.reset = false, false
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *linkProxy) close() {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}
