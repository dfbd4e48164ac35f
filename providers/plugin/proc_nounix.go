//go:build !unix

package plugin

import (
	"os/exec"
	"syscall"
)

// procAttr is nothing: no process groups here.
func procAttr() *syscall.SysProcAttr { return nil }

// killGroup kills the plugin's process (its children are not known here).
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		cmd.Process.Kill() //nolint:errcheck // gone already is fine
	}
}
