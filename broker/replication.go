package broker

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/broker/ha"
	"github.com/sluicemq/sluice/broker/offset"
	"github.com/sluicemq/sluice/broker/store"
	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/tlscert"
)

// replication is the broker's part of a master/slave group (RocketMQ
// 4.x): a master serves its log to slaves on its HA port (and, as
// SYNC_MASTER, holds sends until a slave has them); a slave copies its
// master's log, found through the nameservers' registration answers, and
// its metadata every Options.MetaSyncInterval.
type replication struct {
	master atomic.Pointer[ha.Master] // masters
	slave  atomic.Pointer[ha.Slave]  // slaves
	haAddr string                    // advertised HA address (masters)
	// From the last registration answer (slaves).
	masterAddr atomic.Pointer[string]
	masterHA   atomic.Pointer[string]
	metaSynced atomic.Int64 // unix ms of the last metadata sync (slaves)
	waitLogged atomic.Bool  // a slave said it waits for its master
	metaErr    atomic.Pointer[string]
}

func loadStr(p *atomic.Pointer[string]) string {
	if s := p.Load(); s != nil {
		return *s
	}
	return ""
}

// startReplication starts the HA side of the broker's role.
func (b *Broker) startReplication() error {
	if b.cfg.IsSlave() {
		so, err := b.haSlaveOptions()
		if err != nil {
			return err
		}
		b.warnUnverifiedMaster()
		so.Master = func() string { return loadStr(&b.repl.masterHA) }
		s := ha.NewSlave(b.store, so)
		s.Start()
		b.repl.slave.Store(s)
		b.wg.Add(1)
		go b.metaSyncLoop()
		return nil
	}
	ln, haAddr, err := b.listenHA()
	if err != nil {
		if b.cfg.HA.Listen == "" && b.cfg.Role == conf.RoleAsyncMaster {
			// NB: a lone broker (the default role, no HA port asked for)
			// serves all the same; only slaves need the port.
			b.logger.Warn("broker: no replication port: slaves cannot connect (set ha.listen)", "err", err)
			return nil
		}
		return err
	}
	b.repl.haAddr = haAddr
	m := ha.NewMaster(b.store.Log(), b.haMasterOptions())
	m.Serve(ln)
	b.repl.master.Store(m)
	if b.cfg.Role == conf.RoleSyncMaster {
		b.store.SetReplicaGate(m)
	}
	return nil
}

// haMasterOptions are a master's replication settings: with TLS on, the
// HA port is TLS (the broker's certificate; the account, not a client
// certificate, authenticates a slave); with ACL on, slaves must present an
// admin account.
func (b *Broker) haMasterOptions() ha.MasterOptions {
	o := ha.MasterOptions{
		SyncTimeout: b.cfg.HA.SyncTimeout,
		MaxLag:      b.cfg.HA.MaxLag,
		Logger:      b.logger,
		OnSyncWait:  b.metrics.observeSyncWait,
	}
	if b.serverTLS != nil {
		o.TLS = b.serverTLS.Config.Clone()
		o.TLS.ClientAuth = tls.NoClientCert
	}
	if w := b.acl; w != nil {
		o.Authenticate = func(key string, content []byte, signature string) bool {
			return w.Rules().BrokerAccount(key, content, signature)
		}
	}
	return o
}

// haSlaveOptions are a slave's: TLS to the master when the broker's own
// TLS is on (verified against namesrv_tls.ca_file; without one, not
// verified: the group's self-signed certificates), and its broker account
// (acl.access_key) when set.
func (b *Broker) haSlaveOptions() (ha.SlaveOptions, error) {
	o := ha.SlaveOptions{Logger: b.logger}
	if b.cfg.TLS.Mode != "" && b.cfg.TLS.Mode != conf.TLSDisabled {
		nt := b.cfg.NamesrvTLS
		tc, err := tlscert.Client(nt.CAFile, nt.Insecure || nt.CAFile == "", "", "")
		if err != nil {
			return o, fmt.Errorf("broker: replication TLS: %w", err)
		}
		o.TLS = tc
	}
	if b.cfg.ACL.AccessKey != "" {
		o.Credentials = &ha.Credentials{Key: b.cfg.ACL.AccessKey, Secret: b.cfg.ACL.SecretKey}
	}
	return o, nil
}

// stopReplication stops the HA side. A SYNC_MASTER's store refuses puts
// from the gate's removal on (it needs one, see New); the gate then
// answers the sends it holds (FLUSH_SLAVE_TIMEOUT unless a slave confirmed
// them), as the store answers those it stored but had not handed to it.
func (b *Broker) stopReplication() {
	if m := b.repl.master.Load(); m != nil && b.cfg.Role == conf.RoleSyncMaster {
		b.handOver(m)
	}
	if m := b.repl.master.Swap(nil); m != nil {
		b.store.SetReplicaGate(nil)
		m.Close()
	}
	if s := b.repl.slave.Swap(nil); s != nil {
		s.Close()
	}
}

// handOverWait bounds how long a closing master lets its replicas confirm
// the sends it stored: well within a controller-mode master's lease, which
// a closing broker no longer renews.
const handOverWait = time.Second

// handOver lets a closing master's replicas confirm the sends it stored
// before m, its gate, is removed and closed (which answers the rest
// FLUSH_SLAVE_TIMEOUT): the store refuses sends first, then, for up to
// handOverWait, the sends waiting for their fsync reach m and m answers
// them as the replicas confirm them.
func (b *Broker) handOver(m *ha.Master) {
	b.store.StopPuts()
	deadline := time.Now().Add(handOverWait)
	for b.store.Unanswered() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // NB: once per Close; fsyncs end within ms
	}
	if !m.Drain(time.Until(deadline)) {
		b.logger.Warn("broker: closing: the replicas did not confirm every held send; they are answered FLUSH_SLAVE_TIMEOUT", "waited", handOverWait)
	}
}

// isSlave reports whether the broker is a slave now: its loops that store
// messages (delays, transaction checks) idle.
func (b *Broker) isSlave() bool {
	if b.ctl != nil {
		return b.ctl.role.Load() != roleMaster
	}
	return b.cfg.IsSlave()
}

// learnMaster records the master's addresses from a registration answer.
func (b *Broker) learnMaster(resp *remoting.Command) {
	if !b.cfg.IsSlave() {
		return
	}
	var h protocol.RegisterBrokerResponseHeader
	if err := h.FromExt(resp.ExtFields); err != nil {
		b.logger.Warn("broker: registration answer", "err", err)
		return
	}
	if h.MasterAddr == "" {
		// NB: the master is not registered (yet) with this nameserver.
		if loadStr(&b.repl.masterHA) == "" && b.repl.waitLogged.CompareAndSwap(false, true) {
			b.logger.Warn("broker: slave waiting for its master: no nameserver lists a master (id 0) of this broker name yet; "+
				"asking again every second", "broker", b.cfg.BrokerName, "cluster", b.cfg.ClusterName)
		}
		return
	}
	b.repl.waitLogged.Store(false)
	if old := loadStr(&b.repl.masterHA); old != h.HAServerAddr {
		b.logger.Info("broker: master found", "master", h.MasterAddr, "ha", h.HAServerAddr)
	}
	b.repl.masterAddr.Store(&h.MasterAddr)
	b.repl.masterHA.Store(&h.HAServerAddr)
}

// metaSyncLoop copies the master's topics, subscription groups, consumer
// offsets and delay offsets every MetaSyncInterval, as Java's
// SlaveSynchronize, so that consumers that move to the slave resume near
// their committed offsets.
func (b *Broker) metaSyncLoop() {
	defer b.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-b.quit:
			return
		case <-t.C:
		}
		if addr := loadStr(&b.repl.masterAddr); addr != "" && b.isSlave() {
			if err := b.syncMeta(addr); err != nil {
				msg := err.Error()
				if old := b.repl.metaErr.Swap(&msg); old == nil || *old != msg {
					b.logger.Warn("broker: copy metadata from the master", "master", addr, "err", err)
				}
			} else {
				b.repl.metaErr.Store(nil)
				b.repl.metaSynced.Store(time.Now().UnixMilli())
			}
		}
		t.Reset(b.opts.MetaSyncInterval)
	}
}

// syncMeta copies the master's metadata once.
func (b *Broker) syncMeta(addr string) error {
	call := func(code int16, v any) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := b.peerc.Invoke(ctx, addr, remoting.NewRequest(code, nil, nil))
		if err != nil {
			return err
		}
		if resp.Code != protocol.Success {
			return fmt.Errorf("%s: code %d: %s", protocol.CodeName(code), resp.Code, resp.Remark)
		}
		return remoting.DecodeBody(resp.SerializeType, resp.Body, v)
	}
	var topics protocol.TopicConfigSerializeWrapper
	if err := call(protocol.GetAllTopicConfig, &topics); err != nil {
		return err
	}
	for _, c := range topics.TopicConfigTable {
		// NB: Put does nothing when the topic is alike.
		if _, err := b.topics.Put(c); err != nil {
			return fmt.Errorf("topic %s: %w", c.TopicName, err)
		}
	}
	cfgs, _ := b.topics.All()
	for _, c := range cfgs {
		if _, ok := topics.TopicConfigTable[c.TopicName]; !ok {
			if _, err := b.topics.Delete(c.TopicName); err != nil {
				return fmt.Errorf("delete topic %s: %w", c.TopicName, err)
			}
		}
	}
	var groups protocol.SubscriptionGroupWrapper
	if err := call(protocol.GetAllSubscriptionGroupConfig, &groups); err != nil {
		return err
	}
	for _, g := range groups.SubscriptionGroupTable {
		if err := b.groupCfgs.Put(g); err != nil {
			return fmt.Errorf("group %s: %w", g.GroupName, err)
		}
	}
	var offs protocol.ConsumerOffsetWrapper
	if err := call(protocol.GetAllConsumerOffset, &offs); err != nil {
		return err
	}
	copyOffsets(b.offsets, offs)
	var delay protocol.ConsumerOffsetWrapper
	if err := call(protocol.GetAllDelayOffset, &delay); err != nil {
		return err
	}
	if b.sched != nil {
		copyOffsets(b.sched.offsets, delay)
	}
	return nil
}

// copyOffsets commits every offset of w ("topic@group" → queue → offset).
func copyOffsets(t *offset.Table, w protocol.ConsumerOffsetWrapper) {
	for key, queues := range w.OffsetTable {
		topic, group, ok := strings.Cut(key, "@")
		if !ok {
			continue
		}
		for q, off := range queues {
			t.Commit(group, topic, q, off)
		}
	}
}

// offsetWrapper renders an offset table as Java's ConsumerOffsetManager.
func offsetWrapper(t *offset.Table) protocol.ConsumerOffsetWrapper {
	w := protocol.ConsumerOffsetWrapper{OffsetTable: map[string]map[int32]int64{}}
	for _, k := range t.Keys() {
		w.OffsetTable[k.Topic+"@"+k.Group] = t.Queues(k.Group, k.Topic)
	}
	return w
}

// handleAllConsumerOffsets serves GET_ALL_CONSUMER_OFFSET (43).
func (b *Broker) handleAllConsumerOffsets(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	b.replyBody(w, req, offsetWrapper(b.offsets))
}

// handleAllDelayOffsets serves GET_ALL_DELAY_OFFSET (45): each delay
// level's progress, keyed as consumer offsets (level - 1 as the queue).
func (b *Broker) handleAllDelayOffsets(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	if b.sched == nil {
		b.replyBody(w, req, protocol.ConsumerOffsetWrapper{OffsetTable: map[string]map[int32]int64{}})
		return
	}
	b.replyBody(w, req, offsetWrapper(b.sched.offsets))
}

// advertised turns a bound address into the ip:port others should use:
// an unspecified host becomes the machine's first non-loopback address
// (as Java's brokerIP1 default), or loopback on a machine with none; key
// names the setting that overrides it, for the log.
func advertised(a net.Addr, logger interface{ Info(string, ...any) }, key string) string {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return a.String()
	}
	if !ap.Addr().IsUnspecified() {
		return ap.String()
	}
	ip := firstNonLoopback()
	logger.Info("broker: listening on every interface; advertising the first non-loopback address",
		"addr", netip.AddrPortFrom(ip, ap.Port()).String(), "override", key)
	return netip.AddrPortFrom(ip, ap.Port()).String()
}

// firstNonLoopback returns the machine's first non-loopback IPv4 address,
// else loopback.
func firstNonLoopback() netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
				if ip, ok := netip.AddrFromSlice(n.IP.To4()); ok && !ip.IsLinkLocalUnicast() {
					return ip
				}
			}
		}
	}
	return netip.MustParseAddr("127.0.0.1")
}

// coldReadDefault is 40% of the machine's memory (1 GiB if unknown).
func coldReadDefault() int64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil || si.Totalram == 0 {
		return 1 << 30
	}
	return int64(si.Totalram) * int64(si.Unit) * 4 / 10
}

// replicationStatus is the HA part of brokerStatus.
func (b *Broker) replicationStatus() map[string]string {
	out := map[string]string{"brokerRole": b.cfg.Role, "brokerId": strconv.FormatInt(b.cfg.BrokerID, 10)}
	b.controllerStatus(out)
	if m := b.repl.master.Load(); m != nil {
		st := m.Status()
		out["haListen"] = b.repl.haAddr
		out["haSlaves"] = strconv.Itoa(len(st.Slaves))
		out["haAcked"] = strconv.FormatInt(st.Acked, 10)
		out["haBytesSent"] = strconv.FormatInt(st.BytesSent, 10)
		out["haSyncTimeouts"] = strconv.FormatInt(st.SyncTimeouts, 10)
		out["haSyncNoSlave"] = strconv.FormatInt(st.SyncNoSlave, 10)
		var lagBytes int64
		var lagSecs float64
		for i, s := range st.Slaves {
			out[fmt.Sprintf("haSlave%d", i)] = fmt.Sprintf("%s acked=%d lagBytes=%d lagSeconds=%.3f", s.Addr, s.Acked, s.LagBytes, s.LagSeconds)
			lagBytes, lagSecs = max(lagBytes, s.LagBytes), max(lagSecs, s.LagSeconds)
		}
		// NB: a master's row in clusterList shows its furthest slave.
		state := "slaves=0"
		if len(st.Slaves) > 0 {
			state = fmt.Sprintf("slaves=%d", len(st.Slaves))
			out["haLagBytes"] = strconv.FormatInt(lagBytes, 10)
			out["haLagSeconds"] = strconv.FormatFloat(lagSecs, 'f', 3, 64)
		}
		out["haState"] = state
	}
	if s := b.repl.slave.Load(); s != nil {
		st := s.Status()
		out["haMaster"] = st.Master
		out["haLocalAddr"] = st.LocalAddr
		out["haMasterAddr"] = loadStr(&b.repl.masterAddr)
		out["haConnected"] = strconv.FormatBool(st.Connected)
		out["haOffset"] = strconv.FormatInt(st.Offset, 10)
		out["haMasterEnd"] = strconv.FormatInt(st.MasterEnd, 10)
		out["haLagBytes"] = strconv.FormatInt(max(st.MasterEnd-st.Offset, 0), 10)
		out["haBytesApplied"] = strconv.FormatInt(st.BytesApplied, 10)
		out["haReconnects"] = strconv.FormatInt(st.Reconnects, 10)
		state := "replicating"
		switch {
		case st.Stopped != "":
			state = "STOPPED: " + st.Stopped
		case !st.Connected:
			state = "connecting"
		}
		out["haState"] = state
		if st.LastError != "" {
			out["haLastError"] = st.LastError
		}
		if ms := b.repl.metaSynced.Load(); ms > 0 {
			out["haMetaSyncedAt"] = time.UnixMilli(ms).UTC().Format(time.RFC3339)
		}
	}
	// NB: one cell for the console: bytes behind, and seconds when known.
	if lag, ok := out["haLagBytes"]; ok {
		out["replicationLag"] = lag + " B"
		if secs, ok := out["haLagSeconds"]; ok {
			out["replicationLag"] += ", " + secs + " s"
		}
	}
	return out
}

var _ store.ReplicaGate = (*ha.Master)(nil)
