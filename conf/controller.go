package conf

import (
	"net"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Controller configures a controller-mode Raft node: inside mqnamesrv
// (--controller, key controller.enable) or alone in mqcontroller.
type Controller struct {
	// Enable runs a controller inside the nameserver (mqnamesrv only;
	// mqcontroller always runs one).
	Enable bool `mapstructure:"enable"`
	// ID is this node's id among Peers (--controller-id).
	ID string `mapstructure:"id"`
	// Peers are every node's id and Raft transport address,
	// "n0=ip:port;n1=ip:port;n2=ip:port" (--controller-peers).
	Peers string `mapstructure:"peers"`
	// Dir holds the Raft log, stable store and snapshots (--controller-dir).
	Dir string `mapstructure:"dir"`
	// MasterTimeout: a master silent this long is replaced (100ms..10m).
	MasterTimeout time.Duration `mapstructure:"master_timeout"`
	// ElectUnclean lets the controller elect a replica outside the
	// SyncStateSet when no in-sync one is alive: availability at the risk of
	// losing acknowledged messages.
	ElectUnclean bool `mapstructure:"elect_unclean"`
	// RaftTLS, when set, runs the Raft transport between the controllers
	// over mutually verified TLS.
	RaftTLS RaftTLS `mapstructure:"raft_tls"`
}

// RaftTLS is the Raft transport's TLS: every node presents Cert (with
// Key) and verifies its peers' against CA, both ways. All three empty:
// plain TCP (keep the Raft port on a private network then).
type RaftTLS struct {
	// Cert and Key are this node's PEM certificate and key; the
	// certificate must be valid for client and server use (a peer dials
	// and is dialed).
	Cert string `mapstructure:"cert"`
	Key  string `mapstructure:"key"`
	// CA is a PEM file of the CAs that signed the peers' certificates.
	CA string `mapstructure:"ca"`
}

// Enabled reports whether the transport runs over TLS.
func (t RaftTLS) Enabled() bool { return t.Cert != "" || t.Key != "" || t.CA != "" }

// DefaultController returns a disabled controller section: one node n0 on
// 127.0.0.1:9880, state under ./data/controller, RocketMQ's 3 s timeout.
func DefaultController() Controller {
	return Controller{
		ID:            "n0",
		Peers:         "n0=127.0.0.1:9880",
		Dir:           "./data/controller",
		MasterTimeout: 3 * time.Second,
	}
}

// ControllerServer is the configuration of one mqcontroller process.
type ControllerServer struct {
	// Listen is the remoting address brokers and mqadmin call.
	Listen string `mapstructure:"listen"`
	// Controller is the Raft node (its enable key is ignored).
	Controller Controller `mapstructure:"controller"`
	// Remoting configures the remoting server.
	Remoting Remoting `mapstructure:"remoting"`
	// ACL is access control on the remoting port (off unless acl.file is
	// set); every controller request then needs an admin account.
	ACL ACL `mapstructure:"acl"`
	// TLS is the remoting port's TLS.
	TLS TLS `mapstructure:"tls"`
}

// DefaultControllerServer returns a valid single-node mqcontroller
// configuration listening on 127.0.0.1:9878.
func DefaultControllerServer() ControllerServer {
	c := DefaultController()
	c.Enable = true
	return ControllerServer{Listen: "127.0.0.1:9878", Controller: c, Remoting: defaultRemoting(), TLS: defaultTLS()}
}

// LoadControllerServer is LoadBroker for mqcontroller.
func LoadControllerServer(path string) (ControllerServer, error) {
	return load(path, DefaultControllerServer(), ControllerServer.Validate)
}

// Validate reports every field out of bounds (see Nameserver.Validate).
func (s ControllerServer) Validate() error {
	var c checker
	c.addr("listen", s.Listen, true)
	s.Controller.validate(&c, "controller.", true)
	c.remoting("remoting.", s.Remoting)
	s.TLS.validate(&c, "tls.")
	return c.err()
}

// Dump renders s as YAML that LoadControllerServer reads back to s.
func (s ControllerServer) Dump() string { return dump(reflect.ValueOf(s)) }

// validate checks the section; the node's keys only when it runs.
func (k Controller) validate(c *checker, p string, runs bool) {
	if !runs {
		return
	}
	c.durRange(p+"master_timeout", k.MasterTimeout, 100*time.Millisecond, 10*time.Minute)
	switch {
	case k.ID == "":
		c.fail(p+"id", `""`, "must name this node, one of "+p+"peers")
	case k.Dir == "":
		c.fail(p+"dir", `""`, "must be a directory for the Raft log and snapshots")
	}
	if t := k.RaftTLS; t.Enabled() && (t.Cert == "" || t.Key == "" || t.CA == "") {
		c.fail(p+"raft_tls.cert", strconv.Quote(t.Cert),
			"give raft_tls.cert, raft_tls.key and raft_tls.ca together (each node verifies its peers against the CA)")
	}
	self := false
	for part := range strings.SplitSeq(k.Peers, ";") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "=")
		host, port, err := net.SplitHostPort(strings.TrimSpace(addr))
		if !ok || strings.TrimSpace(id) == "" || err != nil || host == "" || port == "" || port == "0" {
			c.fail(p+"peers", k.Peers, "must be id=ip:port;id=ip:port (the Raft transport addresses); "+
				part+" is not")
			return
		}
		self = self || strings.TrimSpace(id) == k.ID
	}
	if !self && k.ID != "" {
		c.fail(p+"peers", k.Peers, "must include this node's id "+k.ID)
	}
}
