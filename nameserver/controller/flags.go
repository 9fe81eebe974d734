package controller

import (
	"flag"
	"log/slog"

	"github.com/sluicemq/sluice/conf"
)

// FlagsUsage documents the flags AddFlags adds, for the binaries' help.
const FlagsUsage = `  --controller-id ID          this controller node's id, one of the peers
                              (default n0)
  --controller-peers PEERS    every node's id and Raft transport address:
                              "n0=ip:port;n1=ip:port;n2=ip:port"
  --controller-dir DIR        Raft log, stable store and snapshots
                              (default ./data/controller)
  --raft-tls-cert FILE, --raft-tls-key FILE, --raft-tls-ca FILE
                              the Raft transport over mutually verified TLS:
                              this node's PEM certificate (valid for its Raft
                              address, client and server use) and key, and the
                              CA of its peers' certificates; all three or none
`

// Flags are the controller flags mqcontroller and mqnamesrv take.
type Flags struct {
	id, peers, dir            *string
	raftCert, raftKey, raftCA *string
}

// AddFlags defines --controller-id, --controller-peers, --controller-dir
// and --raft-tls-cert, --raft-tls-key, --raft-tls-ca on fs.
func AddFlags(fs *flag.FlagSet) *Flags {
	return &Flags{id: fs.String("controller-id", "", ""), peers: fs.String("controller-peers", "", ""),
		dir: fs.String("controller-dir", "", ""), raftCert: fs.String("raft-tls-cert", "", ""),
		raftKey: fs.String("raft-tls-key", "", ""), raftCA: fs.String("raft-tls-ca", "", "")}
}

// Apply copies the flags set on the command line (parsed fs) into k.
func (f *Flags) Apply(fs *flag.FlagSet, k *conf.Controller) {
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "controller-id":
			k.ID = *f.id
		case "controller-peers":
			k.Peers = *f.peers
		case "controller-dir":
			k.Dir = *f.dir
		case "raft-tls-cert":
			k.RaftTLS.Cert = *f.raftCert
		case "raft-tls-key":
			k.RaftTLS.Key = *f.raftKey
		case "raft-tls-ca":
			k.RaftTLS.CA = *f.raftCA
		}
	})
}

// ConfigFrom is the node configuration of a validated conf section;
// advertise is the remoting address the node serves on.
func ConfigFrom(k conf.Controller, advertise string, logger *slog.Logger) (Config, error) {
	peers, err := ParsePeers(k.Peers)
	if err != nil {
		return Config{}, err
	}
	rt, err := RaftTLS(k.RaftTLS)
	if err != nil {
		return Config{}, err
	}
	if rt == nil && len(peers) > 1 && logger != nil {
		logger.Warn("controller: the Raft transport between the controllers is plain TCP: whoever reaches a Raft port "+
			"can rewrite every group's state; set --raft-tls-cert, --raft-tls-key and --raft-tls-ca (controller.raft_tls)",
			"peers", k.Peers)
	}
	return Config{ID: k.ID, Peers: peers, Dir: k.Dir, Advertise: advertise, MasterTimeout: k.MasterTimeout,
		ElectUnclean: k.ElectUnclean, RaftTLS: rt, Logger: logger}, nil
}
