package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestAddrs: the addresses are distinct within and across calls, free
// (they can be listened on), and below the ephemeral range, where no
// outgoing connection takes them as its source port.
func TestAddrs(t *testing.T) {
	lo, hi := BelowEphemeral()
	if hi-lo < 1000 {
		t.Skipf("no room below the ephemeral range here (ports %d to %d)", lo, hi)
	}
	seen := map[string]bool{}
	var all []string
	for _, n := range []int{5, 1, 1, 3} {
		addrs, err := Addrs("127.0.0.1", n)
		if err != nil || len(addrs) != n {
			t.Fatalf("Addrs(%d) = %v, %v", n, addrs, err)
		}
		all = append(all, addrs...)
	}
	for _, a := range all {
		if seen[a] {
			t.Errorf("%s handed out twice", a)
		}
		seen[a] = true
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := strconv.Atoi(port); err != nil || host != "127.0.0.1" || n < lo || n >= hi {
			t.Errorf("%s: want 127.0.0.1 and %d <= port < %d", a, lo, hi)
		}
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Errorf("%s is not free: %v", a, err)
			continue
		}
		l.Close()
	}
}

// TestPorts_Pairs: each port comes with the next one free, and no port of
// a pair is handed out again as either half of another.
func TestPorts_Pairs(t *testing.T) {
	ports, err := Ports("127.0.0.1", 4, true)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		for _, q := range []int{p, p + 1} {
			if seen[q] {
				t.Errorf("port %d in two pairs: %v", q, ports)
			}
			seen[q] = true
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(q))
			if err != nil {
				t.Errorf("port %d is not free: %v", q, err)
				continue
			}
			l.Close()
		}
	}
}
