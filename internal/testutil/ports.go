package testutil

import (
	"testing"

	"github.com/sluicemq/sluice/internal/freeport"
)

// FreeAddrs returns n loopback addresses ("127.0.0.1:PORT") whose ports
// were free a moment ago, for a test that must name a port before the
// process that listens on it starts (a child process, a restart on the
// same address). The ports are distinct, never handed out before by this
// process, and taken below the kernel's ephemeral range when it leaves
// room there (see package freeport for why).
func FreeAddrs(t testing.TB, n int) []string {
	t.Helper()
	return FreeAddrsOn(t, "127.0.0.1", n)
}

// FreeAddrsOn is FreeAddrs on host, an address of this machine (or of a
// network namespace the test made).
func FreeAddrsOn(t testing.TB, host string, n int) []string {
	t.Helper()
	addrs, err := freeport.Addrs(host, n)
	if err != nil {
		t.Fatalf("testutil: %v", err)
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

// freePorts is freeport.Ports, failing t when there is no free port.
func freePorts(t testing.TB, host string, n int, pair bool) []int {
	t.Helper()
	ports, err := freeport.Ports(host, n, pair)
	if err != nil {
		t.Fatalf("testutil: %v", err)
	}
	return ports
}
