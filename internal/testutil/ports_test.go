package testutil

import (
	"net"
	"strconv"
	"testing"
)

// TestFreeAddrs: the addresses are distinct across calls, free (they can
// be listened on), and below the ephemeral range, where no outgoing
// connection takes them as its source port.
func TestFreeAddrs(t *testing.T) {
	lo, hi := BelowEphemeral()
	if hi-lo < 1000 {
		t.Skipf("no room below the ephemeral range here (ports %d to %d)", lo, hi)
	}
	seen := map[string]bool{}
	for _, a := range append(FreeAddrs(t, 5), FreeAddr(t), FreeAddr(t)) {
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
