package pop

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/statefile"
)

// PersistInterval is how often a changed table is saved (as the group
// offsets are, in a crash-safe state file). A kill -9 loses at most this
// much: the messages popped since are delivered again, the acks since are
// forgotten (their messages delivered again): at least once.
const PersistInterval = time.Second

type inflightSnap struct {
	Offset    int64  `msgpack:"o"`
	VisibleAt int64  `msgpack:"v"`
	Attempt   int32  `msgpack:"a"`
	Nonce     uint64 `msgpack:"n"`
	Group     string `msgpack:"g,omitempty"` // version 2
}

// waitingSnap is a message group's offsets waiting (FIFO), lowest first.
type waitingSnap struct {
	Group   string  `msgpack:"g"`
	Offsets []int64 `msgpack:"o"`
}

type queueSnap struct {
	Group    string         `msgpack:"g"`
	Topic    string         `msgpack:"t"`
	Queue    int32          `msgpack:"q"`
	Next     int64          `msgpack:"x"`
	Inflight []inflightSnap `msgpack:"f"`
	Waiting  []waitingSnap  `msgpack:"w,omitempty"` // version 2
}

// snapshotVersion is the version Persist writes: 2 adds the FIFO state
// (each in-flight offset's message group, the waiting offsets), 3 the
// position of the next record not in it (Table.Pos). Open reads 1 and 2
// too (no FIFO state; position 0).
const snapshotVersion = 3

type snapshot struct {
	Version  int         `msgpack:"ver"`
	Nonce    uint64      `msgpack:"nonce"`
	Queues   []queueSnap `msgpack:"queues"`
	Pos      int64       `msgpack:"pos,omitempty"` // version 3
	Diverged bool        `msgpack:"div,omitempty"` // version 3
}

// persister saves a Table to its file.
type persister struct {
	path      string
	log       *slog.Logger
	dirty     bool // guarded by Table.mu
	quit      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// Open loads the table saved at path (an empty one when there is none) and
// saves it every PersistInterval while it changes, and at Close.
func Open(path string, log *slog.Logger) (*Table, error) {
	if log == nil {
		log = slog.Default()
	}
	t := New()
	var s snapshot
	switch err := statefile.Load(path, &s); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("pop: %w", err)
	case s.Version < 1 || s.Version > snapshotVersion:
		return nil, fmt.Errorf("pop: %s: version %d, want 1 to %d", path, s.Version, snapshotVersion)
	default:
		t.nonce, t.pos, t.diverged = s.Nonce, max(s.Pos, 0), s.Diverged
		for _, q := range s.Queues {
			t.queues[key{q.Group, q.Topic, q.Queue}] = q.state()
		}
	}
	t.p = &persister{path: path, log: log, quit: make(chan struct{}), done: make(chan struct{})}
	go t.persistLoop()
	return t, nil
}

// state rebuilds a queue's state: a message group's offset in flight is
// its lowest one (one only, unless the group was not always orderly).
func (q *queueSnap) state() *queueState {
	st := &queueState{next: q.Next, inflight: make(map[int64]*entry, len(q.Inflight))}
	for _, e := range q.Inflight {
		st.inflight[e.Offset] = &entry{visibleAt: e.VisibleAt, attempt: e.Attempt, nonce: e.Nonce, group: e.Group}
		if e.Group == "" {
			continue
		}
		if st.busy == nil {
			st.busy = map[string]int64{}
		}
		if b, ok := st.busy[e.Group]; !ok || e.Offset < b {
			st.busy[e.Group] = e.Offset
		}
	}
	for _, w := range q.Waiting {
		if len(w.Offsets) == 0 {
			continue
		}
		if st.waiting == nil {
			st.waiting = map[string][]int64{}
		}
		st.waiting[w.Group] = append(st.waiting[w.Group], w.Offsets...)
		st.nWaiting += len(w.Offsets)
	}
	for g, w := range st.waiting {
		slices.Sort(w)
		if _, ok := st.busy[g]; !ok {
			// NB: nothing of the group in flight (a damaged file): its
			// first waiting offset goes, lest the group wait forever.
			st.nWaiting--
			st.inflight[w[0]] = &entry{group: g}
			if st.busy == nil {
				st.busy = map[string]int64{}
			}
			st.busy[g] = w[0]
			if len(w) == 1 {
				delete(st.waiting, g)
			} else {
				st.waiting[g] = w[1:]
			}
		}
	}
	return st
}

// Persist saves the table if it changed since it was last saved.
func (t *Table) Persist() error {
	if t.p == nil {
		return nil
	}
	t.mu.Lock()
	if !t.p.dirty {
		t.mu.Unlock()
		return nil
	}
	s := snapshot{Version: snapshotVersion, Nonce: t.nonce, Pos: t.pos, Diverged: t.diverged, Queues: make([]queueSnap, 0, len(t.queues))}
	for k, q := range t.queues {
		qs := queueSnap{Group: k.group, Topic: k.topic, Queue: k.queue, Next: q.next,
			Inflight: make([]inflightSnap, 0, len(q.inflight))}
		for off, e := range q.inflight {
			qs.Inflight = append(qs.Inflight, inflightSnap{Offset: off, VisibleAt: e.visibleAt, Attempt: e.attempt, Nonce: e.nonce,
				Group: e.group})
		}
		for g, w := range q.waiting {
			qs.Waiting = append(qs.Waiting, waitingSnap{Group: g, Offsets: slices.Clone(w)})
		}
		s.Queues = append(s.Queues, qs)
	}
	t.p.dirty = false
	t.mu.Unlock()
	if err := statefile.Save(t.p.path, s); err != nil {
		t.mu.Lock()
		t.p.dirty = true
		t.mu.Unlock()
		return fmt.Errorf("pop: %w", err)
	}
	return nil
}

func (t *Table) persistLoop() {
	defer close(t.p.done)
	tk := time.NewTicker(PersistInterval)
	defer tk.Stop()
	for {
		select {
		case <-t.p.quit:
			return
		case <-tk.C:
			if err := t.Persist(); err != nil {
				t.p.log.Error("pop: persist", "err", err)
			}
		}
	}
}

// Close stops saving and saves the table one last time. Idempotent; a
// nil Table or one made by New has nothing to close.
func (t *Table) Close() error {
	if t == nil || t.p == nil {
		return nil
	}
	t.p.closeOnce.Do(func() {
		close(t.p.quit)
		<-t.p.done
		t.p.closeErr = t.Persist()
	})
	return t.p.closeErr
}

// changed marks the table to be saved. REQUIRES: t.mu held.
func (t *Table) changed() {
	if t.p != nil {
		t.p.dirty = true
	}
}
