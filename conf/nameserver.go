package conf

import "time"

// Nameserver is the configuration of one mqnamesrv process, and of the
// nameserver a broker embeds (Broker.EmbeddedNamesrv).
type Nameserver struct {
	// Listen is the host:port the remoting server binds. An empty host binds
	// every interface; port 0 picks a free port (tests).
	Listen string `mapstructure:"listen"`
	// MetricsListen is the host:port of the metrics HTTP endpoint; empty
	// disables it.
	MetricsListen string `mapstructure:"metrics_listen"`
	// Console configures the web console (console.listen, console.read_only).
	Console Console `mapstructure:"console"`
	// BrokerExpiry drops a broker from routes when it has not registered for
	// this long (>= 10ms).
	BrokerExpiry time.Duration `mapstructure:"broker_expiry"`
	// ScanInterval is how often expired brokers are looked for
	// (10ms..broker_expiry).
	ScanInterval time.Duration `mapstructure:"scan_interval"`
	// OrderMessageEnable puts a topic's ORDER_TOPIC_CONFIG value (written
	// by mqadmin updateTopic -o true) in its route as orderTopicConf
	// (RocketMQ's orderMessageEnable, off by default there too). Clients
	// then send to the queues it lists, even those of a broker that is
	// down, so that a sharding key keeps its queue. The KV configs live in
	// memory only: after a restart they must be written again.
	OrderMessageEnable bool `mapstructure:"order_message_enable"`
	// Remoting configures the nameserver's remoting server.
	Remoting Remoting `mapstructure:"remoting"`
	// Controller runs a controller node inside the nameserver when enabled
	// (mqnamesrv --controller).
	Controller Controller `mapstructure:"controller"`
	// ACL is access control (off unless acl.file is set).
	ACL ACL `mapstructure:"acl"`
	// TLS is the remoting port's TLS.
	TLS TLS `mapstructure:"tls"`
	// TLSDir keeps the self-signed certificate made when TLS is on and no
	// tls.cert is given (tls/self-signed.crt under it, its own trust anchor
	// for --tls-ca); empty: the controller's directory when a controller
	// runs, else memory only. The nameserver a broker embeds keeps the
	// broker's (its store directory).
	TLSDir string `mapstructure:"tls_dir"`
	// Pprof serves net/http/pprof on the metrics listener.
	Pprof bool `mapstructure:"pprof"`
}

// DefaultNameserver returns a valid nameserver configuration listening on
// 127.0.0.1:9876 with RocketMQ's liveness timings.
func DefaultNameserver() Nameserver {
	return Nameserver{
		Listen:        "127.0.0.1:9876",
		MetricsListen: "",
		BrokerExpiry:  120 * time.Second,
		ScanInterval:  10 * time.Second,
		Remoting:      defaultRemoting(),
		Controller:    DefaultController(),
		TLS:           defaultTLS(),
	}
}
