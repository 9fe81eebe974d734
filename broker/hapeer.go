package broker

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/tlscert"
)

// checkSlave is a controller-mode master's ha.MasterOptions.CheckSlave: a
// replication peer is taken as broker id only if id is another member of
// this group as the controllers have it, at the peer's IP address (the
// host of the member's registered address). Without it, any peer reaching
// the HA port could claim an in-sync member's id, and its offset reports
// would acknowledge sends that member never stored.
func (b *Broker) checkSlave(id int64, remote net.Addr) error {
	if id == b.ctl.id.Load() {
		return fmt.Errorf("broker id %d is this master's own", id)
	}
	peer, err := netip.ParseAddrPort(remote.String())
	if err != nil {
		return fmt.Errorf("peer address %s: %w", remote, err)
	}
	// NB: a peer verified lately is taken without asking, so that a slave
	// reconnecting while the controllers elect their leader is not refused.
	key := strconv.FormatInt(id, 10) + "@" + peer.Addr().String()
	if at, ok := b.ctl.knownPeers.Load(key); ok && time.Since(at.(time.Time)) < peerCheckTTL {
		return nil
	}
	ctx, cancel := b.ctlContext()
	defer cancel()
	info, err := b.ctl.client.SyncStateData(ctx, []string{b.cfg.BrokerName})
	if err != nil {
		return fmt.Errorf("cannot ask the controllers who broker %d is: %w", id, err)
	}
	ri := info.ReplicasInfoTable[b.cfg.BrokerName]
	addr := ""
	for _, r := range append(slices.Clone(ri.InSyncReplicas), ri.NotInSyncReplicas...) {
		if r.BrokerID == id {
			addr = r.BrokerAddress
		}
	}
	if addr == "" {
		return fmt.Errorf("broker id %d is not a member of %s", id, b.cfg.BrokerName)
	}
	if !sameHost(ctx, addr, peer.Addr()) {
		return fmt.Errorf("broker %d of %s is at %s, not at %s", id, b.cfg.BrokerName, addr, peer.Addr())
	}
	b.ctl.knownPeers.Store(key, time.Now())
	return nil
}

// peerCheckTTL is how long checkSlave trusts a peer it verified.
const peerCheckTTL = time.Minute

// sameHost reports whether the host of addr (ip:port or name:port) is ip;
// loopback addresses are one host.
func sameHost(ctx context.Context, addr string, ip netip.Addr) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	match := func(a netip.Addr) bool {
		a = a.Unmap()
		return a == ip || (a.IsLoopback() && ip.IsLoopback())
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return match(a)
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(ips, match)
}

// warnUnverifiedMaster logs, at start, that a slave's TLS to its master
// does not verify the master's certificate (no namesrv_tls.ca_file): a
// peer that takes the master's address could feed it a log.
func (b *Broker) warnUnverifiedMaster() {
	if b.cfg.TLS.Mode == "" || b.cfg.TLS.Mode == conf.TLSDisabled || b.cfg.NamesrvTLS.CAFile != "" {
		return
	}
	if !b.cfg.ControllerMode() && !b.cfg.IsSlave() {
		return
	}
	b.logger.Warn("broker: replication TLS does not verify the master's certificate (no namesrv_tls.ca_file): " +
		"give the CA of the group's certificates to verify it")
}

// openPeerClient makes the client a broker calls its group's other
// brokers with (a slave's metadata sync, controller mode's epoch
// comparison and confirmed offset): signed as the nameservers' client
// (nsOpts), and, when the broker's own port has TLS (its peers' then too),
// TLS verified as the replication stream (namesrv_tls.ca_file; without
// one, not verified). Without TLS it is the nameservers' client.
func (b *Broker) openPeerClient(nsOpts remoting.ClientOptions) error {
	if b.cfg.TLS.Mode == "" || b.cfg.TLS.Mode == conf.TLSDisabled {
		b.peerc = b.nsc
		return nil
	}
	nt := b.cfg.NamesrvTLS
	tc, err := tlscert.Client(nt.CAFile, nt.Insecure || nt.CAFile == "", "", "")
	if err != nil {
		return fmt.Errorf("broker: TLS to the group's brokers: %w", err)
	}
	nsOpts.TLS = tc
	b.peerc = remoting.NewClient(nsOpts)
	return nil
}
