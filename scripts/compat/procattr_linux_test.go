package compat

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the child die with the test process, so a
// killed test run leaves no broker behind.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
