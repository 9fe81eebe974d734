package broker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
	"github.com/sluicemq/sluice/internal/statefile"
)

// The cut guard (issue 40): a broker in controller mode cuts its log to
// follow a new master only down to its confirmed offset, the highest
// offset it knows its group acknowledged. A cut below it would drop
// messages producers were told are safe: the controllers elected a replica
// that lacks them (an unclean election, a member faked by whoever reached
// the controllers), and following it would make every replica lose them.
// Such a cut is refused and logged, the broker stays out of the group, and
// an operator decides: mqadmin allowLogCut -b ADDR [-o OFFSET] lets it
// cut (down to OFFSET, default the cut it refused), after, say, saving
// its store.
//
// The confirmed offset: a master's is the lowest end every slave of the
// SyncStateSet has acknowledged (its log's end while the set is the
// master alone and at least ha.min_in_sync_replicas): a lower bound of
// what it answered SUCCESS. A slave's is the least of its master's
// (GET_BROKER_EPOCH_CACHE's confirmedOffset, asked every confirmEvery)
// and its own end. It only grows, kept in the store's "confirmed" file,
// except when an allowed cut lowers it. Being a lower bound, learnt with
// a lag, it never refuses a cut that keeps everything acknowledged; a cut
// of what was acknowledged in the last confirmEvery may go unnoticed.

// confirmEvery is how often the confirmed offset is updated and saved.
const confirmEvery = time.Second

// confirmedFile holds the confirmed offset under the store directory.
func confirmedFile(dir string) string { return filepath.Join(dir, "confirmed") }

type confirmedState struct {
	Offset int64 `msgpack:"offset"`
}

// cutGuard is the broker's confirmed offset and the operator's allowance.
type cutGuard struct {
	path      string
	confirmed atomic.Int64 // the highest offset known acknowledged
	saved     int64        // what the file holds; confirmLoop's alone
	allowTo   atomic.Int64 // an operator allows a cut down to this (-1: none)
	refused   atomic.Int64 // the cut last refused (-1: none)

	mu      sync.Mutex // leaf: the refusal last logged
	lastLog string
}

// openCutGuard loads the confirmed offset; a cut being made now (allowed,
// or at least the confirmed offset) lowers it to the cut.
func openCutGuard(dir string, cut int64, cutting bool) (*cutGuard, error) {
	g := &cutGuard{path: confirmedFile(dir)}
	g.allowTo.Store(-1)
	g.refused.Store(-1)
	var st confirmedState
	if err := statefile.Load(g.path, &st); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("broker: read the confirmed offset: %w", err)
	}
	if cutting && cut < st.Offset {
		st.Offset = cut
		if err := statefile.Save(g.path, st); err != nil {
			return nil, fmt.Errorf("broker: save the confirmed offset: %w", err)
		}
	}
	g.confirmed.Store(st.Offset)
	g.saved = st.Offset
	return g, nil
}

// mayCut decides a cut of the log to at: at or above the confirmed offset,
// or allowed by an operator (the allowance is used up). Otherwise it logs
// the refusal (once per cut, master and epoch) and remembers it.
func (b *Broker) mayCut(at, end, masterID int64, masterAddr string, epoch int32) bool {
	g := b.ctl.guard
	confirmed := g.confirmed.Load()
	if at >= confirmed {
		return true
	}
	if a := g.allowTo.Load(); a >= 0 && at >= a && g.allowTo.CompareAndSwap(a, -1) {
		b.logger.Warn("broker: cutting the log below its confirmed offset, as an operator allowed (mqadmin allowLogCut)",
			"at", at, "confirmed", confirmed, "end", end, "master", masterID, "epoch", epoch)
		g.refused.Store(-1)
		return true
	}
	g.refused.Store(at)
	key := fmt.Sprint(at, masterID, epoch)
	g.mu.Lock()
	logIt := g.lastLog != key
	g.lastLog = key
	g.mu.Unlock()
	if logIt {
		b.logger.Error("broker: refusing to cut the log below what its group acknowledged: the new master lacks "+
			"acknowledged messages; this broker stays out of the group until an operator decides "+
			"(mqadmin allowLogCut -b "+b.addr+" lets it cut; save its store first to keep them)",
			"cut_to", at, "confirmed", confirmed, "end", end, "master", masterID, "master_addr", masterAddr, "epoch", epoch)
	}
	return false
}

// confirmLoop keeps the confirmed offset and saves it when it grew.
func (b *Broker) confirmLoop() {
	defer b.wg.Done()
	t := time.NewTicker(confirmEvery)
	defer t.Stop()
	for {
		select {
		case <-b.quit:
			return
		case <-t.C:
		}
		b.updateConfirmed()
	}
}

// updateConfirmed is one pass of confirmLoop.
func (b *Broker) updateConfirmed() {
	g := b.ctl.guard
	var at int64 = -1
	switch b.ctl.role.Load() {
	case roleMaster:
		at = b.masterConfirmed()
	case roleSlave:
		at = b.slaveConfirmed()
	}
	for cur := g.confirmed.Load(); at > cur && !g.confirmed.CompareAndSwap(cur, at); cur = g.confirmed.Load() {
	}
	c := g.confirmed.Load()
	if c <= g.saved {
		return
	}
	if err := statefile.Save(g.path, confirmedState{Offset: c}); err != nil {
		b.logger.Warn("broker: save the confirmed offset", "err", err)
		return
	}
	g.saved = c
}

// masterConfirmed is a master's confirmed offset (-1: none known).
func (b *Broker) masterConfirmed() int64 {
	m, ss := b.repl.master.Load(), b.ctl.syncSet.Load()
	if m == nil || ss == nil || 1+len(ss.slaves) < b.cfg.HA.MinInSyncReplicas {
		return -1
	}
	at := int64(b.store.Log().Next())
	for _, id := range ss.slaves {
		at = min(at, m.AckedBy(id))
	}
	return at
}

// slaveConfirmed is a slave's: its master's, within its own log.
func (b *Broker) slaveConfirmed() int64 {
	addr := b.repl.masterAddr.Load()
	if addr == nil || *addr == "" {
		return -1
	}
	ctx, cancel := b.ctlContext()
	defer cancel()
	resp, err := b.peerc.Invoke(ctx, *addr, remoting.NewRequest(protocol.GetBrokerEpochCache, nil, nil))
	if err != nil || resp.Code != protocol.Success {
		return -1
	}
	var c EpochCache
	if err := remoting.DecodeBody(resp.SerializeType, resp.Body, &c); err != nil {
		return -1
	}
	return min(c.ConfirmedOffset, b.store.ReplicaOffset())
}

// cutStatus adds the guard's state to brokerStatus.
func (b *Broker) cutStatus(out map[string]string) {
	g := b.ctl.guard
	out["confirmedOffset"] = strconv.FormatInt(g.confirmed.Load(), 10)
	if r := g.refused.Load(); r >= 0 {
		out["refusedCutTo"] = strconv.FormatInt(r, 10)
	}
}

// handleAllowLogCut serves ALLOW_LOG_CUT (mqadmin allowLogCut).
func (b *Broker) handleAllowLogCut(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	if b.ctl == nil {
		reply(w, req, protocol.SystemError, fmt.Sprintf("broker %s is not in controller mode: it never cuts its log", b.addr))
		return
	}
	g := b.ctl.guard
	to := g.refused.Load()
	if s, ok := req.ExtFields["offset"]; ok {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			reply(w, req, protocol.SystemError, fmt.Sprintf("offset %q is not an offset (a number >= 0)", s))
			return
		}
		to = n
	} else if to < 0 {
		reply(w, req, protocol.SystemError, fmt.Sprintf(
			"broker %s refused no cut of its log (confirmed offset %d); give -o OFFSET to allow one ahead", b.addr, g.confirmed.Load()))
		return
	}
	g.allowTo.Store(to)
	b.logger.Warn("broker: an operator allows cutting the log below its confirmed offset", "down_to", to,
		"confirmed", g.confirmed.Load(), "remote", w.Conn().RemoteAddrPort())
	reply(w, req, protocol.Success, fmt.Sprintf("broker %s may cut its log down to %d (confirmed offset %d) at its next attempt to follow its master",
		b.addr, to, g.confirmed.Load()))
}
