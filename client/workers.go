package client

import (
	"sync"
	"time"
)

// workers runs jobs on goroutines kept for reuse: the deep call stack of a
// send is grown once per worker, not once per message. A worker idle for
// workerIdle exits; stop ends them all.
type workers struct {
	jobs chan func()
	quit chan struct{}
	wg   sync.WaitGroup
}

const workerIdle = 10 * time.Second

func newWorkers() *workers {
	return &workers{jobs: make(chan func()), quit: make(chan struct{})}
}

// run hands job to an idle worker, or starts one.
func (w *workers) run(job func()) {
	select {
	case w.jobs <- job:
	default:
		w.wg.Add(1)
		go w.loop(job)
	}
}

func (w *workers) loop(job func()) {
	defer w.wg.Done()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		job()
		idle.Reset(workerIdle)
		select {
		case job = <-w.jobs:
		case <-idle.C:
			return
		case <-w.quit:
			return
		}
	}
}

// stop ends the workers once their jobs return. REQUIRES: no run after.
func (w *workers) stop() {
	close(w.quit)
	w.wg.Wait()
}
