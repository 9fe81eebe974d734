package ha

import (
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/sluicemq/sluice/internal/statefile"
)

// Epochs (controller mode, RocketMQ 5's epoch file): each time a broker
// becomes master it starts a new epoch, assigned by the controller, at its
// log's end. Two replicas' logs agree up to the end of the last epoch both
// hold with the same start: a replica joining a master truncates to that
// point and copies from there, so replicas never diverge.

// EpochEntry is one epoch: its number and the log offset where it starts.
type EpochEntry struct {
	Epoch int32 `msgpack:"epoch" json:"epoch"`
	Start int64 `msgpack:"start" json:"startOffset"`
}

// EpochFile is a broker's list of epochs, saved crash-safely.
type EpochFile struct {
	path    string
	mu      sync.Mutex
	entries []EpochEntry // guarded by mu; epochs and starts ascending
}

// OpenEpochFile loads the epoch file at path (empty if missing).
func OpenEpochFile(path string) (*EpochFile, error) {
	f := &EpochFile{path: path}
	if err := statefile.Load(path, &f.entries); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("ha: epoch file: %w", err)
	}
	if err := checkEntries(f.entries); err != nil {
		return nil, fmt.Errorf("ha: epoch file %s: %w", path, err)
	}
	return f, nil
}

func checkEntries(es []EpochEntry) error {
	for i := 1; i < len(es); i++ {
		if es[i].Epoch <= es[i-1].Epoch || es[i].Start < es[i-1].Start {
			return fmt.Errorf("entry %d (epoch %d at %d) does not follow (epoch %d at %d)",
				i, es[i].Epoch, es[i].Start, es[i-1].Epoch, es[i-1].Start)
		}
	}
	return nil
}

// Entries returns a copy of the epochs.
func (f *EpochFile) Entries() []EpochEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]EpochEntry(nil), f.entries...)
}

// Last returns the newest epoch (zero if none).
func (f *EpochFile) Last() EpochEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.entries) == 0 {
		return EpochEntry{}
	}
	return f.entries[len(f.entries)-1]
}

// Append starts epoch at start; an epoch not newer than the last, or a
// start before the last's, is refused (a stale master).
func (f *EpochFile) Append(epoch int32, start int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.entries); n > 0 {
		last := f.entries[n-1]
		if epoch == last.Epoch && start == last.Start {
			return nil
		}
		if epoch <= last.Epoch || start < last.Start {
			return fmt.Errorf("ha: epoch %d at %d does not follow epoch %d at %d", epoch, start, last.Epoch, last.Start)
		}
	}
	next := append(append([]EpochEntry(nil), f.entries...), EpochEntry{epoch, start})
	if err := statefile.Save(f.path, next); err != nil {
		return err
	}
	f.entries = next
	return nil
}

// Replace makes es the list (a slave takes its master's history, whose
// bytes it copies).
func (f *EpochFile) Replace(es []EpochEntry) error {
	if err := checkEntries(es); err != nil {
		return fmt.Errorf("ha: epochs: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	next := append([]EpochEntry(nil), es...)
	if err := statefile.Save(f.path, next); err != nil {
		return err
	}
	f.entries = next
	return nil
}

// TruncateAfter drops the epochs that start at or past end (the log was
// cut there) and saves the file.
func (f *EpochFile) TruncateAfter(end int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	keep := len(f.entries)
	for keep > 0 && f.entries[keep-1].Start >= end {
		keep--
	}
	if keep == len(f.entries) {
		return nil
	}
	next := append([]EpochEntry(nil), f.entries[:keep]...)
	if err := statefile.Save(f.path, next); err != nil {
		return err
	}
	f.entries = next
	return nil
}

// ConsistentPoint returns the offset up to which a replica's log (its
// epochs and end) agrees with its master's: the end of the newest epoch
// both hold with the same start, bounded by both logs' ends. 0 when they
// share none (the replica must copy from the master's start).
func ConsistentPoint(local []EpochEntry, localEnd int64, master []EpochEntry, masterEnd int64) int64 {
	end := func(es []EpochEntry, i int, logEnd int64) int64 {
		if i+1 < len(es) {
			return es[i+1].Start
		}
		return logEnd
	}
	for i := len(local) - 1; i >= 0; i-- {
		for j := len(master) - 1; j >= 0; j-- {
			if master[j].Epoch != local[i].Epoch {
				continue
			}
			if master[j].Start != local[i].Start {
				break // NB: the same number from two controllers' histories: not shared
			}
			return min(end(local, i, localEnd), end(master, j, masterEnd))
		}
	}
	return 0
}
