// Package workpool runs short tasks on goroutines that are kept parked
// between tasks, so that a task starts on a goroutine whose stack has
// already grown instead of a new one that grows it again.
//
// The remoting layer runs every read event of netpoll, every handler that
// may block and every woken long-polling pull here: at 10,000 msgs/s end
// to end the broker started 1.5 goroutines per message (30,145 in a 2 s
// trace), and growing their stacks (runtime.newstack, copystack) took 11%
// of its CPU, starting them (newproc) 5%.
//
// Tasks wait in one queue, which every worker drains before it parks: a
// worker that is running takes the next task without a switch, and a burst
// of tasks runs on as few goroutines as keep up with it. Each task queued
// still gets a worker on its way (woken, or started when none is parked),
// so a task never waits for another one that blocks.
// NB: handing each task to a parked worker of its own instead ran the
// read events of 128 connections on 128 goroutines at once, contending
// for the store's put lock: the broker took 42-49 µs per durable message
// against 29-42 (scripts/bench-ab.sh, 4 rounds).
//
// Workers park only while the pool has users (Acquire, Release: the
// remoting Servers and Clients that are open), at most maxIdle of them;
// with no user, a worker ends once the queue is empty. So no worker
// outlives the last Close.
package workpool

import "sync"

// maxIdle bounds the parked workers: a burst of concurrent tasks leaves at
// most this many goroutines (and their stacks) behind.
const maxIdle = 128

type worker struct{ wake chan struct{} }

var (
	mu     sync.Mutex
	queue  []func()  // guarded by mu: tasks, those not yet taken from head on
	head   int       // guarded by mu
	parked []*worker // guarded by mu
	coming int       // guarded by mu: workers woken or started that have not yet looked at the queue
	users  int       // guarded by mu
)

// Acquire registers a user: while any is registered, workers park between
// tasks.
func Acquire() {
	mu.Lock()
	users++
	mu.Unlock()
}

// Release unregisters a user; when none is left the parked workers end.
func Release() {
	mu.Lock()
	defer mu.Unlock()
	if users--; users > 0 {
		return
	}
	for _, w := range parked {
		coming++
		w.wake <- struct{}{}
	}
	clear(parked)
	parked = parked[:0]
}

// Parked returns how many workers are parked, waiting for a task: a count
// of goroutines that are not doing (nor leaking) anything.
func Parked() int {
	mu.Lock()
	defer mu.Unlock()
	return len(parked)
}

// Go queues f and sees that a worker is on its way to it. It never blocks.
func Go(f func()) {
	mu.Lock()
	queue = append(queue, f)
	if len(queue)-head <= coming {
		mu.Unlock()
		return
	}
	coming++
	if n := len(parked); n > 0 {
		w := parked[n-1] // NB: the last parked, whose stack is likeliest in cache
		parked[n-1] = nil
		parked = parked[:n-1]
		mu.Unlock()
		w.wake <- struct{}{}
		return
	}
	mu.Unlock()
	go work(&worker{wake: make(chan struct{}, 1)})
}

// work runs queued tasks until the queue is empty, then parks until woken,
// or ends when the pool has no user or enough workers are parked.
func work(w *worker) {
	mu.Lock()
	for {
		coming--
		for head < len(queue) {
			f := queue[head]
			queue[head] = nil
			if head++; head == len(queue) {
				queue, head = queue[:0], 0
			}
			mu.Unlock()
			f()
			mu.Lock()
		}
		if users <= 0 || len(parked) >= maxIdle {
			mu.Unlock()
			return
		}
		parked = append(parked, w)
		mu.Unlock()
		<-w.wake
		mu.Lock()
	}
}
