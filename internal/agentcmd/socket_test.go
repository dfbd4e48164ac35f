package agentcmd

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fleetcast/autoscaler/internal/golden"
)

// TestSocketAccess: how -socket-group and -socket-mode become the socket's
// mode and group, with a lookup that knows one group, "jobs" (gid 1500).
func TestSocketAccess(t *testing.T) {
	lookup := func(g string) (int, error) {
		switch g {
		case "jobs", "1500":
			return 1500, nil
		case "broken":
			return -1, errors.New("nss: connection refused")
		}
		if _, err := strconv.Atoi(g); err == nil {
			return -1, user.UnknownGroupIdError(g)
		}
		return -1, user.UnknownGroupError(g)
	}
	var tr strings.Builder
	n, ran := 0, 0
	for _, tt := range []struct {
		name, group string
		given       bool
		mode        string
		wantMode    os.FileMode
		wantGID     int
		// warning and err are what the warning or the error names (a
		// group, a mode, a flag and its value); "" for none. The words
		// are those of testdata/socket-access.golden.
		warning string
		err     string
	}{
		{name: "default group exists", group: "jobs", mode: "0660", wantMode: 0o660, wantGID: 1500},
		{name: "default group missing", group: "fleetcast", mode: "0660", wantMode: 0o600, wantGID: -1,
			warning: `"fleetcast"`},
		{name: "default group cannot be looked up", group: "broken", mode: "0660", wantMode: 0o600, wantGID: -1,
			warning: `"broken"`},
		{name: "default group missing, wider mode", group: "fleetcast", mode: "0666", wantMode: 0o606, wantGID: -1, warning: "0606"},
		{name: "group given by number", group: "1500", given: true, mode: "660", wantMode: 0o660, wantGID: 1500},
		{name: "group given, missing", group: "gpu-users", given: true, mode: "0660",
			err: `-socket-group "gpu-users": `},
		{name: "gid given, missing", group: "4000123", given: true, mode: "0660", err: `-socket-group "4000123": `},
		{name: "group database fails", group: "broken", given: true, mode: "0660", err: `-socket-group "broken": nss: connection refused`},
		{name: "no group", group: "", given: true, mode: "0o640", wantMode: 0o640, wantGID: -1},
		{name: "owner only", group: "jobs", mode: "0600", wantMode: 0o600, wantGID: 1500},
		{name: "mode not octal", group: "jobs", mode: "0680", err: `-socket-mode "0680": `},
		{name: "mode too wide", group: "jobs", mode: "1660", err: `-socket-mode "1660": `},
		{name: "owner cannot write", group: "jobs", mode: "0460", err: `-socket-mode "0460": `},
	} {
		n++
		t.Run(tt.name, func(t *testing.T) {
			access, warning, err := socketAccess(tt.group, tt.given, tt.mode, lookup)
			ran++
			switch {
			case err != nil:
				fmt.Fprintf(&tr, "== %s: error\n-- stdout\n%s\n\n", tt.name, err)
			case warning != "":
				fmt.Fprintf(&tr, "== %s: warning\n-- stdout\n%s\n\n", tt.name, warning)
			default:
				fmt.Fprintf(&tr, "== %s\n\n", tt.name)
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v; want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if access.Mode != tt.wantMode || access.GID != tt.wantGID {
				t.Errorf("mode %#o, gid %d; want %#o, gid %d", access.Mode, access.GID, tt.wantMode, tt.wantGID)
			}
			if (tt.warning == "") != (warning == "") || !strings.Contains(warning, tt.warning) {
				t.Errorf("warning %q; want %q", warning, tt.warning)
			}
		})
	}
	if ran == n { // not when -run picked some cases
		golden.CheckString(t, filepath.Join("testdata", "socket-access.golden"), tr.String())
	}
}
