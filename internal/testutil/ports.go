package testutil

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
)

// FreeAddrs returns n loopback addresses ("127.0.0.1:PORT") whose ports
// were free a moment ago, for a test that must name a port before the
// process that listens on it starts (a child process, a restart on the
// same address). The ports are distinct, never handed out before by this
// process, and taken below the kernel's ephemeral range when it leaves
// room there.
// NB: a port picked by listening on port 0 is an ephemeral one: the kernel
// may hand it out again, to the next listener on port 0 or to any
// process's outgoing connection as its source port, between the picking
// and the child's bind. In CI a broker of a docs example failed with
// "address already in use" that way, and the controller peers of another
// test once got the same port twice.
func FreeAddrs(t testing.TB, n int) []string {
	t.Helper()
	return FreeAddrsOn(t, "127.0.0.1", n)
}

// FreeAddrsOn is FreeAddrs on host, an address of this machine (or of a
// network namespace the test made).
func FreeAddrsOn(t testing.TB, host string, n int) []string {
	t.Helper()
	var addrs []string
	for _, p := range freePorts(t, host, n, false) {
		addrs = append(addrs, net.JoinHostPort(host, strconv.Itoa(p)))
	}
	return addrs
}

// FreeAddr is FreeAddrs of one.
func FreeAddr(t testing.TB) string { return FreeAddrs(t, 1)[0] }

// FreePorts is FreeAddrs' ports.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	return freePorts(t, "127.0.0.1", n, false)
}

// FreePortPairs is FreePorts with the port after each free too (a
// broker's HA port is its listen port + 1).
func FreePortPairs(t testing.TB, n int) []int {
	t.Helper()
	return freePorts(t, "127.0.0.1", n, true)
}

// freePorts picks n ports of host (with the next one too if pair), each
// held until all are picked and never handed out before.
func freePorts(t testing.TB, host string, n int, pair bool) []int {
	t.Helper()
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	var ports []int
	for len(ports) < n {
		l, err := listenFree(host)
		if err != nil {
			t.Fatalf("testutil: no free port on %s: %v", host, err)
		}
		held = append(held, l)
		port := l.Addr().(*net.TCPAddr).Port
		if pair {
			next, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port+1)))
			if err != nil {
				continue
			}
			held = append(held, next)
			if _, dup := handedOut.LoadOrStore(net.JoinHostPort(host, strconv.Itoa(port+1)), true); dup {
				continue
			}
		}
		if _, dup := handedOut.LoadOrStore(l.Addr().String(), true); !dup {
			ports = append(ports, port)
		}
	}
	return ports
}

// handedOut are the addresses FreeAddrs gave this process.
var handedOut sync.Map

// listenFree listens on a free port of host, below the ephemeral range if
// it can.
func listenFree(host string) (net.Listener, error) {
	if lo, hi := BelowEphemeral(); hi-lo >= 1000 {
		for range 1000 {
			if l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(lo+rand.IntN(hi-lo)))); err == nil {
				return l, nil
			}
		}
	}
	return net.Listen("tcp", net.JoinHostPort(host, "0"))
}

// BelowEphemeral returns the ports [lo, hi) from 10000 up to the kernel's
// ephemeral range (/proc/sys/net/ipv4/ip_local_port_range), each with the
// port after it below the range too; hi <= lo when it cannot tell.
func BelowEphemeral() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	var first, last int
	if err == nil {
		_, err = fmt.Sscan(string(b), &first, &last)
	}
	if err != nil {
		return 0, 0
	}
	return 10000, first - 1
}
