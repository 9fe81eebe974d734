// Package freeport picks TCP ports that are free now, for a program or a
// test that must name a port before the process listening on it starts (a
// child process, a restart on the same address).
//
// NB: a port picked by listening on port 0 is an ephemeral one: the kernel
// may hand it out again, to the next listener on port 0 or to any
// process's outgoing connection as its source port, between the picking
// and the child's bind. In CI a broker of a docs example failed with
// "address already in use" that way, the controller peers of another test
// once got the same port twice, and the flash sale's broker was given one
// port for its HA listener and its embedded nameserver. So the ports here
// are taken below the ephemeral range when there is room, all of one call
// are held until the last is picked, and none is handed out twice by this
// process.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
)

// Addrs returns n distinct addresses host:PORT with ports free a moment
// ago. host is an address of this machine (or of a network namespace the
// caller made).
func Addrs(host string, n int) ([]string, error) {
	ports, err := Ports(host, n, false)
	var addrs []string
	for _, p := range ports {
		addrs = append(addrs, net.JoinHostPort(host, strconv.Itoa(p)))
	}
	return addrs, err
}

// Ports picks n ports of host, with the port after each free too if pair
// (a broker's HA port is its listen port + 1).
func Ports(host string, n int, pair bool) ([]int, error) {
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
			return nil, fmt.Errorf("freeport: no free port on %s: %w", host, err)
		}
		held = append(held, l)
		port := l.Addr().(*net.TCPAddr).Port
		nextAddr := net.JoinHostPort(host, strconv.Itoa(port+1))
		if pair {
			next, err := net.Listen("tcp", nextAddr)
			if err != nil {
				continue
			}
			held = append(held, next)
			if _, dup := handedOut.Load(nextAddr); dup {
				continue
			}
		}
		// NB: marked only once the whole pick is free: a port held here
		// cannot be picked by another call meanwhile.
		if _, dup := handedOut.LoadOrStore(l.Addr().String(), true); dup {
			continue
		}
		if pair {
			handedOut.Store(nextAddr, true)
		}
		ports = append(ports, port)
	}
	return ports, nil
}

// handedOut are the addresses Ports gave this process.
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
