package controller

import (
	"cmp"
	"slices"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
)

// electLoop is the leader's watch over masters: every CheckInterval, and
// at once when a broker's connection closes, it replaces each master that
// is not alive.
func (n *Node) electLoop() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-n.quit:
			return
		case <-t.C:
		case <-n.kick:
		}
		if !n.leaderReady.Load() {
			continue
		}
		for _, g := range n.fsm.groups() {
			n.checkMaster(g)
		}
	}
}

// kickElect makes electLoop look now.
func (n *Node) kickElect() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// alive reports whether broker id of name is alive as this node heard it.
//
// NB: brokers heartbeat to every controller (Java's ReplicasManager does
// too), so a node's table is complete from its start on; a broker silent
// since before then gets one master timeout of grace from the start. A new
// leader does not restart the grace: a master that died before the leader
// changed, and was already declared dead, stays dead.
func (n *Node) alive(name string, id int64) bool {
	return n.live.alive(memberKey{name, id}, n.now(), n.opened, n.cfg.MasterTimeout)
}

// leaseHeld reports whether broker id of name, as master, may still be
// acknowledging sends although it is not alive: its lease (plus
// LeaseMargin) has not run out since the last heartbeat this node heard,
// or since this node began to lead, and it did not resign (see
// liveness.leaseHeld). Its replacement waits until it has.
func (n *Node) leaseHeld(name string, id int64) bool {
	since := n.opened
	if at := n.readyAt.Load(); at != nil && at.After(since) {
		since = *at
	}
	return n.live.leaseHeld(memberKey{name, id}, n.now(), since, n.cfg.MasterTimeout, n.cfg.LeaseMargin)
}

// checkMaster elects a new master for g if its master is dead (or it has
// none, after having had one), from the alive in-sync replicas; with none
// it clears the master, so that the old one, if it comes back, learns it is
// no longer master. A master that is not alive but may still hold its
// lease (its connection closed a moment ago) is replaced only once the
// lease ran out, unless it resigned: two masters never acknowledge at once.
func (n *Node) checkMaster(g *Group) {
	if g.MasterEpoch == 0 || (g.MasterID != NoMaster && (n.alive(g.Name, g.MasterID) || n.leaseHeld(g.Name, g.MasterID))) {
		return
	}
	cand := n.candidate(g, g.MasterID)
	if cand == NoMaster && g.MasterID == NoMaster {
		return
	}
	if g.MasterID != NoMaster {
		b, heard := n.live.get(memberKey{g.Name, g.MasterID})
		if !heard {
			b.at = n.opened // silent since this node started
		}
		n.log.Info("controller: master is not alive", "broker", g.Name, "master", g.MasterID, "heard", heard,
			"silent_for", n.now().Sub(b.at).Round(time.Millisecond), "connection_closed", b.gone, "resigned", b.resigned)
	}
	res, err := n.propose(&command{Op: opElect, Elect: &electCmd{Name: g.Name, NewMaster: cand, ExpectEpoch: g.MasterEpoch}})
	switch {
	case err != nil:
		n.log.Warn("controller: election not applied", "broker", g.Name, "err", err)
	case res.Code != protocol.Success:
		n.log.Info("controller: election refused", "broker", g.Name, "remark", res.Remark)
	case cand == NoMaster:
		n.log.Warn("controller: master is dead and no in-sync replica is alive; no master until one comes back"+
			" (or set controller.elect_unclean)", "broker", g.Name, "old_master", g.MasterID,
			"sync_state_set", g.SyncStateSet)
	default:
		n.log.Info("controller: new master elected", "broker", g.Name, "old_master", g.MasterID,
			"master", cand, "epoch", res.Group.MasterEpoch)
	}
}

// candidate picks the best alive replica to be g's master, other than
// exclude: from the SyncStateSet, or with ElectUnclean from the other
// members when no in-sync one is alive. Best is the highest epoch and end
// offset heard in heartbeats, then the lowest electionPriority, then the
// lowest id. NoMaster when there is none.
func (n *Node) candidate(g *Group, exclude int64) int64 {
	pick := func(inSync bool) int64 {
		var ids []int64
		for id := range g.Members {
			if id != exclude && g.InSync(id) == inSync && n.alive(g.Name, id) {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return NoMaster
		}
		return slices.MinFunc(ids, func(a, b int64) int {
			ba, _ := n.live.get(memberKey{g.Name, a})
			bb, _ := n.live.get(memberKey{g.Name, b})
			return cmp.Or(cmp.Compare(bb.epoch, ba.epoch), cmp.Compare(bb.maxOffset, ba.maxOffset),
				cmp.Compare(ba.priority, bb.priority), cmp.Compare(a, b))
		})
	}
	if id := pick(true); id != NoMaster || !n.cfg.ElectUnclean {
		return id
	}
	return pick(false)
}
