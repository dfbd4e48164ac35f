//go:build unix && !linux

package plugin

import (
	"os/exec"
	"syscall"
)

// procAttr puts a plugin in a process group of its own.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills the plugin's process group: it and its children.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // gone already is fine
	}
}
