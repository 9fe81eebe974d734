package group

import (
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/statefile"
)

// Config is a consumer group's settings (RocketMQ's SubscriptionGroupConfig).
type Config = protocol.SubscriptionGroupConfig

type configState struct {
	Groups  map[string]Config    `msgpack:"groups"`
	Version protocol.DataVersion `msgpack:"version"`
}

// ConfigTable holds the subscription group configs, persisted atomically on
// every change. Groups are created with RocketMQ's defaults on first
// heartbeat. Safe for concurrent use.
type ConfigTable struct {
	path string

	mu sync.RWMutex
	// guarded by mu:
	groups  map[string]Config
	version protocol.DataVersion
}

// OpenConfigTable loads the table from path, or starts an empty one.
func OpenConfigTable(path string) (*ConfigTable, error) {
	t := &ConfigTable{path: path, groups: map[string]Config{}}
	var st configState
	switch err := statefile.Load(path, &st); {
	case err == nil:
		if st.Groups != nil {
			t.groups = st.Groups
		}
		t.version = st.Version
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, fmt.Errorf("group: load %s: %w", path, err)
	}
	return t, nil
}

// Get returns a group's config.
func (t *ConfigTable) Get(group string) (Config, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	c, ok := t.groups[group]
	return c, ok
}

// Ensure creates a group with the defaults unless it exists.
func (t *ConfigTable) Ensure(group string) (Config, error) {
	if c, ok := t.Get(group); ok {
		return c, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.groups[group]; ok {
		return c, nil
	}
	c := protocol.DefaultSubscriptionGroupConfig(group)
	t.groups[group] = c
	return c, t.persistLocked()
}

// Put creates or replaces a group's config.
func (t *ConfigTable) Put(c Config) error {
	if c.GroupName == "" {
		return errors.New("group: empty group name")
	}
	if c.RetryMaxTimes < 0 || c.RetryQueueNums < 0 {
		return fmt.Errorf("group: retryMaxTimes %d and retryQueueNums %d must not be negative", c.RetryMaxTimes, c.RetryQueueNums)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.groups[c.GroupName] = c
	return t.persistLocked()
}

// Delete removes a group's config and reports whether it existed.
func (t *ConfigTable) Delete(group string) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.groups[group]; !ok {
		return false, nil
	}
	delete(t.groups, group)
	return true, t.persistLocked()
}

// All returns a copy of every config and the data version.
func (t *ConfigTable) All() (map[string]Config, protocol.DataVersion) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[string]Config, len(t.groups))
	for k, v := range t.groups {
		out[k] = v
	}
	return out, t.version
}

// REQUIRES: mu held for writing.
func (t *ConfigTable) persistLocked() error {
	t.version = protocol.DataVersion{Timestamp: time.Now().UnixMilli(), Counter: t.version.Counter + 1}
	if err := statefile.Save(t.path, configState{Groups: t.groups, Version: t.version}); err != nil {
		return fmt.Errorf("group: %w", err)
	}
	return nil
}
