package pop

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
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
}

type queueSnap struct {
	Group    string         `msgpack:"g"`
	Topic    string         `msgpack:"t"`
	Queue    int32          `msgpack:"q"`
	Next     int64          `msgpack:"x"`
	Inflight []inflightSnap `msgpack:"f"`
}

type snapshot struct {
	Version int         `msgpack:"ver"`
	Nonce   uint64      `msgpack:"nonce"`
	Queues  []queueSnap `msgpack:"queues"`
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
	case s.Version != 1:
		return nil, fmt.Errorf("pop: %s: version %d, want 1", path, s.Version)
	default:
		t.nonce = s.Nonce
		for _, q := range s.Queues {
			st := &queueState{next: q.Next, inflight: make(map[int64]*entry, len(q.Inflight))}
			for _, e := range q.Inflight {
				st.inflight[e.Offset] = &entry{visibleAt: e.VisibleAt, attempt: e.Attempt, nonce: e.Nonce}
			}
			t.queues[key{q.Group, q.Topic, q.Queue}] = st
		}
	}
	t.p = &persister{path: path, log: log, quit: make(chan struct{}), done: make(chan struct{})}
	go t.persistLoop()
	return t, nil
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
	s := snapshot{Version: 1, Nonce: t.nonce, Queues: make([]queueSnap, 0, len(t.queues))}
	for k, q := range t.queues {
		qs := queueSnap{Group: k.group, Topic: k.topic, Queue: k.queue, Next: q.next,
			Inflight: make([]inflightSnap, 0, len(q.inflight))}
		for off, e := range q.inflight {
			qs.Inflight = append(qs.Inflight, inflightSnap{Offset: off, VisibleAt: e.visibleAt, Attempt: e.attempt, Nonce: e.nonce})
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
