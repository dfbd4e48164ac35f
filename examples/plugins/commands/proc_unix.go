//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// groupKill runs cmd in a process group of its own, and has a cancelled
// command's whole group killed.
func groupKill(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
