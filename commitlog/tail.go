package commitlog

import (
	"sync"
	"sync/atomic"
)

// The tail: the newest bytes appended, kept in memory for the readers that
// follow the end of the log, so that they copy them instead of reading the
// file back. A master's dispatcher read back what a put had just appended
// with one pread a pass (6% of a replicated master's CPU), its HA sender
// read the same bytes again to stream them, and a consumer's pull of the
// newest messages once more.
//
// Append fills its records straight into the current block (no extra
// copy); a block that is full, or that the next append does not continue
// (a new segment), gives way to the oldest, which is reused. A reader copies
// under the block's read lock, which its reuse takes for writing, so that
// a block never changes under a copy; the appender writes only past the
// block's filled bytes, which readers never read. Bytes a block holds are
// published as soon as Append returns: a reader asks only for published
// bytes. Anything but Append that moves the end (a replica's raw appends,
// dropping a partial record, a recovered end) empties the tail.
type tailCache struct {
	blocks [tailBlocks]tailBlock
	cur    int  // appender: the block appends go to
	empty  bool // appender: no block holds anything
}

const (
	tailBlocks    = 4
	tailBlockSize = 1 << 20
)

type tailBlock struct {
	mu     sync.RWMutex // taken for writing to reuse or empty the block
	base   atomic.Int64 // log offset of buf[0]; -1 when the block holds nothing
	filled atomic.Int64 // bytes of buf holding the log from base
	buf    []byte
}

func newTailCache() *tailCache {
	t := &tailCache{empty: true}
	for i := range t.blocks {
		t.blocks[i].base.Store(-1)
		t.blocks[i].buf = make([]byte, tailBlockSize)
	}
	return t
}

// dst returns where the append of size bytes at at is to be filled: in the
// current block, or the next one emptied for it; nil when it does not fit
// a block. REQUIRES: appender.
func (t *tailCache) dst(at Offset, size int) []byte {
	if size > tailBlockSize {
		return nil
	}
	b := &t.blocks[t.cur]
	f := b.filled.Load()
	if base := b.base.Load(); base < 0 || Offset(base+f) != at || int(f)+size > len(b.buf) {
		t.cur = (t.cur + 1) % tailBlocks
		b = &t.blocks[t.cur]
		b.mu.Lock()
		b.base.Store(int64(at))
		b.filled.Store(0)
		b.mu.Unlock()
		f = 0
	}
	t.empty = false
	return b.buf[f : int(f)+size : int(f)+size]
}

// wrote records that the size bytes dst gave were written to the file.
// REQUIRES: appender, after dst.
func (t *tailCache) wrote(size int) { t.blocks[t.cur].filled.Add(int64(size)) }

// reset empties every block. REQUIRES: appender.
func (t *tailCache) reset() {
	if t.empty {
		return
	}
	t.empty = true
	for i := range t.blocks {
		b := &t.blocks[i]
		b.mu.Lock()
		b.base.Store(-1)
		b.filled.Store(0)
		b.mu.Unlock()
	}
}

// read copies the log's bytes from off into p, as many as one block holds
// there up to len(p), if that is at least need; it returns how many (0:
// the tail does not hold need bytes from off). The caller asks only for
// published bytes.
func (t *tailCache) read(p []byte, off Offset, need int) int {
	for i := range t.blocks {
		b := &t.blocks[i]
		if base := b.base.Load(); base < 0 || off < Offset(base) {
			continue
		}
		b.mu.RLock()
		n := 0
		if base := Offset(b.base.Load()); base >= 0 && off >= base {
			start, filled := int64(off-base), b.filled.Load()
			if filled-start >= int64(need) {
				n = copy(p, b.buf[start:filled])
			}
		}
		b.mu.RUnlock()
		if n > 0 {
			return n
		}
	}
	return 0
}
