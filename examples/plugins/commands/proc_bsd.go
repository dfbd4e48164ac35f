//go:build unix && !linux

package main

import "syscall"

// groupAttr starts a command in a process group of its own (there is no
// parent-death signal outside Linux).
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
