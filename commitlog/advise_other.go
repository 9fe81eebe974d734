//go:build !(linux && (amd64 || arm64))

package commitlog

// willNeed: no read-ahead advice on this platform.
func willNeed(File, int64, int64) {}
