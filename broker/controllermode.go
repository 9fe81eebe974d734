package broker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/broker/ha"
	"github.com/sluicemq/sluice/internal/acl/sig"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/statefile"
	"github.com/sluicemq/sluice/internal/tlscert"
	"github.com/sluicemq/sluice/nameserver/controller"
)

// Controller mode (RocketMQ 5's, issue 18): the broker registers with the
// controllers, heartbeats to them, and takes the role they give it, in
// place: a slave made master stops copying, continues the queues from its
// log and starts an epoch at its end; a master made slave (or one that
// restarts after a new master was elected) first finds the point up to
// which its log agrees with the new master's (their epoch histories) and,
// when it holds more, restarts on its store cut there (Restart), so that
// replicas never diverge.
//
// The master's lease (issue 40): the broker heartbeats to each controller
// on its own goroutine (one that hangs delays no other), and a heartbeat
// (or registration) the Raft leader answered renews the lease from the
// moment it was SENT, on the monotonic clock (Clock). The acknowledge path
// checks it: once masterLease passed since, the replica gate answers no
// put SUCCESS (FLUSH_SLAVE_TIMEOUT) and the master fences itself (stops
// taking sends); the controller loop checks it too, for an idle master.
// The controllers replace a master only once its lease (announced in its
// heartbeats) and a margin ran out since its last heartbeat they heard,
// even when its connection closed, unless it resigned
// (controller.Client.Resign, after it stopped taking sends). A slave of a
// newer epoch fences the master as well.
//
// The SyncStateSet: the master learns the set and its epoch from every
// heartbeat answer and notice (a newer epoch than its own replaces its
// set; one without a set makes it re-read it, GET_REPLICA_INFO), and
// re-reads it when an alter is refused for a stale set epoch. It keeps
// the set: a slave not caught up for ha.max_catchup_lag leaves it, one
// caught up joins it. While a change it asked for is unanswered, or its
// outcome unknown (a timeout, a leader change), it acknowledges against
// both sets (every set asked for at that set epoch, and the old): a send
// is acknowledged only once every set the controllers may hold has it. A
// change whose outcome is unknown is settled by asking again at the same
// set epoch: only one change per epoch commits, and either answer (the
// new epoch, or FENCED and a re-read) tells the set.

// Roles in controller mode.
const (
	roleNone   int32 = iota // not known yet, or fenced: no sends, no copying
	roleMaster              // elected master
	roleSlave               // copying the elected master
)

const (
	// ctlBeat is how often the broker heartbeats to the controllers.
	ctlBeat = 300 * time.Millisecond
	// masterLease is how long a master goes on acknowledging without a
	// controller leader hearing it; below the controllers' master
	// timeout (3 s), so that it stops before a successor is elected.
	masterLease = 2 * time.Second
	// beatTimeout is the silence after which the controllers may replace
	// this broker as master, told with every heartbeat: a second past the
	// lease, so a master cut off stops before a successor starts.
	beatTimeout = masterLease + time.Second
)

// Clock is what controller mode reads the time from for the master's
// lease. Only differences of its readings count (time.Time's monotonic
// reading: Sub), never the wall clock, so a step of the machine's clock
// neither extends nor ends a lease. Tests step it (Options.Clock).
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// ctlMode is the broker's controller-mode state.
type ctlMode struct {
	client *controller.Client
	epochs *ha.EpochFile
	haLn   net.Listener
	clock  Clock

	mu       sync.Mutex // serialises role changes
	id       atomic.Int64
	role     atomic.Int32
	epoch    atomic.Int32 // the master epoch led or followed
	masterID atomic.Int64
	syncSet  atomic.Pointer[syncState]
	// Master-side SyncStateSet upkeep, under mu.
	caughtUp map[int64]time.Time // when each slave last had the end
	prevEnd  int64               // the log's end at the previous upkeep
	since    time.Time           // when this term as master began

	// leaseAt is when the newest heartbeat (or registration) a controller
	// leader answered was sent (Clock): the lease runs masterLease from it.
	leaseAt    atomic.Pointer[time.Time]
	registered atomic.Bool          // heartbeats start once registered
	reread     chan struct{}        // asks controllerLoop to re-read the SyncStateSet
	notify     chan controller.Role // roles from notices and heartbeat answers
	restarting bool                 // a cut was asked for (Restart); under mu
	guard      *cutGuard            // refuses cuts below the confirmed offset (cutguard.go)
	knownPeers sync.Map             // "id@ip" → time checked: replication peers checkSlave verified
	closed     bool                 // the broker is closing: no new role; under mu
}

// syncState is a SyncStateSet as the master keeps it; immutable (swapped
// whole, under ctlMode.mu).
type syncState struct {
	ids    []int64
	epoch  int32
	slaves []int64 // ids without this broker's: what the gate waits for
	// changing: the master asked the controllers for a change at epoch
	// and has not learnt its outcome; pending is the union of every set
	// asked for (sorted), pendingSlaves the same without this broker.
	changing      bool
	pending       []int64
	pendingSlaves []int64
	// unknown: becoming master, the broker got no set (registration
	// answers carry none and the re-read failed); no send is acknowledged
	// until it learns one.
	unknown bool
}

// newSyncState is a SyncStateSet as broker me keeps it.
func newSyncState(ids []int64, epoch int32, me int64) *syncState {
	return &syncState{ids: slices.Clone(ids), epoch: epoch, slaves: without(ids, me)}
}

// without returns ids but me.
func without(ids []int64, me int64) []int64 {
	var out []int64
	for _, id := range ids {
		if id != me {
			out = append(out, id)
		}
	}
	return out
}

// asking is ss while a change to next is asked for: the sets asked for at
// this epoch so far, and next.
func (ss *syncState) asking(next []int64, me int64) *syncState {
	c := *ss
	c.changing = true
	c.pending = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(ss.pending), next...))))
	c.pendingSlaves = without(c.pending, me)
	return &c
}

// restart asks the broker's owner to close it and open it again (Restart).
func (b *Broker) restart(reason string) {
	select {
	case b.restartCh <- reason:
	default:
	}
}

// Restart receives, in controller mode, the reason the broker must be
// closed and opened again on its store (a log cut to the point its new
// master agrees with); mqbroker does so.
func (b *Broker) Restart() <-chan string { return b.restartCh }

// cutMarker is the file asking the next open to cut the log.
func cutMarker(dir string) string { return filepath.Join(dir, "cut") }

type cutRequest struct {
	At int64 `msgpack:"at"`
}

// pendingCut reads a cut request left by a previous run.
func pendingCut(dir string) (int64, bool, error) {
	var c cutRequest
	if err := statefile.Load(cutMarker(dir), &c); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, false, nil
		}
		return 0, false, err
	}
	return c.At, true, nil
}

// openController prepares controller mode in New: the epoch file (cut
// with the log when a cut was pending).
func (b *Broker) openController(cut int64, cutting bool) error {
	epochs, err := ha.OpenEpochFile(filepath.Join(b.cfg.Store.Dir, "epoch"))
	if err != nil {
		return err
	}
	if cutting {
		if err := epochs.TruncateAfter(cut); err != nil {
			return err
		}
		if err := os.Remove(cutMarker(b.cfg.Store.Dir)); err != nil {
			return fmt.Errorf("broker: remove the cut request: %w", err)
		}
		b.logger.Warn("broker: the log was cut to agree with the new master", "at", cut)
	}
	clock := b.opts.Clock
	if clock == nil {
		clock = systemClock{}
	}
	b.ctl = &ctlMode{epochs: epochs, clock: clock, caughtUp: map[int64]time.Time{}, notify: make(chan controller.Role, 16),
		reread: make(chan struct{}, 1)}
	if b.ctl.guard, err = openCutGuard(b.cfg.Store.Dir, cut, cutting); err != nil {
		return err
	}
	b.ctl.id.Store(b.cfg.BrokerID)
	if b.cfg.BrokerID == 0 {
		b.ctl.id.Store(controller.NoMaster)
		if id, err := os.ReadFile(filepath.Join(b.cfg.Store.Dir, "config", "broker-id")); err == nil {
			if n, err := strconv.ParseInt(string(id), 10, 64); err == nil {
				b.ctl.id.Store(n)
			}
		}
	}
	return b.store.SetReplica(true) // NB: no sends until elected
}

// startController binds the HA port and starts talking to the controllers.
func (b *Broker) startController() error {
	ln, haAddr, err := b.listenHA()
	if err != nil {
		return err
	}
	b.ctl.haLn, b.repl.haAddr = ln, haAddr
	cc := controller.ClientConfig{Addrs: controller.ParseAddrs(b.cfg.Controller), Logger: b.logger,
		OnRoleChange: func(r controller.Role) {
			select {
			case b.ctl.notify <- r:
			default:
			}
		}}
	// NB: controllers with ACL on take admin accounts only: the broker
	// signs with its own (acl.access_key), as towards the nameservers.
	if b.cfg.ACL.AccessKey != "" {
		cc.Sign = sig.Signer(b.cfg.ACL.AccessKey, b.cfg.ACL.SecretKey, "")
	}
	if ct := b.cfg.ControllerTLS; ct.Enabled {
		if cc.TLS, err = tlscert.Client(ct.CAFile, ct.Insecure, "", ""); err != nil {
			ln.Close()
			return fmt.Errorf("broker: controller_tls: %w", err)
		}
	}
	c, err := controller.NewClient(cc)
	if err != nil {
		ln.Close()
		return err
	}
	b.ctl.client = c
	addrs := c.Addrs()
	b.wg.Add(3 + len(addrs))
	for _, addr := range addrs {
		go b.beatLoop(addr)
	}
	go b.controllerLoop()
	go b.haAcceptLoop()
	go b.metaSyncLoop()
	b.wg.Add(1)
	go b.confirmLoop()
	b.warnUnverifiedMaster()
	return nil
}

// stopController hands over and stops the HA side and the controller
// client (Close). A master first stops being one (sends refused, its
// replicas given a moment to confirm what it stored: handOver; then
// stopMasterLocked answers the rest), and only then may the controllers
// hear it is gone: from then on they may elect another, and nothing this
// broker acknowledged afterwards would be on the new master.
func (b *Broker) stopController() {
	// NB: under mu, so that a role change in progress ends first and none
	// starts a master or a slave after this.
	b.ctl.mu.Lock()
	b.ctl.closed = true
	wasMaster := b.ctl.role.Load() == roleMaster
	id, epoch := b.ctl.id.Load(), b.ctl.epoch.Load()
	if m := b.repl.master.Load(); m != nil && wasMaster {
		b.ctl.role.Store(roleNone) // NB: the role first, as stopMasterLocked
		b.handOver(m)
	}
	b.stopMasterLocked()
	b.ctl.mu.Unlock()
	if b.ctl.haLn != nil {
		b.ctl.haLn.Close()
	}
	b.stopReplication()
	if b.ctl.client == nil {
		return
	}
	if wasMaster {
		// NB: it acknowledges nothing more: the controllers may elect
		// another at once rather than wait out its lease.
		ctx, cancel := b.ctlContext()
		if err := b.ctl.client.Resign(ctx, b.cfg.ClusterName, b.cfg.BrokerName, id, epoch); err != nil {
			b.logger.Warn("broker: tell the controllers this master gives up (they replace it once its lease ran out)", "err", err)
		}
		cancel()
	}
	b.ctl.client.Close()
}

// haAcceptLoop hands slaves' connections to the master of the moment.
func (b *Broker) haAcceptLoop() {
	defer b.wg.Done()
	for {
		c, err := b.ctl.haLn.Accept()
		if err != nil {
			select {
			case <-b.quit:
			default:
				b.logger.Error("broker: ha accept failed; no new slaves", "err", err)
			}
			return
		}
		if m := b.repl.master.Load(); m == nil || !m.Accept(c) {
			c.Close() // NB: not master now; the slave retries
		}
	}
}

// controllerLoop registers, then applies the roles the controllers push
// or answer heartbeats with, re-reads the SyncStateSet when asked, checks
// the lease and keeps the set.
func (b *Broker) controllerLoop() {
	defer b.wg.Done()
	t := time.NewTicker(ctlBeat)
	defer t.Stop()
	failing := ""
	for {
		select {
		case <-b.quit:
			return
		case r := <-b.ctl.notify:
			b.applyRole(r)
			continue
		case <-b.ctl.reread:
			b.rereadSyncStateSet()
			continue
		case <-t.C:
		}
		if !b.ctl.registered.Load() {
			registered, err := b.registerController()
			failing = b.warnChanged(failing, err)
			b.ctl.registered.Store(registered)
		}
		b.checkLease()
		if b.ctl.role.Load() == roleMaster {
			b.keepSyncStateSet()
		}
	}
}

// beatLoop heartbeats to the controller at addr, on its own: a controller
// that hangs holds up its own heartbeats only. A heartbeat the leader
// answers renews the lease from when it was sent; the role it carries goes
// to controllerLoop.
func (b *Broker) beatLoop(addr string) {
	defer b.wg.Done()
	t := time.NewTicker(ctlBeat)
	defer t.Stop()
	failing := ""
	for {
		select {
		case <-b.quit:
			return
		case <-t.C:
		}
		if !b.ctl.registered.Load() {
			continue
		}
		failing = b.warnChanged(failing, b.beat(addr))
	}
}

// warnChanged logs err unless it is the one last logged (failing), and
// returns what is failing now ("" for none): a controller that stays
// down is said once, not every beat.
func (b *Broker) warnChanged(failing string, err error) string {
	if err == nil {
		return ""
	}
	if err.Error() != failing {
		b.logger.Warn("broker: controller", "err", err)
	}
	return err.Error()
}

func (b *Broker) ctlContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 2*time.Second)
}

// registerController joins the broker's group at the controllers.
func (b *Broker) registerController() (bool, error) {
	ctx, cancel := b.ctlContext()
	defer cancel()
	sent := b.ctl.clock.Now()
	r, err := b.ctl.client.Register(ctx, controller.Registration{Cluster: b.cfg.ClusterName, Name: b.cfg.BrokerName,
		ID: b.ctl.id.Load(), Addr: b.addr, HAAddr: b.repl.haAddr, Lease: masterLease})
	if err != nil {
		return false, fmt.Errorf("register: %w", err)
	}
	b.renewLease(sent) // NB: the leader answered it
	if r.BrokerID != controller.NoMaster && r.BrokerID != b.ctl.id.Load() {
		b.ctl.id.Store(r.BrokerID)
		dir := filepath.Join(b.cfg.Store.Dir, "config")
		if err := os.WriteFile(filepath.Join(dir, "broker-id"), []byte(strconv.FormatInt(r.BrokerID, 10)), 0o644); err != nil {
			b.logger.Warn("broker: save the broker id", "err", err)
		}
	}
	b.logger.Info("broker: registered with the controllers", "id", b.ctl.id.Load(), "master", r.MasterID, "epoch", r.MasterEpoch)
	if r.MasterID == b.ctl.id.Load() {
		// NB: a registration's answer has no set (Java's has none): the
		// master reads it before it acknowledges anything.
		if ri, err := b.ctl.client.ReplicaInfo(ctx, b.cfg.BrokerName); err == nil && ri.MasterEpoch == r.MasterEpoch {
			r.SyncStateSet, r.SyncStateSetEpoch = ri.SyncStateSet, ri.SyncStateSetEpoch
		}
	}
	b.applyRole(r)
	return true, nil
}

// beat sends one heartbeat to the controller at addr: an answer as leader
// renews the lease from when it was sent; the role it carries (with the
// SyncStateSet) goes to controllerLoop.
func (b *Broker) beat(addr string) error {
	ctx, cancel := b.ctlContext()
	defer cancel()
	sent := b.ctl.clock.Now()
	a, err := b.ctl.client.HeartbeatTo(ctx, addr, controller.Heartbeat{Cluster: b.cfg.ClusterName, Name: b.cfg.BrokerName,
		ID: b.ctl.id.Load(), Addr: b.addr, Epoch: b.ctl.epoch.Load(), MaxOffset: int64(b.store.Log().Next()),
		Timeout: beatTimeout, Lease: masterLease})
	if err != nil {
		return fmt.Errorf("heartbeat to %s: %w", addr, err)
	}
	if a.Leader {
		b.renewLease(sent)
	}
	// NB: a follower's view may lag: it may still name this broker master
	// after the leader cleared or replaced it. Only the leader (its
	// answers, notices, registration) makes a broker master; a follower's
	// answer may still tell a slave its master or a master a newer set.
	if a.Known && (a.Leader || a.Role.MasterID != b.ctl.id.Load() || b.ctl.role.Load() == roleMaster) {
		select {
		case b.ctl.notify <- a.Role:
		default: // NB: the next answer carries it again
		}
	}
	return nil
}

// renewLease runs the lease from sent, the time a heartbeat (or
// registration) a controller leader answered was sent, unless a later one
// did already (answers of independent heartbeats come in any order) and
// the clock did not go back past it.
func (b *Broker) renewLease(sent time.Time) {
	for {
		cur := b.ctl.leaseAt.Load()
		if cur != nil && !sent.After(*cur) && !b.ctl.clock.Now().Before(*cur) {
			return
		}
		if b.ctl.leaseAt.CompareAndSwap(cur, &sent) {
			return
		}
	}
}

// leaseLeft returns how long the lease still runs (<= 0: it ran out). A
// clock that went back (an injected one; the monotonic clock does not)
// ends the lease rather than stretch it.
func (b *Broker) leaseLeft() time.Duration {
	at := b.ctl.leaseAt.Load()
	if at == nil {
		return 0
	}
	d := b.ctl.clock.Now().Sub(*at)
	if d < 0 {
		return 0
	}
	return masterLease - d
}

// leased reports whether the lease holds: the gate asks before every
// SUCCESS.
func (b *Broker) leased() bool { return b.leaseLeft() > 0 }

// checkLease fences a master whose lease ran out (no controller leader
// answered a heartbeat it sent within masterLease): another may be
// elected, so it stops acknowledging. The gate checks the lease before
// every answer too; this is for a master that answers nothing.
func (b *Broker) checkLease() {
	if b.ctl.role.Load() != roleMaster {
		return
	}
	if left := b.leaseLeft(); left <= 0 {
		b.fence(fmt.Sprintf("its lease ran out: no controller leader answered a heartbeat it sent in the last %v", masterLease))
	}
}

// fence stops a master from acknowledging (and from taking sends) until
// the controllers give it a role again.
func (b *Broker) fence(why string) {
	b.ctl.mu.Lock()
	defer b.ctl.mu.Unlock()
	if b.ctl.role.Load() != roleMaster || b.ctl.closed {
		return
	}
	b.logger.Error("broker: master fenced: it stops acknowledging", "why", why, "epoch", b.ctl.epoch.Load())
	b.stopMasterLocked()
	b.ctl.role.Store(roleNone)
}

// applyRole takes the role the controllers give.
func (b *Broker) applyRole(r controller.Role) {
	b.ctl.mu.Lock()
	defer b.ctl.mu.Unlock()
	if b.ctl.restarting || b.ctl.closed {
		return // NB: waiting to be opened again, cut; or closing
	}
	if r.MasterEpoch < b.ctl.epoch.Load() {
		return // NB: older than what this broker follows: a lagging controller's answer
	}
	me := b.ctl.id.Load()
	switch {
	case r.MasterID == controller.NoMaster:
		if b.ctl.role.Load() == roleMaster {
			b.logger.Error("broker: the controllers have no master for this group; this master stops acknowledging")
			b.stopMasterLocked()
			b.ctl.role.Store(roleNone)
		}
	case r.MasterID == me:
		if b.ctl.role.Load() != roleMaster || b.ctl.epoch.Load() != r.MasterEpoch {
			if !b.leased() {
				return // NB: not before a leader answered a heartbeat it sent within the lease
			}
			b.becomeMasterLocked(r)
			return
		}
		b.learnSyncStateSetLocked(r)
	case r.MasterHAAddr != "" && r.MasterEpoch >= b.ctl.epoch.Load():
		if b.ctl.role.Load() != roleSlave || b.ctl.epoch.Load() != r.MasterEpoch || b.ctl.masterID.Load() != r.MasterID {
			b.becomeSlaveLocked(r)
		}
	}
}

// learnSyncStateSetLocked takes the SyncStateSet of a role of this
// master's epoch when it is newer than the one kept (which settles a
// pending change: no change asked for at an older epoch can commit any
// more); a role that names a newer set epoch without the set (a Java
// controller's) makes controllerLoop re-read it.
func (b *Broker) learnSyncStateSetLocked(r controller.Role) {
	ss := b.ctl.syncSet.Load()
	switch {
	case ss != nil && r.SyncStateSetEpoch <= ss.epoch && !ss.unknown:
	case len(r.SyncStateSet) == 0:
		b.kickReread()
	default:
		b.logger.Info("broker: SyncStateSet learnt from the controllers", "set", r.SyncStateSet, "epoch", r.SyncStateSetEpoch)
		b.ctl.syncSet.Store(newSyncState(r.SyncStateSet, r.SyncStateSetEpoch, b.ctl.id.Load()))
		if m := b.repl.master.Load(); m != nil {
			m.Kick()
		}
	}
}

// kickReread asks controllerLoop to re-read the SyncStateSet.
func (b *Broker) kickReread() {
	select {
	case b.ctl.reread <- struct{}{}:
	default:
	}
}

// rereadSyncStateSet asks the controller leader for the group's role and
// set (GET_REPLICA_INFO) and applies it.
func (b *Broker) rereadSyncStateSet() {
	if b.ctl.role.Load() != roleMaster {
		return
	}
	ctx, cancel := b.ctlContext()
	defer cancel()
	r, err := b.ctl.client.ReplicaInfo(ctx, b.cfg.BrokerName)
	if err != nil {
		b.logger.Warn("broker: re-read the SyncStateSet; the next heartbeat's answer tells it", "err", err)
		return
	}
	b.applyRole(r)
}

// becomeMasterLocked makes the broker the master of epoch r.MasterEpoch.
func (b *Broker) becomeMasterLocked(r controller.Role) {
	if s := b.repl.slave.Swap(nil); s != nil {
		s.Close()
	}
	b.stopMasterLocked() // NB: a new epoch of a master ends its old term
	if err := b.store.SetReplica(false); err != nil {
		b.logger.Error("broker: cannot become master", "err", err)
		return
	}
	b.popInit() // NB: SetReplica indexed the whole log: the POP state is the old master's before a receive
	end := int64(b.store.Log().Next())
	if last := b.ctl.epochs.Last(); last.Epoch != r.MasterEpoch {
		if err := b.ctl.epochs.Append(r.MasterEpoch, end); err != nil {
			b.logger.Error("broker: cannot start the epoch; not taking sends", "err", err)
			_ = b.store.SetReplica(true)
			return
		}
	}
	mo := b.haMasterOptions()
	mo.Epoch = func() int32 { return b.ctl.epoch.Load() }
	mo.OnStale = func(e int32) { go b.fence(fmt.Sprintf("a slave follows epoch %d", e)) }
	mo.InSync = b.inSync
	mo.CheckSlave = b.checkSlave
	mo.Leased = b.leased
	mo.OnLeaseLost = func() {
		go b.fence(fmt.Sprintf("its lease ran out: no controller leader answered a heartbeat it sent in the last %v", masterLease))
	}
	m := ha.NewMaster(b.store.Log(), mo)
	b.ctl.epoch.Store(r.MasterEpoch)
	b.ctl.masterID.Store(r.MasterID)
	b.ctl.since, b.ctl.prevEnd = time.Now(), end
	clear(b.ctl.caughtUp)
	ss := newSyncState(r.SyncStateSet, r.SyncStateSetEpoch, b.ctl.id.Load())
	if len(r.SyncStateSet) == 0 {
		ss.unknown = true
		b.kickReread()
	}
	b.ctl.syncSet.Store(ss)
	m.Start()
	b.repl.master.Store(m)
	// NB: the store needs a gate (New): it refused puts since SetReplica
	// above, until this one.
	b.store.SetReplicaGate(m)
	b.ctl.role.Store(roleMaster)
	b.logger.Info("broker: became master", "role", "MASTER", "controller_id", b.ctl.id.Load(), "route_id", 0,
		"epoch", r.MasterEpoch, "start", end, "sync_state_set", r.SyncStateSet)
	go b.registerAll()
}

// stopMasterLocked ends a term as master (fenced, demoted, a new epoch,
// closing), in an order that acknowledges nothing without its replicas:
// the role first (the send path refuses), then the store (refuses puts),
// then the gate removed (a put stored under it but answered later gets
// FLUSH_SLAVE_TIMEOUT), then the gate closed (its held puts: the same,
// unless the SyncStateSet confirmed them). REQUIRES: ctl.mu held.
func (b *Broker) stopMasterLocked() {
	b.ctl.role.CompareAndSwap(roleMaster, roleNone)
	_ = b.store.SetReplica(true)
	if m := b.repl.master.Swap(nil); m != nil {
		b.store.SetReplicaGate(nil)
		m.Close()
	}
}

// becomeSlaveLocked makes the broker a slave of r's master, first cutting
// what its log holds past the point the two agree on.
func (b *Broker) becomeSlaveLocked(r controller.Role) {
	b.stopMasterLocked()
	if s := b.repl.slave.Swap(nil); s != nil {
		s.Close()
	}
	b.ctl.role.Store(roleNone)
	cp, masterEpochs, err := b.agreedPoint(r.MasterAddr)
	if err == nil && (len(masterEpochs) == 0 || masterEpochs[len(masterEpochs)-1].Epoch != r.MasterEpoch) {
		// NB: the master has not started its epoch yet; its history
		// would lack it, and this replica's with it.
		err = fmt.Errorf("the master has not started epoch %d yet", r.MasterEpoch)
	}
	if err != nil {
		b.logger.Warn("broker: compare epochs with the new master; trying again", "master", r.MasterAddr, "err", err)
		return
	}
	if own := b.store.ReplicaOffset(); own > cp {
		if !b.mayCut(cp, own, r.MasterID, r.MasterAddr, r.MasterEpoch) {
			return // NB: logged; the next role (heartbeat) tries again, an operator may allow it
		}
		b.logger.Warn("broker: this log holds what the new master does not; restarting to cut it",
			"end", own, "agreed", cp, "master", r.MasterAddr, "epoch", r.MasterEpoch)
		if err := statefile.Save(cutMarker(b.cfg.Store.Dir), cutRequest{At: cp}); err != nil {
			b.logger.Error("broker: save the cut request", "err", err)
			return
		}
		b.ctl.restarting = true
		b.restart(fmt.Sprintf("cut the log at %d to follow master %d (epoch %d)", cp, r.MasterID, r.MasterEpoch))
		return
	}
	// NB: the slave's history becomes its master's, whose bytes it copies.
	if err := b.ctl.epochs.Replace(masterEpochs); err != nil {
		b.logger.Error("broker: take the master's epochs", "err", err)
		return
	}
	id, epoch, haAddr := b.ctl.id.Load(), r.MasterEpoch, r.MasterHAAddr
	so, err := b.haSlaveOptions()
	if err != nil {
		b.logger.Error("broker: cannot follow the master", "err", err)
		return
	}
	so.Master = func() string { return haAddr }
	so.Hello = func() (int64, int32) { return id, epoch }
	s := ha.NewSlave(b.store, so)
	b.ctl.epoch.Store(r.MasterEpoch)
	b.ctl.masterID.Store(r.MasterID)
	b.repl.masterAddr.Store(&r.MasterAddr)
	b.repl.masterHA.Store(&r.MasterHAAddr)
	s.Start()
	b.repl.slave.Store(s)
	b.ctl.role.Store(roleSlave)
	b.logger.Info("broker: following master", "role", "SLAVE", "controller_id", b.ctl.id.Load(), "route_id", max(b.ctl.id.Load(), 1),
		"master", r.MasterID, "addr", r.MasterAddr, "epoch", r.MasterEpoch, "from", b.store.ReplicaOffset())
	go b.registerAll()
}

// agreedPoint asks the master for its epochs and end and returns the
// offset up to which this log agrees with it, and the master's epochs.
func (b *Broker) agreedPoint(masterAddr string) (int64, []ha.EpochEntry, error) {
	ctx, cancel := b.ctlContext()
	defer cancel()
	resp, err := b.peerc.Invoke(ctx, masterAddr, remoting.NewRequest(protocol.GetBrokerEpochCache, nil, nil))
	if err != nil {
		return 0, nil, err
	}
	if resp.Code != protocol.Success {
		return 0, nil, fmt.Errorf("GET_BROKER_EPOCH_CACHE: code %d: %s", resp.Code, resp.Remark)
	}
	var c EpochCache
	if err := remoting.DecodeBody(resp.SerializeType, resp.Body, &c); err != nil {
		return 0, nil, err
	}
	return ha.ConsistentPoint(b.ctl.epochs.Entries(), b.store.ReplicaOffset(), c.Epochs, c.MaxOffset), c.Epochs, nil
}

// EpochCache is the body of GET_BROKER_EPOCH_CACHE (1007): a broker's
// epochs and its log's end.
type EpochCache struct {
	BrokerName string          `json:"brokerName" msgpack:"brokerName"`
	BrokerID   int64           `json:"brokerId" msgpack:"brokerId"`
	Epochs     []ha.EpochEntry `json:"epochList" msgpack:"epochList"`
	MaxOffset  int64           `json:"maxOffset" msgpack:"maxOffset"`
	// ConfirmedOffset (Sluice) is the broker's confirmed offset: what its
	// slaves may not cut below by themselves (cutguard.go).
	ConfirmedOffset int64 `json:"confirmedOffset" msgpack:"confirmedOffset"`
}

// handleEpochCache serves GET_BROKER_EPOCH_CACHE.
func (b *Broker) handleEpochCache(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	if b.ctl == nil {
		reply(w, req, protocol.SystemError, fmt.Sprintf("broker %s is not in controller mode: it has no epochs", b.cfg.BrokerName))
		return
	}
	b.replyBody(w, req, EpochCache{BrokerName: b.cfg.BrokerName, BrokerID: b.ctl.id.Load(),
		Epochs: b.ctl.epochs.Entries(), MaxOffset: int64(b.store.Log().Next()), ConfirmedOffset: b.ctl.guard.confirmed.Load()})
}

// inSync is the master's gate rule: the SyncStateSet's slaves and, while
// a change is pending, those of every set asked for (a send needs both),
// whether all of a set's slaves must have a send, and the least replicas
// a set must hold.
func (b *Broker) inSync() ha.InSyncRule {
	r := ha.InSyncRule{AllAck: b.cfg.HA.AllAckInSyncStateSet, MinReplicas: b.cfg.HA.MinInSyncReplicas, Unknown: true}
	if ss := b.ctl.syncSet.Load(); ss != nil {
		r.Slaves, r.Changing, r.Pending, r.Unknown = ss.slaves, ss.changing, ss.pendingSlaves, ss.unknown
	}
	return r
}

// keepSyncStateSet shrinks the SyncStateSet of slaves not caught up for
// ha.max_catchup_lag and grows it with slaves that caught up.
func (b *Broker) keepSyncStateSet() {
	b.ctl.mu.Lock()
	m := b.repl.master.Load()
	ss := b.ctl.syncSet.Load()
	if m == nil || ss == nil || b.ctl.role.Load() != roleMaster {
		b.ctl.mu.Unlock()
		return
	}
	me, now, end := b.ctl.id.Load(), time.Now(), int64(b.store.Log().Next())
	connected := map[int64]bool{}
	for _, s := range m.Status().Slaves {
		if s.ID >= 0 && s.Acked >= 0 {
			connected[s.ID] = true
			if s.Acked >= b.ctl.prevEnd {
				b.ctl.caughtUp[s.ID] = now
			}
		}
	}
	next := []int64{me}
	for _, id := range ss.ids {
		if id == me {
			continue
		}
		last, ok := b.ctl.caughtUp[id]
		if !ok {
			last = b.ctl.since
		}
		if now.Sub(last) < b.cfg.HA.MaxCatchupLag {
			next = append(next, id)
		}
	}
	for id := range connected {
		if !slices.Contains(next, id) && b.ctl.caughtUp[id].Equal(now) {
			next = append(next, id)
		}
	}
	b.ctl.prevEnd = end
	slices.Sort(next)
	cur := slices.Sorted(slices.Values(ss.ids))
	epoch := b.ctl.epoch.Load()
	if ss.unknown || (slices.Equal(next, cur) && !ss.changing) {
		b.ctl.mu.Unlock()
		return
	}
	// NB: from here until the outcome is learnt, sends need both sets.
	b.ctl.syncSet.Store(ss.asking(next, me))
	b.ctl.mu.Unlock()
	ctx, cancel := b.ctlContext()
	defer cancel()
	newEpoch, err := b.ctl.client.AlterSyncStateSet(ctx, b.cfg.BrokerName, me, epoch, next, ss.epoch)
	var ce *controller.Error
	switch {
	case err == nil:
		b.logger.Info("broker: SyncStateSet changed", "from", cur, "to", next, "epoch", newEpoch)
		b.ctl.mu.Lock()
		if now := b.ctl.syncSet.Load(); now.epoch == ss.epoch && b.ctl.epoch.Load() == epoch {
			b.ctl.syncSet.Store(newSyncState(next, newEpoch, me))
		}
		b.ctl.mu.Unlock()
		m.Kick()
	case errors.Is(err, controller.ErrNoController) || !errors.As(err, &ce):
		// NB: the change may have committed: both sets stay needed
		// until the next round asks again or a heartbeat tells.
		b.logger.Warn("broker: alter the SyncStateSet; outcome unknown, asking again", "from", cur, "to", next, "err", err)
	case ce.Code == protocol.ControllerFencedSyncStateSetEpoch:
		b.logger.Info("broker: the controllers have a newer SyncStateSet; re-reading it", "epoch", ss.epoch)
		b.rereadSyncStateSet()
	case ce.Code == protocol.ControllerFencedMasterEpoch || ce.Code == protocol.ControllerInvalidMaster:
		b.fence(fmt.Sprintf("the controllers deposed it: %v", err))
	default:
		b.logger.Warn("broker: alter the SyncStateSet refused", "from", cur, "to", next, "err", err)
	}
}

// registrationID is the broker id the nameservers are told: 0 for the
// master (clients send to id 0), the broker's own otherwise.
func (b *Broker) registrationID() int64 {
	if b.ctl == nil {
		return b.cfg.BrokerID
	}
	if b.ctl.role.Load() == roleMaster {
		return 0
	}
	return max(b.ctl.id.Load(), 1)
}

// controllerStatus is the controller-mode part of brokerStatus.
func (b *Broker) controllerStatus(out map[string]string) {
	if b.ctl == nil {
		return
	}
	role := map[int32]string{roleNone: "NONE", roleMaster: "MASTER", roleSlave: "SLAVE"}[b.ctl.role.Load()]
	out["brokerRole"] = role
	out["brokerId"] = strconv.FormatInt(b.ctl.id.Load(), 10)
	out["controllerBrokerId"] = out["brokerId"] // NB: the controllers' id; the route's is 0 for a master
	out["controllerEpoch"] = strconv.FormatInt(int64(b.ctl.epoch.Load()), 10)
	out["controllerMasterId"] = strconv.FormatInt(b.ctl.masterID.Load(), 10)
	b.cutStatus(out)
	if ss := b.ctl.syncSet.Load(); ss != nil && role == "MASTER" {
		out["syncStateSet"] = fmt.Sprint(ss.ids)
		out["syncStateSetEpoch"] = strconv.FormatInt(int64(ss.epoch), 10)
		if ss.changing {
			out["syncStateSetPending"] = fmt.Sprint(ss.pending) // NB: sends need both sets meanwhile
		}
	}
	// NB: how long this broker may go on acknowledging as master without a
	// controller leader answering it (0: it may not).
	out["masterLeaseLeftMs"] = strconv.FormatInt(max(b.leaseLeft(), 0).Milliseconds(), 10)
}

// listenHA binds the HA port (ha.listen, else the listen port + 1) and
// returns it with its advertised address.
func (b *Broker) listenHA() (net.Listener, string, error) {
	listen := b.cfg.HA.Listen
	if listen == "" {
		// NB: the listen port + 1, as Java's 10912; a broker on a port
		// picked at run time (port 0) gets one picked too.
		host, port, err := net.SplitHostPort(b.cfg.Listen)
		if err != nil {
			return nil, "", err
		}
		p, _ := strconv.Atoi(port)
		if p != 0 {
			p++
		}
		listen = net.JoinHostPort(host, strconv.Itoa(p))
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, "", fmt.Errorf("broker: ha listen %s (ha.listen; default the listen port + 1): %w", listen, err)
	}
	addr := b.cfg.HA.Advertise
	if addr == "" {
		addr = advertised(ln.Addr(), b.logger, "ha.advertise")
	}
	return ln, addr, nil
}
