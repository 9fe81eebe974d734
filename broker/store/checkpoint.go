package store

import (
	"path/filepath"
	"time"

	"github.com/sluicemq/sluice/internal/statefile"
)

// checkpointName is kept inside each index directory: deleting the directory
// deletes its checkpoint too, and Open rebuilds that index from the log.
const checkpointName = "dispatch.checkpoint"

// dispatchCheckpoint says that every record below Pos is in the index whose
// directory holds it, fsynced.
type dispatchCheckpoint struct {
	Pos     int64 `msgpack:"pos"`
	SavedAt int64 `msgpack:"saved_at"` // unix ms
}

// loadCheckpoint returns the checkpointed dispatch position of an index
// directory, or 0 (dispatch everything) when there is none or it is damaged.
func (s *Store) loadCheckpoint(dir string) int64 {
	var cp dispatchCheckpoint
	if err := statefile.Load(filepath.Join(dir, checkpointName), &cp); err != nil {
		if !isNotExist(err) {
			s.logger.Warn("store: ignoring checkpoint; the index is rebuilt from the log", "dir", dir, "err", err)
		}
		return 0
	}
	return cp.Pos
}

// saveCheckpoints fsyncs the consume queues and the key index, then records
// the dispatch position they cover.
func (s *Store) saveCheckpoints() error {
	pos := s.dispatched.Load() // NB: read before the syncs, which then cover it
	now := time.Now().UnixMilli()
	if err := s.cq.Sync(); err != nil {
		return err
	}
	if err := statefile.Save(filepath.Join(s.dir, "consumequeue", checkpointName), dispatchCheckpoint{Pos: pos, SavedAt: now}); err != nil {
		return err
	}
	if s.health.indexDegraded.Load() {
		return nil // its checkpoint stays where the index is complete
	}
	if err := s.index.Sync(); err != nil {
		return err
	}
	return statefile.Save(filepath.Join(s.dir, "index", checkpointName), dispatchCheckpoint{Pos: pos, SavedAt: now})
}

// checkpointLoop saves the index checkpoints periodically.
func (s *Store) checkpointLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.CheckpointInterval)
	defer t.Stop()
	last := int64(-1)
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			if pos := s.dispatched.Load(); pos != last {
				if err := s.saveCheckpoints(); err != nil {
					s.logger.Error("store: save checkpoint", "err", err)
					continue
				}
				last = pos
			}
		}
	}
}
