package controller

import (
	"fmt"
	"maps"
	"slices"

	"github.com/sluicemq/sluice/internal/protocol"
)

// Member is one broker of a group as the controller knows it.
type Member struct {
	ID     int64  `json:"id"`
	Addr   string `json:"addr"`             // remoting address
	HAAddr string `json:"haAddr,omitempty"` // HA listen address
	// Account is the ACL access key it registered with ("": none); only
	// that account may move it to another address.
	Account string `json:"account,omitempty"`
}

// Group is the replicated state of one broker group (one broker name):
// its members, its master and the master's epoch, and its SyncStateSet.
// It holds no liveness: that is the leader's, in memory.
//
// INVARIANT: MasterID is NoMaster or a member; a master is in its
// SyncStateSet; epochs only grow.
type Group struct {
	Cluster string           `json:"cluster"`
	Name    string           `json:"name"`
	Members map[int64]Member `json:"members"`
	// NextID is the id the next broker registering without one gets.
	NextID int64 `json:"nextId"`
	// MasterID is the master's broker id, NoMaster when there is none.
	MasterID    int64 `json:"masterId"`
	MasterEpoch int32 `json:"masterEpoch"`
	// SyncStateSet lists the in-sync replicas' ids, sorted.
	SyncStateSet      []int64 `json:"syncStateSet"`
	SyncStateSetEpoch int32   `json:"syncStateSetEpoch"`
}

// NoMaster is Group.MasterID when a group has no master.
const NoMaster = protocol.NoBrokerID

// firstBrokerID is the id of the first broker that registers without one.
// Controller ids are not nameserver ids: a broker registers with the
// nameservers as 0 while it is master.
const firstBrokerID = 1

func (g *Group) clone() *Group {
	c := *g
	c.Members = maps.Clone(g.Members)
	c.SyncStateSet = slices.Clone(g.SyncStateSet)
	return &c
}

// InSync reports whether id is in the SyncStateSet.
func (g *Group) InSync(id int64) bool { return slices.Contains(g.SyncStateSet, id) }

// Master returns the master member, or false when there is none.
func (g *Group) Master() (Member, bool) {
	if g.MasterID == NoMaster {
		return Member{}, false
	}
	m, ok := g.Members[g.MasterID]
	return m, ok
}

// state is the FSM's data: every group by broker name, and every
// controller node's remoting address by node id (what a follower tells a
// client looking for the leader).
type state struct {
	Groups map[string]*Group `json:"groups"`
	Nodes  map[string]string `json:"nodes"`
}

func newState() *state {
	return &state{Groups: map[string]*Group{}, Nodes: map[string]string{}}
}

// Commands applied through Raft. Each carries the decision the leader made
// (which id, which master) and the epochs it saw, so that applying it is
// deterministic and a decision made on stale state is refused rather than
// applied twice.
type command struct {
	Op       string       `json:"op"`
	Register *registerCmd `json:"register,omitempty"`
	Elect    *electCmd    `json:"elect,omitempty"`
	Alter    *alterCmd    `json:"alter,omitempty"`
	Announce *announceCmd `json:"announce,omitempty"`
}

const (
	opRegister = "register"
	opElect    = "elect"
	opAlter    = "alter"
	opAnnounce = "announce"
)

// registerCmd adds a broker to its group or updates its addresses. ID
// NoBrokerID (or 0) means: the id of the member with Addr, else the next
// free one. The first broker of a group that never had a master becomes
// its master.
type registerCmd struct {
	Cluster string `json:"cluster"`
	Name    string `json:"name"`
	ID      int64  `json:"id"`
	Addr    string `json:"addr"`
	HAAddr  string `json:"haAddr,omitempty"`
	// Apply (Java's APPLY_BROKER_ID) refuses an ID another address holds
	// instead of moving it.
	Apply bool `json:"apply,omitempty"`
	// Account is the access key the registration was signed with.
	Account string `json:"account,omitempty"`
}

// electCmd makes NewMaster the master (NoMaster: the master is gone and
// none was elected) if the group's master epoch is still ExpectEpoch.
type electCmd struct {
	Name        string `json:"name"`
	NewMaster   int64  `json:"newMaster"`
	ExpectEpoch int32  `json:"expectEpoch"`
}

// alterCmd replaces the SyncStateSet, as the master MasterID of epoch
// MasterEpoch asked, if the set's epoch is still SetEpoch.
type alterCmd struct {
	Name        string  `json:"name"`
	MasterID    int64   `json:"masterId"`
	MasterEpoch int32   `json:"masterEpoch"`
	SetEpoch    int32   `json:"setEpoch"`
	NewSet      []int64 `json:"newSet"`
}

// announceCmd records a controller node's remoting address (a new leader
// applies it so that followers can point clients at it).
type announceCmd struct {
	NodeID string `json:"nodeId"`
	Addr   string `json:"addr"`
}

// result is what applying a command returns: a response code (Success or
// a controller code) with a remark, the group after the command, and
// whether its master or SyncStateSet changed (members are told then).
type result struct {
	Code     int16
	Remark   string
	Group    *Group // a copy; nil for announce and unknown groups
	BrokerID int64  // register: the broker's id
	Changed  bool
}

func refuse(code int16, format string, args ...any) result {
	return result{Code: code, Remark: fmt.Sprintf(format, args...), BrokerID: NoMaster}
}

// apply runs cmd against s. It never panics on any command, so a bad
// entry in the log refuses instead of stopping every node.
func (s *state) apply(cmd *command) result {
	switch {
	case cmd.Op == opRegister && cmd.Register != nil:
		return s.register(cmd.Register)
	case cmd.Op == opElect && cmd.Elect != nil:
		return s.elect(cmd.Elect)
	case cmd.Op == opAlter && cmd.Alter != nil:
		return s.alter(cmd.Alter)
	case cmd.Op == opAnnounce && cmd.Announce != nil:
		s.Nodes[cmd.Announce.NodeID] = cmd.Announce.Addr
		return result{Code: protocol.Success, BrokerID: NoMaster}
	}
	return refuse(protocol.ControllerInvalidRequest, "controller: unknown command %q", cmd.Op)
}

func (s *state) register(c *registerCmd) result {
	g := s.Groups[c.Name]
	if g == nil {
		g = &Group{Cluster: c.Cluster, Name: c.Name, Members: map[int64]Member{},
			NextID: firstBrokerID, MasterID: NoMaster}
		s.Groups[c.Name] = g
	}
	id := c.ID
	if id <= 0 {
		id = NoMaster
		for _, m := range g.Members {
			if m.Addr == c.Addr {
				id = m.ID
				break
			}
		}
		if id == NoMaster {
			id = g.NextID
		}
	}
	if m, ok := g.Members[id]; ok && c.Apply && m.Addr != c.Addr {
		return refuse(protocol.ControllerBrokerIDInvalid,
			"controller: broker id %d of %s is %s's; ask for the next free id (CONTROLLER_GET_NEXT_BROKER_ID)", id, c.Name, m.Addr)
	}
	if m, ok := g.Members[id]; ok && m.Addr != c.Addr && m.Account != "" && m.Account != c.Account {
		return refuse(protocol.ControllerBrokerIDInvalid,
			"controller: broker %d of %s (at %s) registered with access key %q; only that account may move it to %s",
			id, c.Name, m.Addr, m.Account, c.Addr)
	}
	for _, m := range g.Members {
		if m.Addr == c.Addr && m.ID != id {
			return refuse(protocol.ControllerBrokerIDInvalid,
				"controller: address %s is broker %d of %s, not %d; register without a broker id or with %d",
				c.Addr, m.ID, c.Name, id, m.ID)
		}
	}
	g.Members[id] = Member{ID: id, Addr: c.Addr, HAAddr: c.HAAddr, Account: c.Account}
	if id >= g.NextID {
		g.NextID = id + 1
	}
	res := result{Code: protocol.Success, BrokerID: id}
	if g.MasterID == NoMaster && g.MasterEpoch == 0 && len(g.SyncStateSet) == 0 {
		// The group's first broker: nothing was ever acknowledged, so it
		// is master at once (Java's isFirstTimeForElect).
		g.MasterID, g.MasterEpoch = id, 1
		g.SyncStateSet, g.SyncStateSetEpoch = []int64{id}, 1
		res.Changed = true
	}
	res.Group = g.clone()
	return res
}

func (s *state) elect(c *electCmd) result {
	g := s.Groups[c.Name]
	if g == nil {
		return refuse(protocol.ControllerBrokerNeedToBeRegistered, "controller: no broker of %s has registered", c.Name)
	}
	if g.MasterEpoch != c.ExpectEpoch {
		return refuse(protocol.ControllerFencedMasterEpoch,
			"controller: %s is at master epoch %d, the election was decided at %d; retry", c.Name, g.MasterEpoch, c.ExpectEpoch)
	}
	if c.NewMaster == NoMaster {
		if g.MasterID == NoMaster {
			return result{Code: protocol.Success, Group: g.clone(), BrokerID: NoMaster}
		}
		g.MasterID = NoMaster
		return result{Code: protocol.Success, Group: g.clone(), BrokerID: NoMaster, Changed: true}
	}
	if _, ok := g.Members[c.NewMaster]; !ok {
		return refuse(protocol.ControllerInvalidMaster, "controller: broker %d is not a member of %s", c.NewMaster, c.Name)
	}
	g.MasterID = c.NewMaster
	g.MasterEpoch++
	g.SyncStateSet = []int64{c.NewMaster}
	g.SyncStateSetEpoch++
	return result{Code: protocol.Success, Group: g.clone(), BrokerID: c.NewMaster, Changed: true}
}

func (s *state) alter(c *alterCmd) result {
	g := s.Groups[c.Name]
	set, bad := g.checkAlter(c)
	if bad != nil {
		return *bad
	}
	g.SyncStateSet = set
	g.SyncStateSetEpoch++
	return result{Code: protocol.Success, Group: g.clone(), BrokerID: NoMaster, Changed: true}
}

// checkAlter checks c against g (which may be nil) and returns the new set,
// sorted without repeats, or the refusal. Fencing comes first: a deposed
// master hears that it is deposed, whatever else is wrong.
func (g *Group) checkAlter(c *alterCmd) ([]int64, *result) {
	no := func(code int16, format string, args ...any) ([]int64, *result) {
		r := refuse(code, format, args...)
		return nil, &r
	}
	switch {
	case g == nil:
		return no(protocol.ControllerBrokerNeedToBeRegistered, "controller: no broker of %s has registered", c.Name)
	case c.MasterEpoch != g.MasterEpoch:
		return no(protocol.ControllerFencedMasterEpoch,
			"controller: %s is at master epoch %d, the request is from epoch %d: broker %d is no longer its master",
			c.Name, g.MasterEpoch, c.MasterEpoch, c.MasterID)
	case c.SetEpoch != g.SyncStateSetEpoch:
		return no(protocol.ControllerFencedSyncStateSetEpoch,
			"controller: %s's SyncStateSet is at epoch %d, the request changes epoch %d; get the replica info and retry",
			c.Name, g.SyncStateSetEpoch, c.SetEpoch)
	case c.MasterID != g.MasterID:
		return no(protocol.ControllerInvalidMaster, "controller: broker %d is not the master of %s (%d is)",
			c.MasterID, c.Name, g.MasterID)
	}
	set := slices.Compact(slices.Sorted(slices.Values(c.NewSet)))
	if !slices.Contains(set, g.MasterID) {
		return no(protocol.ControllerInvalidReplicas, "controller: the new SyncStateSet %v of %s leaves out its master %d",
			set, c.Name, g.MasterID)
	}
	for _, id := range set {
		if _, ok := g.Members[id]; !ok {
			return no(protocol.ControllerInvalidReplicas, "controller: broker %d in the new SyncStateSet is not a member of %s",
				id, c.Name)
		}
	}
	return set, nil
}
