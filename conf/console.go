package conf

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
}

func (c Console) validate(ck *checker, p string) {
	if c.Listen != "" && c.Listen != ConsoleOff {
		ck.addr(p+"listen", c.Listen, true)
	}
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
