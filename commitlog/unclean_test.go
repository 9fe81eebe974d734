package commitlog

// closeUnclean stops the log as kill -9 would leave its files: no final
// flush, no checkpoint, abort file kept. The data stays in the page cache.
func (l *Log) closeUnclean() {
	l.closeOnce.Do(func() {
		close(l.quit)
		l.wg.Wait()
		l.closeSegments()
		l.closeErr = ErrClosed
		close(l.closed)
	})
}
