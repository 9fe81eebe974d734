package remoting

import (
	"context"
	"sync"

	"github.com/sluicemq/sluice/internal/workpool"
)

// group counts goroutines an owner must wait for. Unlike sync.WaitGroup it
// refuses new members once closed (so Add never races with the final
// wait) and its wait honours a context without a helper goroutine.
type group struct {
	mu     sync.Mutex
	n      int
	closed bool
	zero   chan struct{} // closed when n drops to 0; nil until someone waits
}

// add registers one member; false once the group is closed.
func (g *group) add() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.n++
	return true
}

// done unregisters one member.
func (g *group) done() {
	g.mu.Lock()
	g.n--
	if g.n == 0 && g.zero != nil {
		close(g.zero)
		g.zero = nil
	}
	g.mu.Unlock()
}

// goFunc runs f on a goroutine of workpool as a member; false (and f not
// run) once the group is closed.
func (g *group) goFunc(f func()) bool {
	if !g.add() {
		return false
	}
	workpool.Go(func() {
		defer g.done()
		f()
	})
	return true
}

// close refuses new members from now on.
func (g *group) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// wait blocks until no member is left or ctx is done.
func (g *group) wait(ctx context.Context) error {
	g.mu.Lock()
	if g.n == 0 {
		g.mu.Unlock()
		return nil
	}
	if g.zero == nil {
		g.zero = make(chan struct{})
	}
	ch := g.zero
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
