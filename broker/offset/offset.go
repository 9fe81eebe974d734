// Package offset keeps consumer offsets: (group, topic, queue id) → the next
// queue offset the group will consume (RocketMQ's ConsumerOffsetManager).
// The table lives in memory and is persisted atomically by a loop every
// PersistInterval and at Close.
package offset

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/statefile"
)

// Key names one (topic, group) pair.
type Key struct {
	Topic string `msgpack:"t"`
	Group string `msgpack:"g"`
}

type entry struct {
	Key     Key             `msgpack:"k"`
	Offsets map[int32]int64 `msgpack:"o"`
}

// Table holds consumer offsets. Safe for concurrent use.
type Table struct {
	path   string
	logger *slog.Logger

	mu sync.Mutex
	// guarded by mu:
	offsets map[Key]map[int32]int64
	dirty   bool

	quit      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// PersistInterval is how often a changed table is saved (RocketMQ: 5 s).
const PersistInterval = 5 * time.Second

// Open loads the table from path and starts its persist loop.
func Open(path string, logger *slog.Logger) (*Table, error) {
	if logger == nil {
		logger = slog.Default()
	}
	t := &Table{path: path, logger: logger, offsets: map[Key]map[int32]int64{},
		quit: make(chan struct{}), done: make(chan struct{})}
	var entries []entry
	if err := statefile.Load(path, &entries); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("offset: load %s: %w", path, err)
	}
	for _, e := range entries {
		t.offsets[e.Key] = e.Offsets
	}
	go t.persistLoop()
	return t, nil
}

// Commit records the group's offset for a queue.
func (t *Table) Commit(group, topic string, queueID int32, off int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := Key{Topic: topic, Group: group}
	m := t.offsets[k]
	if m == nil {
		m = map[int32]int64{}
		t.offsets[k] = m
	}
	if old, ok := m[queueID]; !ok || old != off {
		m[queueID] = off
		t.dirty = true
	}
}

// Query returns the group's committed offset for a queue.
func (t *Table) Query(group, topic string, queueID int32) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	off, ok := t.offsets[Key{Topic: topic, Group: group}][queueID]
	return off, ok
}

// Queues returns a copy of the group's offsets for a topic.
func (t *Table) Queues(group, topic string) map[int32]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[int32]int64{}
	for q, o := range t.offsets[Key{Topic: topic, Group: group}] {
		out[q] = o
	}
	return out
}

// Keys returns every (topic, group) pair with offsets, sorted.
func (t *Table) Keys() []Key {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Key, 0, len(t.offsets))
	for k := range t.offsets {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Group < out[j].Group
	})
	return out
}

// DeleteGroup forgets every offset of a group.
func (t *Table) DeleteGroup(group string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.offsets {
		if k.Group == group {
			delete(t.offsets, k)
			t.dirty = true
		}
	}
}

// Persist saves the table if it changed since the last save.
func (t *Table) Persist() error {
	t.mu.Lock()
	if !t.dirty {
		t.mu.Unlock()
		return nil
	}
	entries := make([]entry, 0, len(t.offsets))
	for k, m := range t.offsets {
		c := make(map[int32]int64, len(m))
		for q, o := range m {
			c[q] = o
		}
		entries = append(entries, entry{Key: k, Offsets: c})
	}
	t.dirty = false
	t.mu.Unlock()
	if err := statefile.Save(t.path, entries); err != nil {
		t.mu.Lock()
		t.dirty = true
		t.mu.Unlock()
		return fmt.Errorf("offset: %w", err)
	}
	return nil
}

func (t *Table) persistLoop() {
	defer close(t.done)
	tk := time.NewTicker(PersistInterval)
	defer tk.Stop()
	for {
		select {
		case <-t.quit:
			return
		case <-tk.C:
			if err := t.Persist(); err != nil {
				t.logger.Error("offset: persist", "err", err)
			}
		}
	}
}

// Close stops the persist loop and saves the table. It is idempotent.
func (t *Table) Close() error {
	t.closeOnce.Do(func() {
		close(t.quit)
		<-t.done
		t.closeErr = t.Persist()
	})
	return t.closeErr
}
