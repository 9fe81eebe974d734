package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// The node's operations, what the remoting front serves. Writes and reads
// of replica state go to the leader only (ErrNotLeader elsewhere), so a
// broker never acts on a follower's stale view; heartbeats go to every node.

// Role is a group's master and SyncStateSet as the controller has them.
type Role struct {
	BrokerID          int64 // Register: the id the broker registered as; else NoMaster
	MasterID          int64 // NoMaster: none
	MasterAddr        string
	MasterHAAddr      string
	MasterEpoch       int32
	SyncStateSet      []int64
	SyncStateSetEpoch int32
}

// IsMaster reports whether the registered broker is the master.
func (r Role) IsMaster() bool { return r.BrokerID != NoMaster && r.BrokerID == r.MasterID }

func roleOf(g *Group) Role {
	r := Role{BrokerID: NoMaster, MasterID: g.MasterID, MasterEpoch: g.MasterEpoch,
		SyncStateSet: slices.Clone(g.SyncStateSet), SyncStateSetEpoch: g.SyncStateSetEpoch}
	if m, ok := g.Master(); ok {
		r.MasterAddr, r.MasterHAAddr = m.Addr, m.HAAddr
	}
	return r
}

// Registration is a broker asking to join its group.
type Registration struct {
	Cluster string
	Name    string
	ID      int64 // NoMaster (or 0): the controller picks
	Addr    string
	HAAddr  string
	// Apply refuses an ID held by another address (Java's APPLY_BROKER_ID)
	// instead of moving that broker to Addr.
	Apply bool
	// Lease is the broker's lease as master (Sluice; see Heartbeat.Lease).
	Lease time.Duration
	// Account is the ACL access key the request was signed with ("" for
	// none). A member's address moves only by its own account.
	Account string
}

// Heartbeat is a broker's BROKER_HEARTBEAT.
type Heartbeat struct {
	Cluster   string
	Name      string
	ID        int64
	Addr      string
	Epoch     int32
	MaxOffset int64
	Timeout   time.Duration // 0: the controller's master timeout
	Priority  int32
	// Lease (Sluice) is how long the broker, as master, goes on
	// acknowledging after sending a heartbeat the leader answered. The
	// leader replaces it only once that long, plus Config.LeaseMargin,
	// passed since its last heartbeat, even when its connection closed.
	// 0: no lease (a Java broker), replaced when its connection closes.
	Lease time.Duration
	// Resign (Sluice): the broker has stopped taking sends and gives up
	// being master of Epoch: the leader replaces it at once.
	Resign bool
}

func (n *Node) leading() error {
	select {
	case <-n.quit:
		return ErrClosed
	default:
	}
	if !n.leaderReady.Load() {
		return ErrNotLeader
	}
	return nil
}

// Register adds a broker to its group (or updates its addresses) and
// returns its id and the group's role. The first broker of a new group is
// its master. conn, when not nil, is where role changes are pushed until a
// heartbeat names another.
func (n *Node) Register(r Registration, conn *remoting.Conn, st remoting.SerializeType) (Role, error) {
	if err := n.leading(); err != nil {
		return Role{}, err
	}
	if err := n.checkMove(r); err != nil {
		return Role{}, err
	}
	res, err := n.propose(&command{Op: opRegister, Register: &registerCmd{Cluster: r.Cluster, Name: r.Name,
		ID: r.ID, Addr: r.Addr, HAAddr: r.HAAddr, Apply: r.Apply, Account: r.Account}})
	if err != nil {
		return Role{}, err
	}
	if err := res.err(); err != nil {
		return Role{}, err
	}
	n.live.record(memberKey{r.Name, res.BrokerID}, beat{at: n.now(), lease: r.Lease, conn: conn, st: st})
	role := roleOf(res.Group)
	role.BrokerID = res.BrokerID
	return role, nil
}

// checkMove refuses a registration that names the id of a member at
// another address while that member is alive: a broker moves only once
// its old self is gone (its connection closed or its heartbeats stopped),
// and, when it registered with an account, only by that account (the
// FSM checks that part). Without it, anyone could take a member's id,
// receive its role notices, be elected in its place and make every real
// replica cut its log to the stranger's.
func (n *Node) checkMove(r Registration) error {
	if r.ID <= 0 || r.Apply {
		return nil // NB: without an id the address picks it; Apply refuses a taken id itself
	}
	g := n.fsm.group(r.Name)
	if g == nil {
		return nil
	}
	m, ok := g.Members[r.ID]
	if !ok || m.Addr == r.Addr || !n.alive(r.Name, r.ID) {
		return nil
	}
	return &Error{Code: protocol.ControllerBrokerIDInvalid, Remark: fmt.Sprintf(
		"controller: broker %d of %s is alive at %s; %s cannot take its id (register without a broker id, or stop that broker first)",
		r.ID, r.Name, m.Addr, r.Addr)}
}

// NextBrokerID returns the id the next broker of name registering without
// one would get (Java's CONTROLLER_GET_NEXT_BROKER_ID).
func (n *Node) NextBrokerID(name string) (int64, error) {
	if err := n.leading(); err != nil {
		return 0, err
	}
	if g := n.fsm.group(name); g != nil {
		return g.NextID, nil
	}
	return firstBrokerID, nil
}

// Heartbeat records that a broker is alive (or, with Resign, that it gave
// up being master). Any node takes it. It returns the broker's group as
// this node knows it (nil when unknown).
func (n *Node) Heartbeat(h Heartbeat, conn *remoting.Conn, st remoting.SerializeType) *Group {
	n.live.record(memberKey{h.Name, h.ID}, beat{at: n.now(), timeout: h.Timeout, epoch: h.Epoch,
		maxOffset: h.MaxOffset, priority: h.Priority, lease: h.Lease, resigned: h.Resign, conn: conn, st: st})
	if h.Resign {
		n.log.Info("controller: broker gave up being master", "broker", h.Name, "id", h.ID, "epoch", h.Epoch)
		n.kickElect()
	}
	return n.fsm.group(h.Name)
}

// ConnClosed tells the node a remoting connection closed: the brokers that
// heartbeat over it are dead now.
func (n *Node) ConnClosed(c *remoting.Conn) {
	if n.live.connClosed(c) {
		n.kickElect()
	}
}

// ReplicaInfo returns the named group's role.
func (n *Node) ReplicaInfo(name string) (Role, error) {
	if err := n.leading(); err != nil {
		return Role{}, err
	}
	g := n.fsm.group(name)
	if g == nil {
		return Role{}, &Error{Code: protocol.ControllerBrokerMetadataNotExist,
			Remark: "no broker of " + name + " has registered with the controller"}
	}
	return roleOf(g), nil
}

// AlterSyncStateSet replaces a group's SyncStateSet, as its master of
// masterEpoch asks; set is the new set, setEpoch the epoch of the set the
// master last learnt. Every broker added must be alive. It returns the new
// set's epoch.
func (n *Node) AlterSyncStateSet(name string, masterID int64, masterEpoch int32, set []int64, setEpoch int32) (int32, error) {
	if err := n.leading(); err != nil {
		return 0, err
	}
	cmd := &alterCmd{Name: name, MasterID: masterID, MasterEpoch: masterEpoch, SetEpoch: setEpoch, NewSet: set}
	g := n.fsm.group(name)
	if _, bad := g.checkAlter(cmd); bad != nil {
		return 0, bad.err()
	}
	for _, id := range set {
		if !g.InSync(id) && !n.alive(name, id) {
			return 0, &Error{Code: protocol.ControllerInvalidReplicas,
				Remark: "broker " + itoa(id) + " cannot join the SyncStateSet of " + name + ": it is not alive"}
		}
	}
	res, err := n.propose(&command{Op: opAlter, Alter: cmd})
	if err != nil {
		return 0, err
	}
	if err := res.err(); err != nil {
		return 0, err
	}
	return res.Group.SyncStateSetEpoch, nil
}

// ElectMaster elects a master for a group. With id >= 0 it is a planned
// switchover to that broker, which must be alive and in the SyncStateSet
// (or any alive member with ElectUnclean); with NoMaster the controller
// picks an alive in-sync replica, if the master is not alive.
func (n *Node) ElectMaster(name string, id int64) (Role, error) {
	if err := n.leading(); err != nil {
		return Role{}, err
	}
	g := n.fsm.group(name)
	if g == nil {
		return Role{}, &Error{Code: protocol.ControllerBrokerNeedToBeRegistered, Remark: "no broker of " + name + " has registered"}
	}
	still := func() (Role, error) {
		return roleOf(g), &Error{Code: protocol.ControllerMasterStillExist,
			Remark: "broker " + itoa(g.MasterID) + " is the alive master of " + name + " already"}
	}
	cand := id
	switch {
	case id >= 0:
		if _, ok := g.Members[id]; !ok {
			return Role{}, &Error{Code: protocol.ControllerBrokerMetadataNotExist,
				Remark: "broker " + itoa(id) + " is not a member of " + name}
		}
		if id == g.MasterID && n.alive(name, id) {
			return still()
		}
		if !g.InSync(id) && !n.cfg.ElectUnclean {
			return Role{}, &Error{Code: protocol.ControllerElectMasterFailed,
				Remark: "broker " + itoa(id) + " is not in the SyncStateSet of " + name + " " + fmtIDs(g.SyncStateSet) +
					": it may lack acknowledged messages (set controller.elect_unclean to allow it)"}
		}
		if !n.alive(name, id) {
			return Role{}, &Error{Code: protocol.ControllerBrokerNotAlive,
				Remark: "broker " + itoa(id) + " of " + name + " is not alive (no heartbeat within the master timeout)"}
		}
	case g.MasterID != NoMaster && (n.alive(name, g.MasterID) || n.leaseHeld(name, g.MasterID)):
		return still()
	default:
		if cand = n.candidate(g, g.MasterID); cand == NoMaster {
			return Role{}, &Error{Code: protocol.ControllerMasterNotAvailable,
				Remark: "no alive in-sync replica of " + name + " " + fmtIDs(g.SyncStateSet) + " to elect"}
		}
	}
	res, err := n.propose(&command{Op: opElect, Elect: &electCmd{Name: name, NewMaster: cand, ExpectEpoch: g.MasterEpoch}})
	if err != nil {
		return Role{}, err
	}
	if err := res.err(); err != nil {
		return Role{}, err
	}
	n.log.Info("controller: master elected on request", "broker", name, "master", cand, "epoch", res.Group.MasterEpoch)
	return roleOf(res.Group), nil
}

// SyncStateData returns, for each named group (every group when names is
// empty), its master and its replicas in and out of sync, with liveness.
func (n *Node) SyncStateData(names []string) (protocol.BrokerReplicasInfo, error) {
	out := protocol.BrokerReplicasInfo{ReplicasInfoTable: map[string]protocol.ReplicasInfo{}}
	if err := n.leading(); err != nil {
		return out, err
	}
	groups := n.fsm.groups()
	for _, g := range groups {
		if len(names) > 0 && !slices.Contains(names, g.Name) {
			continue
		}
		ri := protocol.ReplicasInfo{MasterBrokerID: g.MasterID, MasterEpoch: g.MasterEpoch,
			SyncStateSetEpoch: g.SyncStateSetEpoch, InSyncReplicas: []protocol.ReplicaIdentity{},
			NotInSyncReplicas: []protocol.ReplicaIdentity{}}
		if m, ok := g.Master(); ok {
			ri.MasterAddress = m.Addr
		}
		ids := slices.Sorted(func(yield func(int64) bool) {
			for id := range g.Members {
				if !yield(id) {
					return
				}
			}
		})
		for _, id := range ids {
			rid := protocol.ReplicaIdentity{BrokerName: g.Name, BrokerID: id, BrokerAddress: g.Members[id].Addr,
				Alive: n.alive(g.Name, id)}
			if g.InSync(id) {
				ri.InSyncReplicas = append(ri.InSyncReplicas, rid)
			} else {
				ri.NotInSyncReplicas = append(ri.NotInSyncReplicas, rid)
			}
		}
		out.ReplicasInfoTable[g.Name] = ri
	}
	return out, nil
}

// applied is the FSM's hook: a committed change of g's master or
// SyncStateSet. The leader tells the members, whoever proposed the change
// and whatever its proposer's call returned (it may have timed out, or
// been proposed by a leader since deposed); a new leader tells every
// group's members once it is ready (lead), for the changes it applied
// before.
func (n *Node) applied(g *Group) {
	if n.leaderReady.Load() {
		n.queueNotify(g)
	}
}

// queueNotify hands a changed group to notifyLoop. NB: a full queue drops
// the notice; brokers learn the role from their next heartbeat's answer.
func (n *Node) queueNotify(g *Group) {
	select {
	case n.notify <- g:
	default:
		n.log.Warn("controller: role change notices queue full; members learn it from heartbeats", "broker", g.Name)
	}
}

// notifyTimeout bounds one NOTIFY_BROKER_ROLE_CHANGED write.
const notifyTimeout = 3 * time.Second

// notifyLoop pushes NOTIFY_BROKER_ROLE_CHANGED (oneway) to every member of
// a changed group over the connection it heartbeats on.
func (n *Node) notifyLoop() {
	defer n.wg.Done()
	for {
		select {
		case <-n.quit:
			return
		case g := <-n.notify:
			for id := range g.Members {
				b, ok := n.live.get(memberKey{g.Name, id})
				if !ok || b.conn == nil || b.conn.Closed() {
					continue
				}
				req, err := roleNotice(g, b.st)
				if err == nil {
					ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
					_, err = b.conn.Invoke(ctx, req, remoting.Oneway())
					cancel()
				}
				if err != nil {
					n.log.Debug("controller: role change notice not sent", "broker", g.Name, "id", id, "err", err)
				}
			}
		}
	}
}

// roleNotice is the NOTIFY_BROKER_ROLE_CHANGED request for g.
func roleNotice(g *Group, st remoting.SerializeType) (*remoting.Command, error) {
	body, err := remoting.EncodeBody(st, protocol.SyncStateSet{SyncStateSet: g.SyncStateSet, SyncStateSetEpoch: g.SyncStateSetEpoch})
	if err != nil {
		return nil, err
	}
	return remoting.NewRequest(protocol.NotifyBrokerRoleChanged, protocol.Ext(roleHeader(g)), body), nil
}

// roleHeader is g's role as the ext fields controllers send.
func roleHeader(g *Group) *protocol.ControllerRoleHeader {
	r := roleOf(g)
	return &protocol.ControllerRoleHeader{MasterBrokerID: r.MasterID, MasterAddress: r.MasterAddr,
		MasterHAAddress: r.MasterHAAddr, MasterEpoch: r.MasterEpoch, SyncStateSetEpoch: r.SyncStateSetEpoch,
		BrokerID: NoMaster}
}
