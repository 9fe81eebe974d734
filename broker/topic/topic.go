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
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// state is one version of the table: the saved form, and the snapshot
// readers load. Published states are never modified.
type state struct {
	Topics  map[string]Config `msgpack:"topics"`
	Version DataVersion       `msgpack:"version"`
}

// Table holds the topic configs. Safe for concurrent use.
//
// The table is copy-on-write: readers (Get, All, Version) load the current
// state from an atomic pointer and never wait, which the broker needs since
// its inline send path reads the table on a connection's netpoll reader.
// A writer (Put, PutIfAbsent, Delete) takes mu, copies the current state,
// changes the copy, saves it (two fsyncs) and only then publishes it. So a
// reader never sees a change that is not on disk (a producer never sends
// to a topic that a crash would forget), and a failed save leaves the
// table as it was, with nothing to roll back. Writers wait for each
// other's saves, which serializes them: each builds on the last published
// state, so concurrent changes all land, in memory and in the file, and the
// data version moves one step per change. Topic changes come at admin and
// auto-create rates; a writer that changes nothing (the topic exists or
// already has that config) returns without taking mu.
//
// A failed save returns the error with memory unchanged; the file is then
// either the old version or, if only the final directory fsync failed,
// the new one (the next successful save settles it).
type Table struct {
	path string
	save func(path string, v any) error // statefile.Save; a test seam

	mu  sync.Mutex // serializes writers; held across their save
	cur atomic.Pointer[state]
}

// Open loads the table from path, or starts an empty one.
func Open(path string) (*Table, error) {
	t := &Table{path: path, save: statefile.Save}
	var st state
	err := statefile.Load(path, &st)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist):
		st.Version = DataVersion{Timestamp: time.Now().UnixMilli()}
	default:
		return nil, fmt.Errorf("topic: load %s: %w", path, err)
	}
	if st.Topics == nil {
		st.Topics = map[string]Config{}
	}
	t.cur.Store(&st)
	return t, nil
}

// Get returns a topic's config. It never waits.
func (t *Table) Get(name string) (Config, bool) {
	c, ok := t.cur.Load().Topics[name]
	return c, ok
}

// Put creates or replaces a topic and persists the table. It reports
// whether anything changed.
func (t *Table) Put(c Config) (bool, error) {
	c, err := normalize(c)
	if err != nil {
		return false, err
	}
	same := func(m map[string]Config) bool { old, ok := m[c.TopicName]; return ok && equal(old, c) }
	if same(t.cur.Load().Topics) {
		return false, nil
	}
	return t.update(func(m map[string]Config) bool {
		if same(m) {
			return false
		}
		m[c.TopicName] = c
		return true
	})
}

// PutIfAbsent creates a topic unless it exists, and returns the config in
// force and whether it was created.
func (t *Table) PutIfAbsent(c Config) (Config, bool, error) {
	c, err := normalize(c)
	if err != nil {
		return Config{}, false, err
	}
	if old, ok := t.Get(c.TopicName); ok {
		return old, false, nil
	}
	inForce := c
	created, err := t.update(func(m map[string]Config) bool {
		if old, ok := m[c.TopicName]; ok {
			inForce = old // NB: created by a writer that went first
			return false
		}
		m[c.TopicName] = c
		return true
	})
	if err != nil {
		return Config{}, false, err
	}
	return inForce, created, nil
}

// Delete removes a topic and reports whether it existed.
func (t *Table) Delete(name string) (bool, error) {
	if _, ok := t.Get(name); !ok {
		return false, nil
	}
	return t.update(func(m map[string]Config) bool {
		if _, ok := m[name]; !ok {
			return false
		}
		delete(m, name)
		return true
	})
}

// All returns every config, sorted by name, and the data version.
func (t *Table) All() ([]Config, DataVersion) {
	st := t.cur.Load()
	out := slices.Collect(maps.Values(st.Topics))
	slices.SortFunc(out, func(a, b Config) int { return strings.Compare(a.TopicName, b.TopicName) })
	return out, st.Version
}

// Version returns the data version.
func (t *Table) Version() DataVersion { return t.cur.Load().Version }

// normalize validates c and fills in its defaults.
func normalize(c Config) (Config, error) {
	if err := ValidateName(c.TopicName); err != nil {
		return Config{}, err
	}
	if c.TopicFilterType == "" {
		c.TopicFilterType = "SINGLE_TAG"
	}
	if len(c.Attributes) == 0 {
		c.Attributes = nil
	}
	for k, v := range c.Attributes {
		if err := checkAttribute(k, v); err != nil {
			return Config{}, err
		}
	}
	return c, nil
}

// equal reports whether two normalized configs are alike (a Config holds
// a map: no ==).
func equal(a, b Config) bool { return reflect.DeepEqual(a, b) }

// MessageTypes are the values of the message.type attribute.
var MessageTypes = []string{"NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"}

// ErrAttribute is a topic attribute change the broker refuses.
var ErrAttribute = errors.New("topic: bad attribute")

// checkAttribute checks one attribute: only message.type is known.
func checkAttribute(k, v string) error {
	if k != protocol.AttrMessageType {
		return fmt.Errorf("%w: unknown attribute %q (the one Sluice knows: %s)", ErrAttribute, k, protocol.AttrMessageType)
	}
	if !slices.Contains(MessageTypes, v) {
		return fmt.Errorf("%w: %s=%q: want one of %s", ErrAttribute, k, v, strings.Join(MessageTypes, ", "))
	}
	return nil
}

// ApplyAttributes applies RocketMQ 5's attribute changes (mqadmin
// updateTopic -a: comma-separated "+key=value" to set, "-key" to remove)
// to cur and returns the new attributes (nil when none; cur is not
// modified). Unknown keys and values are refused.
func ApplyAttributes(cur map[string]string, changes string) (map[string]string, error) {
	out := maps.Clone(cur)
	if strings.TrimSpace(changes) == "" {
		return out, nil
	}
	if out == nil {
		out = map[string]string{}
	}
	seen := map[string]bool{}
	for c := range strings.SplitSeq(changes, ",") {
		c = strings.TrimSpace(c)
		if len(c) < 2 || (c[0] != '+' && c[0] != '-') {
			return nil, fmt.Errorf("%w: %q: want +key=value or -key", ErrAttribute, c)
		}
		k, v, hasValue := strings.Cut(c[1:], "=")
		if seen[k] {
			return nil, fmt.Errorf("%w: %s is changed twice", ErrAttribute, k)
		}
		seen[k] = true
		if c[0] == '-' {
			if hasValue {
				return nil, fmt.Errorf("%w: %q: a removal takes no value", ErrAttribute, c)
			}
			if err := checkAttribute(k, MessageTypes[0]); err != nil {
				return nil, err
			}
			delete(out, k)
			continue
		}
		if !hasValue {
			return nil, fmt.Errorf("%w: %q: want +key=value", ErrAttribute, c)
		}
		if err := checkAttribute(k, v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// update applies change to a copy of the topics and, if it reports a
// change, saves the copy under the next data version and publishes it.
// It reports whether it published.
func (t *Table) update(change func(map[string]Config) bool) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.cur.Load()
	next := &state{Topics: maps.Clone(cur.Topics)}
	if !change(next.Topics) {
		return false, nil
	}
	// NB: the counter moves one step per change; the timestamp never goes
	// back, even if the wall clock does.
	next.Version = DataVersion{Timestamp: max(time.Now().UnixMilli(), cur.Version.Timestamp), Counter: cur.Version.Counter + 1}
	if err := t.save(t.path, next); err != nil {
		return false, fmt.Errorf("topic: %w", err)
	}
	t.cur.Store(next)
	return true, nil
}
