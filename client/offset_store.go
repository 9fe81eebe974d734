package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// offsetStore keeps a consumer group's committed offsets: on the brokers
// for clustering, in a local file for broadcasting (spec §8.1).
type offsetStore interface {
	// read returns the committed offset of q, or -1 when there is none.
	read(ctx context.Context, q MessageQueue) (int64, error)
	// commit stores the given offsets.
	commit(ctx context.Context, offs map[MessageQueue]int64) error
}

// remoteOffsets stores offsets on the brokers (QUERY/UPDATE_CONSUMER_OFFSET).
type remoteOffsets struct {
	core  *core
	group string
}

func (s *remoteOffsets) addr(ctx context.Context, q MessageQueue) (string, error) {
	return s.core.readAddr(ctx, q)
}

func (s *remoteOffsets) read(ctx context.Context, q MessageQueue) (int64, error) {
	addr, err := s.addr(ctx, q)
	if err != nil {
		return 0, err
	}
	off, err := queryOffset(ctx, s.core, addr, s.group, q)
	if err != nil {
		s.core.connFailed(addr, err)
	}
	return off, err
}

func (s *remoteOffsets) commit(ctx context.Context, offs map[MessageQueue]int64) error {
	var errs []error
	for q, off := range offs {
		addr, err := s.addr(ctx, q)
		if err == nil {
			err = commitOffset(ctx, s.core, addr, s.group, q, off)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("commit %s at %d: %w", q, off, err))
		}
	}
	return errors.Join(errs...)
}

// localOffsets stores offsets in a JSON file, replaced atomically (temp
// file, fsync, rename, directory fsync) on every commit.
type localOffsets struct {
	path string

	mu   sync.Mutex
	offs map[MessageQueue]int64 // guarded by mu; loaded lazily
}

// offsetFile is the JSON layout of a local offset file.
type offsetFile struct {
	Offsets []offsetEntry `json:"offsets"`
}

type offsetEntry struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int    `json:"queueId"`
	Offset     int64  `json:"offset"`
}

// newLocalOffsets returns the store of group under dir, in the instance's
// own directory: <dir>/<group>/<instance>/offsets.json.
func newLocalOffsets(dir, group, instance string) *localOffsets {
	if instance == "" {
		instance = "DEFAULT"
	}
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == '/' || r == '\\' || r == ':' || r == 0 {
				return '_'
			}
			return r
		}, s)
	}
	return &localOffsets{path: filepath.Join(dir, clean(group), clean(instance), "offsets.json")}
}

// REQUIRES: mu held.
func (s *localOffsets) loadLocked() error {
	if s.offs != nil {
		return nil
	}
	s.offs = make(map[MessageQueue]int64)
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("client: read offsets: %w", err)
	}
	var f offsetFile
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("client: offsets file %s: %w", s.path, err)
	}
	for _, e := range f.Offsets {
		s.offs[MessageQueue{Topic: e.Topic, BrokerName: e.BrokerName, QueueID: e.QueueID}] = e.Offset
	}
	return nil
}

func (s *localOffsets) read(_ context.Context, q MessageQueue) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.loadLocked(); err != nil {
		return 0, err
	}
	if off, ok := s.offs[q]; ok {
		return off, nil
	}
	return -1, nil
}

func (s *localOffsets) commit(_ context.Context, offs map[MessageQueue]int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.loadLocked(); err != nil {
		return err
	}
	for q, off := range offs {
		s.offs[q] = off
	}
	var f offsetFile
	for q, off := range s.offs {
		f.Offsets = append(f.Offsets, offsetEntry{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: q.QueueID, Offset: off})
	}
	slices.SortFunc(f.Offsets, func(a, b offsetEntry) int {
		return compareQueues(MessageQueue{a.Topic, a.BrokerName, a.QueueID}, MessageQueue{b.Topic, b.BrokerName, b.QueueID})
	})
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(s.path, b)
}

// writeAtomic replaces path with b: temp file in the same directory, fsync,
// rename, fsync of the directory.
func writeAtomic(path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("client: offsets dir: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".offsets-*.tmp")
	if err != nil {
		return fmt.Errorf("client: offsets temp file: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("client: write offsets: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("client: write offsets: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("client: sync offsets dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("client: sync offsets dir: %w", err)
	}
	return nil
}
