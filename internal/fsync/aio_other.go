//go:build !(linux && (amd64 || arm64))

package fsync

import "os"

// aioSync: no AIO path on this platform.
func aioSync(*os.File, bool) (handled bool, err error) { return false, nil }

// Mode says how this process fsyncs.
func Mode() string { return "system call (no AIO on this platform)" }
