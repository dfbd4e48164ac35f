//go:build unix

package main

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// groupKill runs cmd in a process group of its own (groupAttr), killed
// whole when the command is cancelled.
func groupKill(cmd *exec.Cmd) {
	cmd.SysProcAttr = groupAttr()
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
}

// killGroup kills the process group pid leads; gone already is
// os.ErrProcessDone.
func killGroup(pid int) error {
	err := syscall.Kill(-pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}
