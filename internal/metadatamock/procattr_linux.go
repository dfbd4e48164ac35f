package metadatamock

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill the mock if the test process dies
// before its cleanup runs (a test timeout's panic, a kill): a mock left
// behind would hold its port and run on forever.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
