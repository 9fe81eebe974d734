package testutil

import (
	"syscall"
	"time"
)

// ProcessCPU returns the process's user and system CPU time so far: what a
// benchmark costs, less sensitive than wall time to what else the machine
// runs (every goroutine of the process counts).
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
