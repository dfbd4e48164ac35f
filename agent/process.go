package agent

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// exited reports whether every process of a job is gone (signal 0 finds
// none): a job that exited has nothing left to lose.
func (a *Agent) exited(j *job) bool {
	if len(j.PIDs) == 0 {
		return false
	}
	for _, pid := range j.PIDs {
		if err := a.cfg.Signal(pid, 0); !errors.Is(err, syscall.ESRCH) && a.same(j, pid) {
			return false
		}
	}
	return true
}

// same reports whether pid is still the process registered (its start time
// unchanged), not another that the kernel gave the number since. Without
// /proc it cannot tell, and takes the PID as the job's.
func (a *Agent) same(j *job, pid int) bool {
	want := j.started[pid]
	return want == 0 || procStart(pid) == want
}

// procStart is a process's start time in clock ticks since boot (field 22
// of /proc/PID/stat); 0 when it cannot be read.
func procStart(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: fields count from the
	// last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}
