// Command floor measures what this machine allows for two of
// bench-vs-nats.sh's rows, with the least code that does the same work: no
// protocol, no broker, Go's standard library only. Sluice's figures are then
// read as a share of the machine's, as the batch row is read as a share of
// the disk's.
//
//	floor durable-server --listen ADDR --dir DIR
//	floor durable-client --addr ADDR --conns 128 --count N --size 1024
//
// The durable pair is a send that is answered once on disk, each connection
// with one in flight: the server appends each frame to a file (pwrite; with
// --prealloc, into space fallocated at start, as Sluice's segments), one
// goroutine fdatasyncs what has been appended (group commit) and then
// answers every frame it covered. An answer carries the frame's end and the
// synced end; the client fails if one came before its frame was synced.
//
//	floor relay --listen ADDR --dir DIR
//	floor e2e --addr ADDR --rate 10000 --duration 10s --size 1024
//
// The e2e pair is a message from a producer to a consumer through a server
// process at a fixed rate: the relay appends each frame to a file (no
// fsync, as Sluice's async flush) and writes it to the consumer; the client
// paces its sends as mqbench does and reports the latency percentiles from
// send to delivery under mqbench's JSON names.
//
// Frames are a 4-byte big-endian length and that many bytes. The servers
// print "listening on ADDR" once ready and stop on SIGINT or SIGTERM.
package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// maxFrame bounds a frame's length: a longer one is refused (the
// connection is closed), not allocated.
const maxFrame = 4 << 20

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	cmd, args := os.Args[1], os.Args[2:]
	fs := flag.NewFlagSet("floor "+cmd, flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	dir := fs.String("dir", ".", "folder for the server's file")
	addr := fs.String("addr", "", "the server's address")
	conns := fs.Int("conns", 128, "connections, one send in flight on each")
	count := fs.Int("count", 20000, "sends in all")
	size := fs.Int("size", 1024, "bytes a message")
	rate := fs.Int("rate", 10000, "messages a second")
	dur := fs.Duration("duration", 10*time.Second, "how long to send")
	prealloc := fs.Int64("prealloc", 0, "bytes of the server's file to preallocate (fallocate) at start, as Sluice's segments are")
	_ = fs.Parse(args)
	var out any
	var err error
	switch cmd {
	case "durable-server", "relay":
		err = serve(cmd, *listen, *dir, *prealloc)
	case "durable-client":
		out, err = durableClient(*addr, *conns, *count, *size)
	case "e2e":
		out, err = e2eClient(*addr, *rate, *dur, *size)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
	if out != nil {
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Println(string(b))
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: floor durable-server|durable-client|relay|e2e [flags] (floor CMD -h for the flags)")
	os.Exit(2)
}

// serve runs a server until SIGINT or SIGTERM.
func serve(kind, listen, dir string, prealloc int64) error {
	f, err := openFile(filepath.Join(dir, "floor-"+kind), prealloc)
	if err != nil {
		return err
	}
	defer f.Close()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	var s interface{ Close() }
	if kind == "relay" {
		s = startRelay(ln, f)
	} else {
		s = startDurable(ln, f)
	}
	fmt.Println("listening on", ln.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	s.Close()
	return nil
}

// openFile creates the server's file afresh, with prealloc bytes
// fallocated (none if 0).
func openFile(path string, prealloc int64) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	if prealloc > 0 {
		if err := syscall.Fallocate(int(f.Fd()), 0, 0, prealloc); err != nil {
			f.Close()
			return nil, fmt.Errorf("preallocate %d bytes of %s: %w", prealloc, path, err)
		}
	}
	return f, nil
}

// acceptLoop accepts connections on ln until it is closed, each handled
// by its own goroutine; wg counts the loop and the handlers.
func acceptLoop(ln net.Listener, wg *sync.WaitGroup, handle func(net.Conn)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				handle(c)
			}()
		}
	}()
}

// readFrame reads one frame into buf (grown as needed) and returns it.
func readFrame(r io.Reader, buf []byte) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrame {
		return nil, fmt.Errorf("frame of %d bytes, more than %d", n, maxFrame)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	_, err := io.ReadFull(r, buf)
	return buf, err
}

// frame returns a frame of size payload bytes (zeros).
func frame(size int) []byte {
	b := make([]byte, 4+size)
	binary.BigEndian.PutUint32(b, uint32(size))
	return b
}

var errEarly = errors.New("answered before the send was on disk")
