package servermetrics

import (
	"net"
)

// Listen binds an HTTP endpoint's address; a bare ":port" binds
// 127.0.0.1 (metrics and the profiler stay local unless a host is given).
func Listen(addr string) (net.Listener, error) {
	if host, port, err := net.SplitHostPort(addr); err == nil && host == "" {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	return net.Listen("tcp", addr)
}
