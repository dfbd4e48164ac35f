//go:build !unix

package main

import (
	"os"
	"os/exec"
)

// groupKill leaves cmd as it is: only the command itself is killed when
// it is cancelled.
func groupKill(*exec.Cmd) {}

// killGroup kills the process pid.
func killGroup(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
