//go:build !(linux && (amd64 || arm64))

package fsync

// aioSync: no AIO path on this platform.
func aioSync(File, bool) (handled bool, err error) { return false, nil }

// Mode says how this process fsyncs.
func Mode() string { return "system call (no AIO on this platform)" }

// AIOCalls returns how many calls have completed through AIO: none here.
func AIOCalls() uint64 { return 0 }
