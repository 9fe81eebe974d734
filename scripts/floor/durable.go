package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// durable is the durable-send server: readers append, one syncer answers.
type durable struct {
	ln   net.Listener
	f    *os.File
	kick chan struct{} // cap 1: something waits for the syncer
	quit chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	next    int64 // the file's end: where the next frame goes
	waiters []waiter
	conns   map[net.Conn]struct{}
	closed  bool
}

// waiter is a frame appended and not yet answered.
type waiter struct {
	end  int64
	conn net.Conn
}

func startDurable(ln net.Listener, f *os.File) *durable {
	d := &durable{ln: ln, f: f, kick: make(chan struct{}, 1), quit: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	d.wg.Add(1)
	go d.syncer()
	acceptLoop(ln, &d.wg, func(c net.Conn) {
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			c.Close()
			return
		}
		d.conns[c] = struct{}{}
		d.mu.Unlock()
		d.read(c)
	})
	return d
}

// read appends each frame of c and leaves its answer to the syncer.
func (d *durable) read(c net.Conn) {
	defer func() {
		d.mu.Lock()
		delete(d.conns, c)
		d.mu.Unlock()
		c.Close()
	}()
	var buf []byte
	for {
		b, err := readFrame(c, buf)
		if err != nil {
			return
		}
		buf = b
		d.mu.Lock()
		at := d.next
		if _, err := d.f.WriteAt(b, at); err != nil {
			d.mu.Unlock()
			fmt.Fprintln(os.Stderr, "floor: write:", err)
			return
		}
		d.next += int64(len(b))
		d.waiters = append(d.waiters, waiter{end: d.next, conn: c})
		d.mu.Unlock()
		select {
		case d.kick <- struct{}{}:
		default:
		}
	}
}

// syncer is the group commit: one fdatasync for every frame appended
// before it started, then their answers.
func (d *durable) syncer() {
	defer d.wg.Done()
	var ans [16]byte
	for {
		select {
		case <-d.kick:
		case <-d.quit:
			return
		}
		d.mu.Lock()
		ws, end := d.waiters, d.next
		d.waiters = nil
		d.mu.Unlock()
		if err := d.f.Sync(); err != nil {
			fmt.Fprintln(os.Stderr, "floor: sync:", err)
			return
		}
		for _, w := range ws {
			binary.BigEndian.PutUint64(ans[:], uint64(w.end))
			binary.BigEndian.PutUint64(ans[8:], uint64(end))
			_ = w.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
			_, _ = w.conn.Write(ans[:]) // NB: a peer gone ends its reader
		}
	}
}

func (d *durable) Close() {
	d.ln.Close()
	close(d.quit)
	d.mu.Lock()
	d.closed = true
	for c := range d.conns {
		c.Close()
	}
	d.mu.Unlock()
	d.wg.Wait()
}

// durableReport is what durable-client prints (mqbench's names).
type durableReport struct {
	Messages   int64   `json:"messages"`
	MsgsPerSec float64 `json:"msgs_per_sec"`
}

// durableClient sends count frames of size bytes over conns connections,
// each waiting for its answer before the next send; the clock starts once
// every connection is open.
func durableClient(addr string, conns, count, size int) (durableReport, error) {
	if conns < 1 || count < 1 || size < 1 || size > maxFrame {
		return durableReport{}, fmt.Errorf("conns, count and size must be positive, size at most %d", maxFrame)
	}
	cs := make([]net.Conn, conns)
	defer func() {
		for _, c := range cs {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := range cs {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return durableReport{}, err
		}
		cs[i] = c
	}
	var left, done atomic.Int64
	left.Store(int64(count))
	errs := make(chan error, conns)
	var wg sync.WaitGroup
	start := time.Now()
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, ans := frame(size), make([]byte, 16)
			for left.Add(-1) >= 0 {
				if _, err := c.Write(req); err != nil {
					errs <- err
					return
				}
				if _, err := io.ReadFull(c, ans); err != nil {
					errs <- err
					return
				}
				if end, synced := binary.BigEndian.Uint64(ans), binary.BigEndian.Uint64(ans[8:]); synced < end {
					errs <- fmt.Errorf("%w: its end %d, synced %d", errEarly, end, synced)
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return durableReport{}, err
	}
	return durableReport{Messages: done.Load(), MsgsPerSec: float64(done.Load()) / elapsed.Seconds()}, nil
}
