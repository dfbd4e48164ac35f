package main

import "syscall"

// groupAttr starts a command in a process group of its own, killed if
// the plugin dies first.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
