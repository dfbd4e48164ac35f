//go:build !linux

package metadatamock

import "os/exec"

// dieWithParent does nothing here: only Linux can tie a child's life to
// its parent's, so a mock outlives a test process that dies before its
// cleanup runs.
func dieWithParent(*exec.Cmd) {}
