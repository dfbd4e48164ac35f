//go:build !linux

package agent

import (
	"errors"
	"net"
)

// peerUID cannot read a unix socket's peer here: such callers are
// restricted to nobody's processes.
func peerUID(*net.UnixConn) (int, error) {
	return -1, errors.New("the peer's credentials cannot be read on this system")
}
