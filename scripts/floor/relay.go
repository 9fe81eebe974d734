package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// relay is the e2e server: each session is a producer and a consumer
// connection (each says which it is in its first byte); every frame of the
// producer is appended to the file, acknowledged, and written to the
// consumer.
type relay struct {
	ln net.Listener
	f  *os.File
	wg sync.WaitGroup

	off atomic.Int64 // the file's end

	mu     sync.Mutex
	waitP  net.Conn   // a producer waiting for its consumer
	waitC  net.Conn   // a consumer waiting for its producer
	conns  []net.Conn // every connection, closed by Close
	closed bool
}

func startRelay(ln net.Listener, f *os.File) *relay {
	r := &relay{ln: ln, f: f}
	acceptLoop(ln, &r.wg, r.join)
	return r
}

// join reads c's role and starts a session once both sides are there.
func (r *relay) join(c net.Conn) {
	var role [1]byte
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, role[:]); err != nil || (role[0] != 'p' && role[0] != 'c') {
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		c.Close()
		return
	}
	r.conns = append(r.conns, c)
	if role[0] == 'p' {
		r.waitP = c
	} else {
		r.waitC = c
	}
	if r.waitP != nil && r.waitC != nil {
		p, cons := r.waitP, r.waitC
		r.waitP, r.waitC = nil, nil
		r.wg.Add(1)
		go r.session(p, cons)
	}
}

func (r *relay) session(p, c net.Conn) {
	defer r.wg.Done()
	defer p.Close()
	defer c.Close()
	var buf, out []byte
	ack := make([]byte, 8)
	for {
		b, err := readFrame(p, buf)
		if err != nil {
			return
		}
		buf = b
		at := r.off.Add(int64(len(b))) - int64(len(b))
		if _, err := r.f.WriteAt(b, at); err != nil {
			fmt.Fprintln(os.Stderr, "floor: write:", err)
			return
		}
		if _, err := p.Write(ack); err != nil {
			return
		}
		// NB: one write for the length and the message
		out = binary.BigEndian.AppendUint32(out[:0], uint32(len(b)))
		out = append(out, b...)
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

func (r *relay) Close() {
	r.ln.Close()
	r.mu.Lock()
	r.closed = true
	for _, c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// e2eReport is what e2e prints (mqbench's names).
type e2eReport struct {
	Messages int     `json:"messages"`
	P50      float64 `json:"latency_p50_ms"`
	P99      float64 `json:"latency_p99_ms"`
	P999     float64 `json:"latency_p999_ms"`
	Max      float64 `json:"latency_max_ms"`
}

// e2eClient sends rate×duration messages of size bytes through the relay
// at addr, each at its own time (start + i/rate, as mqbench paces), and
// measures each one's latency from its send to its delivery. It fails if a
// message is lost, repeated or out of order.
func e2eClient(addr string, rate int, dur time.Duration, size int) (e2eReport, error) {
	n := int(float64(rate) * dur.Seconds())
	if rate < 1 || n < 1 || size < 16 || size > maxFrame {
		return e2eReport{}, fmt.Errorf("rate×duration must be at least 1 message and size 16 to %d bytes", maxFrame)
	}
	dial := func(role byte) (net.Conn, error) {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_, err = c.Write([]byte{role})
		}
		return c, err
	}
	p, err := dial('p')
	if err != nil {
		return e2eReport{}, err
	}
	defer p.Close()
	c, err := dial('c')
	if err != nil {
		return e2eReport{}, err
	}
	defer c.Close()
	acks := make(chan error, 1)
	go func() { // NB: ends when p is closed
		_, err := io.CopyN(io.Discard, p, int64(8*n))
		acks <- err
	}()
	lat := make([]float64, 0, n)
	got := make(chan error, 1)
	go func() {
		var buf []byte
		for i := range n {
			b, err := readFrame(c, buf)
			if err != nil {
				got <- fmt.Errorf("after %d of %d messages: %w", i, n, err)
				return
			}
			buf = b
			if seq := binary.BigEndian.Uint64(b); seq != uint64(i) {
				got <- fmt.Errorf("message %d arrived as number %d", seq, i)
				return
			}
			sent := int64(binary.BigEndian.Uint64(b[8:]))
			lat = append(lat, float64(time.Now().UnixNano()-sent)/1e6)
		}
		got <- nil
	}()
	msg := frame(size)
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			<-time.After(d)
		}
		binary.BigEndian.PutUint64(msg[4:], uint64(i))
		binary.BigEndian.PutUint64(msg[12:], uint64(time.Now().UnixNano()))
		if _, err := p.Write(msg); err != nil {
			return e2eReport{}, err
		}
	}
	select {
	case err = <-got:
	case <-time.After(30 * time.Second):
		err = errors.New("the consumer did not get every message within 30 s of the last send")
	}
	if err == nil {
		err = <-acks
	}
	if err != nil {
		return e2eReport{}, err
	}
	slices.Sort(lat)
	q := func(x float64) float64 { return lat[max(int(x*float64(len(lat))+0.999999)-1, 0)] }
	return e2eReport{Messages: len(lat), P50: q(0.5), P99: q(0.99), P999: q(0.999), Max: lat[len(lat)-1]}, nil
}
