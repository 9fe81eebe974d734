//go:build !linux

package compat

import "os/exec"

// setParentDeathSignal is a no-op where Pdeathsig does not exist.
func setParentDeathSignal(*exec.Cmd) {}
