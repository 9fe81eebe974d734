package controller

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/sluicemq/sluice/internal/protocol"
)

// fsm is the controller's raft.FSM: state, changed only by Apply and
// Restore (which raft calls from one goroutine), read by handlers under mu.
type fsm struct {
	mu sync.RWMutex
	st *state // guarded by mu
	// onChange, set before Raft starts, is told of each group whose master
	// or SyncStateSet an applied command changed (a copy), without mu.
	onChange func(*Group)
}

func newFSM() *fsm { return &fsm{st: newState()} }

// Apply implements raft.FSM. It returns a result; an entry that does not
// decode is refused, never a panic (it would stop every node).
func (f *fsm) Apply(l *raft.Log) any {
	var cmd command
	if err := json.Unmarshal(l.Data, &cmd); err != nil {
		return refuse(protocol.ControllerInvalidRequest, "controller: log entry %d does not decode: %v", l.Index, err)
	}
	f.mu.Lock()
	res := f.st.apply(&cmd)
	f.mu.Unlock()
	if res.Changed && res.Group != nil && f.onChange != nil {
		f.onChange(res.Group.clone())
	}
	return res
}

// group returns a copy of the named group, or nil.
func (f *fsm) group(name string) *Group {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if g := f.st.Groups[name]; g != nil {
		return g.clone()
	}
	return nil
}

// groups returns copies of every group.
func (f *fsm) groups() []*Group {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*Group, 0, len(f.st.Groups))
	for _, g := range f.st.Groups {
		out = append(out, g.clone())
	}
	return out
}

// nodeAddr returns the remoting address node id announced.
func (f *fsm) nodeAddr(id string) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.Nodes[id]
}

// Snapshot implements raft.FSM: the state encoded now, written later.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	b, err := json.Marshal(f.st)
	if err != nil {
		return nil, fmt.Errorf("controller: snapshot: %w", err)
	}
	return snapshot(b), nil
}

// Restore implements raft.FSM.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, err := decodeState(rc)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.st = st
	f.mu.Unlock()
	return nil
}

// maxSnapshot bounds a snapshot read back (64 MiB: a million members).
const maxSnapshot = 64 << 20

// decodeState reads a snapshot, checking the invariants the rest of the
// code relies on.
func decodeState(r io.Reader) (*state, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxSnapshot+1))
	if err != nil {
		return nil, fmt.Errorf("controller: read snapshot: %w", err)
	}
	if len(b) > maxSnapshot {
		return nil, fmt.Errorf("controller: snapshot over %d bytes", maxSnapshot)
	}
	st := newState()
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("controller: snapshot does not decode: %w", err)
	}
	if st.Groups == nil {
		st.Groups = map[string]*Group{}
	}
	if st.Nodes == nil {
		st.Nodes = map[string]string{}
	}
	for name, g := range st.Groups {
		if g == nil || g.Name != name {
			return nil, fmt.Errorf("controller: snapshot: group %q is missing or misnamed", name)
		}
		if g.Members == nil {
			g.Members = map[int64]Member{}
		}
		if _, ok := g.Members[g.MasterID]; g.MasterID != NoMaster && !ok {
			return nil, fmt.Errorf("controller: snapshot: group %q's master %d is not a member", name, g.MasterID)
		}
	}
	return st, nil
}

type snapshot []byte

func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("controller: write snapshot: %w", err)
	}
	return sink.Close()
}

func (s snapshot) Release() {}
