// Package topic is the broker's topic configuration table (RocketMQ's
// TopicConfigManager): queue counts and permissions per topic, persisted
// atomically on every change, with the data version the nameserver uses to
// notice changes.
package topic

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/statefile"
)

// Permission bits (spec 7.10).
const (
	PermPriority = 8
	PermRead     = protocol.PermRead
	PermWrite    = protocol.PermWrite
	PermInherit  = protocol.PermInherit
)

// Well-known topics.
const (
	// AutoCreateTemplate is the topic producers name as defaultTopic when
	// they send to a topic the broker does not know (RocketMQ's TBW102).
	AutoCreateTemplate = "TBW102"
	RetryPrefix        = "%RETRY%"
	DLQPrefix          = "%DLQ%"
)

// MaxNameLen is the longest topic name.
const MaxNameLen = 127

var nameRE = regexp.MustCompile(`^[%|a-zA-Z0-9_-]+$`)

// ErrInvalidName is returned for a topic name that breaks RocketMQ's rules.
var ErrInvalidName = errors.New("topic: invalid name")

// ValidateName checks a topic name: 1..127 characters of letters, digits,
// '%', '|', '_' and '-'.
func ValidateName(name string) error {
	if name == "" || len(name) > MaxNameLen || !nameRE.MatchString(name) {
		return fmt.Errorf("%w %q: use 1 to %d characters from [%%|a-zA-Z0-9_-]", ErrInvalidName, name, MaxNameLen)
	}
	return nil
}

// Config is one topic's configuration; the JSON form is RocketMQ's
// TopicConfig.
type Config = protocol.TopicConfig

// DataVersion changes whenever the table does (RocketMQ's DataVersion).
type DataVersion = protocol.DataVersion

type state struct {
	Topics  map[string]Config `msgpack:"topics"`
	Version DataVersion       `msgpack:"version"`
}

// Table holds the topic configs. Safe for concurrent use.
type Table struct {
	path string

	mu sync.RWMutex
	// guarded by mu:
	topics  map[string]Config
	version DataVersion
}

// Open loads the table from path, or starts an empty one.
func Open(path string) (*Table, error) {
	t := &Table{path: path, topics: map[string]Config{}}
	var st state
	err := statefile.Load(path, &st)
	switch {
	case err == nil:
		if st.Topics != nil {
			t.topics = st.Topics
		}
		t.version = st.Version
	case errors.Is(err, fs.ErrNotExist):
		t.version = DataVersion{Timestamp: time.Now().UnixMilli()}
	default:
		return nil, fmt.Errorf("topic: load %s: %w", path, err)
	}
	return t, nil
}

// Get returns a topic's config.
func (t *Table) Get(name string) (Config, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	c, ok := t.topics[name]
	return c, ok
}

// Put creates or replaces a topic and persists the table. It reports
// whether anything changed.
func (t *Table) Put(c Config) (bool, error) {
	if err := ValidateName(c.TopicName); err != nil {
		return false, err
	}
	if c.TopicFilterType == "" {
		c.TopicFilterType = "SINGLE_TAG"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.topics[c.TopicName]; ok && old == c {
		return false, nil
	}
	t.topics[c.TopicName] = c
	return true, t.persistLocked()
}

// PutIfAbsent creates a topic unless it exists, and returns the config in
// force and whether it was created.
func (t *Table) PutIfAbsent(c Config) (Config, bool, error) {
	if err := ValidateName(c.TopicName); err != nil {
		return Config{}, false, err
	}
	if c.TopicFilterType == "" {
		c.TopicFilterType = "SINGLE_TAG"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.topics[c.TopicName]; ok {
		return old, false, nil
	}
	t.topics[c.TopicName] = c
	return c, true, t.persistLocked()
}

// Delete removes a topic and reports whether it existed.
func (t *Table) Delete(name string) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.topics[name]; !ok {
		return false, nil
	}
	delete(t.topics, name)
	return true, t.persistLocked()
}

// All returns every config, sorted by name, and the data version.
func (t *Table) All() ([]Config, DataVersion) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := slices.Collect(maps.Values(t.topics))
	slices.SortFunc(out, func(a, b Config) int {
		switch {
		case a.TopicName < b.TopicName:
			return -1
		case a.TopicName > b.TopicName:
			return 1
		}
		return 0
	})
	return out, t.version
}

// Version returns the data version.
func (t *Table) Version() DataVersion {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.version
}

// persistLocked bumps the data version and saves the table.
// REQUIRES: mu held for writing.
func (t *Table) persistLocked() error {
	t.version = DataVersion{Timestamp: time.Now().UnixMilli(), Counter: t.version.Counter + 1}
	if err := statefile.Save(t.path, state{Topics: t.topics, Version: t.version}); err != nil {
		return fmt.Errorf("topic: %w", err)
	}
	return nil
}
