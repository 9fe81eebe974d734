//go:build !(linux && (amd64 || arm64))

package commitlog

// willNeed: no read-ahead advice on this platform.
func willNeed(File, int64, int64) {}

// readCached: no reads from the page cache only on this platform.
func readCached(uintptr, []byte, int64) (int, bool) { return 0, false }
