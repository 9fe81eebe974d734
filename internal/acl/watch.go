package acl

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// reloadSettle is how long the watcher waits after the last change event
// before it reads the file: an editor's save is several events.
const reloadSettle = 100 * time.Millisecond

// Watcher holds the rules of one file and reloads them when the file
// changes. A file that does not load keeps the last good rules; the
// reason is logged (and counted in Reloads).
type Watcher struct {
	path string
	load func(string) (*Rules, error)
	log  *slog.Logger

	cur      atomic.Pointer[Rules]
	reloads  atomic.Uint64 // successful reloads after the first load
	failures atomic.Uint64 // reloads that kept the last good rules

	guard *Guard

	fw   *fsnotify.Watcher
	quit chan struct{}
	wg   sync.WaitGroup // watchLoop
	once sync.Once
}

// NewWatcher loads the rules at path with load (LoadFile) and watches
// the file's directory for changes. The first load must succeed.
func NewWatcher(path string, load func(string) (*Rules, error), log *slog.Logger) (*Watcher, error) {
	if log == nil {
		log = slog.Default()
	}
	r, err := load(path)
	if err != nil {
		return nil, err
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("acl: watch %s: %w", path, err)
	}
	// NB: the directory, not the file: editors and config managers
	// replace a file by renaming a new one over it, which ends a watch on
	// the file itself.
	if err := fw.Add(filepath.Dir(path)); err != nil {
		_ = fw.Close()
		return nil, fmt.Errorf("acl: watch %s: %w", path, err)
	}
	w := &Watcher{path: path, load: load, log: log, fw: fw, quit: make(chan struct{})}
	w.cur.Store(r)
	w.guard = NewGuard(w.Rules, log)
	w.wg.Add(1)
	go w.watchLoop()
	log.Info("acl: rules loaded", "file", path, "accounts", r.Accounts())
	return w, nil
}

// Rules returns the current rules.
func (w *Watcher) Rules() *Rules { return w.cur.Load() }

// Guard returns the Guard that checks requests against the current rules.
func (w *Watcher) Guard() *Guard { return w.guard }

// Reloads returns the reloads that took effect and those that failed (and
// kept the last good rules).
func (w *Watcher) Reloads() (ok, failed uint64) { return w.reloads.Load(), w.failures.Load() }

// Close stops watching; it is idempotent.
func (w *Watcher) Close() error {
	var err error
	w.once.Do(func() {
		close(w.quit)
		err = w.fw.Close()
		w.wg.Wait()
	})
	return err
}

func (w *Watcher) watchLoop() {
	defer w.wg.Done()
	name := filepath.Clean(w.path)
	var settle <-chan time.Time
	for {
		select {
		case <-w.quit:
			return
		case ev, ok := <-w.fw.Events:
			if !ok {
				return
			}
			if filepath.Clean(ev.Name) == name {
				settle = time.After(reloadSettle)
			}
		case err, ok := <-w.fw.Errors:
			if !ok {
				return
			}
			if !errors.Is(err, fsnotify.ErrClosed) {
				w.log.Warn("acl: watching the rules file failed; changes may be missed", "file", w.path, "err", err)
			}
		case <-settle:
			settle = nil
			w.reload()
		}
	}
}

func (w *Watcher) reload() {
	r, err := w.load(w.path)
	if err != nil {
		w.failures.Add(1)
		w.log.Error("acl: the rules file changed but does not load; keeping the last good rules", "file", w.path, "err", err)
		return
	}
	w.cur.Store(r)
	w.reloads.Add(1)
	w.log.Info("acl: rules reloaded", "file", w.path, "accounts", r.Accounts())
}
