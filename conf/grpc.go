package conf

import (
	"net"
	"strconv"
)

// GRPC values of GRPC.Listen.
const (
	// GRPCOff turns the RocketMQ 5 gRPC service off.
	GRPCOff = "off"
	// DefaultGRPCPort is where RocketMQ 5 clients look by default (the
	// proxy's grpcServerPort).
	DefaultGRPCPort = 8081
)

// GRPC configures the RocketMQ 5 gRPC service (apache.rocketmq.v2
// MessagingService), served beside remoting.
type GRPC struct {
	// Listen is the host:port the gRPC service binds, or "off". Empty: the
	// listen host, port 8081; port 0 when listen's port is 0 (tests pick
	// free ports). TLS follows tls.mode on this port too.
	Listen string `mapstructure:"listen"`
}

func (g GRPC) validate(ck *checker, p string) {
	if g.Listen != "" && g.Listen != GRPCOff {
		ck.addr(p+"listen", g.Listen, true)
	}
}

// GRPCAddr returns where the broker's gRPC service binds; "" when it is
// off. With grpc.listen empty it is the remoting listen host with port
// 8081, or port 0 when the remoting port is 0.
func (b Broker) GRPCAddr() string {
	switch b.GRPC.Listen {
	case GRPCOff:
		return ""
	case "":
	default:
		return b.GRPC.Listen
	}
	host, port, err := net.SplitHostPort(b.Listen)
	if err != nil {
		return ""
	}
	if port == "0" {
		return net.JoinHostPort(host, "0")
	}
	return net.JoinHostPort(host, strconv.Itoa(DefaultGRPCPort))
}
