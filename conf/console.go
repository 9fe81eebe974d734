package conf

import (
	"strconv"
	"strings"
)

// Console values of Console.Listen.
const (
	// ConsoleOff turns the console off.
	ConsoleOff = "off"
	// DefaultConsoleListen is where the quickstart's console serves
	// (RocketMQ dashboard's port, on loopback).
	DefaultConsoleListen = "127.0.0.1:8080"
)

// Console configures the built-in web console (internal/console).
type Console struct {
	// Listen is the host:port the console serves on, or "off". Empty is
	// the default: 127.0.0.1:8080 for a broker with an embedded
	// nameserver (the quickstart), off otherwise. Ignored under
	// embedded_namesrv: the broker's own console key serves.
	Listen string `mapstructure:"listen"`
	// ReadOnly hides every write (create, delete, reset, resend).
	ReadOnly bool `mapstructure:"read_only"`
	// AllowedHosts are the Host headers the console answers besides its
	// listen address, localhost, 127.0.0.1 and [::1] on its port:
	// "host;host:port;..." (a name a proxy or a DNS record gives it). An
	// entry without a port takes any port. Others are refused, so that a
	// page whose name was rebound to this address (DNS rebinding) cannot
	// read or change anything.
	AllowedHosts string `mapstructure:"allowed_hosts"`
}

func (c Console) validate(ck *checker, p string) {
	if c.Listen != "" && c.Listen != ConsoleOff {
		ck.addr(p+"listen", c.Listen, true)
	}
	for i, h := range c.AllowedHostList() {
		if problem := allowedHostProblem(h); problem != "" {
			ck.fail(p+"allowed_hosts", strconv.Quote(c.AllowedHosts), "entry "+strconv.Itoa(i+1)+" "+strconv.Quote(h)+": "+problem+
				`; want "host;host:port", the names the console is reached by`)
			return
		}
	}
}

// AllowedHostList returns the entries of AllowedHosts, trimmed; empty
// entries are left out.
func (c Console) AllowedHostList() []string {
	var out []string
	for h := range strings.SplitSeq(c.AllowedHosts, ";") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// allowedHostProblem checks one allowed_hosts entry: a host, or host:port
// (an IPv6 address in brackets).
func allowedHostProblem(h string) string {
	if strings.ContainsAny(h, " \t/,@") || strings.Contains(h, "://") {
		return "must be a host or host:port, without scheme, path, spaces or ','"
	}
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") || !strings.Contains(h, ":") {
		return ""
	}
	if problem := addrProblem(h, false); problem != "" {
		return problem + " (an IPv6 address goes in brackets)"
	}
	return ""
}

// ConsoleAddr returns where the broker's console serves; "" when it is off.
func (b Broker) ConsoleAddr() string {
	switch {
	case b.Console.Listen == ConsoleOff:
		return ""
	case b.Console.Listen != "":
		return b.Console.Listen
	case b.EmbedNamesrv():
		return DefaultConsoleListen
	}
	return ""
}

// ConsoleAddr returns where the nameserver's console serves; "" when it is
// off (the default).
func (n Nameserver) ConsoleAddr() string {
	if n.Console.Listen == ConsoleOff {
		return ""
	}
	return n.Console.Listen
}
