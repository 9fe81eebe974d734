// Package testutil holds helpers shared by Sluice's tests: goleak options and
// small file utilities. It is imported only from _test.go files.
package testutil

import (
	"testing"

	"go.uber.org/goleak"
)

// LeakOptions are the goleak options every package uses. netpoll's pollers
// are process-global and outlive EventLoop.Shutdown, so they are ignored.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/cloudwego/netpoll.(*defaultPoll).Wait"),
	}
}

// VerifyTestMain runs the package's tests and then fails if any goroutine
// started by them is still running.
func VerifyTestMain(m *testing.M) {
	goleak.VerifyTestMain(m, LeakOptions()...)
}
