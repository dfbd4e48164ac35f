package plugin

import (
	"os/exec"
	"syscall"
)

// procAttr puts a plugin in a process group of its own, killed when the
// controller's thread that started it exits (the controller dying first).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup kills the plugin's process group: it and its children.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // gone already is fine
	}
}
