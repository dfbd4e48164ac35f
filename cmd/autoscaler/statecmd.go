package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fleetcast/autoscaler/daemon"
	"github.com/fleetcast/autoscaler/election"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/cli"
	"github.com/fleetcast/autoscaler/internal/secretfile"
	"github.com/fleetcast/autoscaler/state"
	"github.com/hashicorp/go-hclog"
)

// stateTimeout bounds a state command's work with etcd.
const stateTimeout = 10 * time.Minute

// runState is `autoscaler state export|import`: a backup of the
// controller's state, a restore, and the way between a state file and
// etcd.
func runState(e *env, args []string) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(e.stderr, "state: want a command: export or import")
		return cli.ExitUsage
	}
	switch args[0] {
	case "export":
		return runStateExport(e, args[1:])
	case "import":
		return runStateImport(e, args[1:])
	}
	fmt.Fprintf(e.stderr, "state: unknown command %q; want export or import\n", args[0])
	return cli.ExitUsage
}

// runStateExport writes every record of the state the config names to a
// file (mode 0600: it holds the hashes of the credentials and tokens), or
// to standard output.
func runStateExport(e *env, args []string) int {
	fs := cli.NewFlagSet(e.stderr, "autoscaler", "state export", "state export -config FILE [-out FILE] [-state-dir DIR]")
	out := fs.String("out", "-", "the export file to write (- for standard output)")
	ctl, code, ok := stateSetup(e, fs, args, func() bool { return true })
	if !ok {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	store, closeStore, err := daemon.OpenState(ctx, ctl, nil, true)
	if err != nil {
		fmt.Fprintf(e.stderr, "state export: %v%s\n", err, stopFirst(err))
		return cli.ExitError
	}
	defer closeStore()
	var buf bytes.Buffer
	n, err := store.Export(&buf)
	if err != nil {
		fmt.Fprintln(e.stderr, "state export:", err)
		return cli.ExitError
	}
	if *out == "-" {
		e.stdout.Write(buf.Bytes())
		return cli.ExitOK
	}
	// Written as the secrets are (0600, synced, renamed into place): it
	// holds the hashes of the credentials and tokens. Write ends it with
	// the line break taken off here.
	if err := secretfile.Write(*out, strings.TrimSuffix(buf.String(), "\n")); err != nil {
		fmt.Fprintln(e.stderr, "state export:", err)
		return cli.ExitError
	}
	fmt.Fprintf(e.stdout, "exported %d records from %s to %s (sha256 %x)\n", n, store.Path(), *out, sha256.Sum256(buf.Bytes()))
	return cli.ExitOK
}

// stateSetup adds -config and -state-dir to a state command's flags,
// parses args, checks the command's own flags with flagsOK (which says
// what is wrong), and returns the controller settings that name the
// state: the config's, or a state file in -state-dir whatever the config
// says.
func stateSetup(e *env, fs *flag.FlagSet, args []string, flagsOK func() bool) (ctl fleet.ControllerSettings, code int, ok bool) {
	path := fs.String("config", "", "fleet config file (HCL): its controller.state_dir, or controller.ha for etcd")
	stateDir := fs.String("state-dir", "", "the state file in this directory, whatever the config says")
	log, code, ok := cli.Setup(e.stderr, fs, args)
	if !ok {
		return ctl, code, false
	}
	if !flagsOK() {
		return ctl, cli.ExitUsage, false
	}
	cfg, ok := loadConfig(e, log, *path)
	if !ok {
		return ctl, cli.ExitError, false
	}
	ctl = cfg.Controller
	if *stateDir != "" {
		ctl.StateDir, ctl.HA = *stateDir, nil
	}
	return ctl, cli.ExitOK, true
}

// runStateImport restores an export into a state that holds no records:
// with no controller running on it.
func runStateImport(e *env, args []string) int {
	fs := cli.NewFlagSet(e.stderr, "autoscaler", "state import", "state import -config FILE -in FILE [-state-dir DIR]")
	in := fs.String("in", "", "the export file to read")
	ctl, code, ok := stateSetup(e, fs, args, func() bool {
		if *in == "" {
			fmt.Fprintln(e.stderr, "state import: -in FILE is required")
		}
		return *in != ""
	})
	if !ok {
		return code
	}
	f, err := os.Open(*in)
	if err != nil {
		fmt.Fprintln(e.stderr, "state import:", err)
		return cli.ExitError
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	if ctl.HA != nil {
		var n int
		var path string
		return asLeader(ctx, e, "state import", ctl, func(store *state.Store) error {
			var err error
			path = store.Path()
			if n, err = store.LoadExport(f, filepath.Clean(*in)); err == nil {
				fmt.Fprintf(e.stdout, "imported %d records from %s into %s\n", n, *in, path)
			}
			return err
		})
	}
	store, closeStore, err := daemon.OpenState(ctx, ctl, nil, false)
	if err != nil {
		fmt.Fprintf(e.stderr, "state import: %v%s\n", err, stopFirst(err))
		return cli.ExitError
	}
	defer closeStore()
	n, err := store.LoadExport(f, filepath.Clean(*in))
	if err != nil {
		fmt.Fprintln(e.stderr, "state import:", err)
		return cli.ExitError
	}
	fmt.Fprintf(e.stdout, "imported %d records from %s into %s\n", n, *in, store.Path())
	return cli.ExitOK
}

// asLeader runs write on the fleet's state in etcd as the fleet's leader:
// it campaigns as a replica would, and writes under its term, so that no
// replica started meanwhile leads (and acts on a state half written)
// until it is done. A replica that leads already is named, and nothing is
// written. cmd names the command, in its messages.
func asLeader(ctx context.Context, e *env, cmd string, ctl fleet.ControllerSettings, write func(*state.Store) error) int {
	c, err := election.Dial(*ctl.HA)
	if err != nil {
		fmt.Fprintf(e.stderr, "%s: %v\n", cmd, err)
		return cli.ExitError
	}
	defer c.Close()
	leader := func() int {
		if name, term, err := election.Leader(ctx, c, ctl.HAPrefix()); err == nil {
			fmt.Fprintf(e.stderr, "%s: %s leads the fleet (term %d): stop every replica first, run it again, and start them\n", cmd, name, term)
		} else {
			fmt.Fprintf(e.stderr, "%s: %v\n", cmd, err)
		}
		return cli.ExitError
	}
	if _, _, err := election.Leader(ctx, c, ctl.HAPrefix()); !errors.Is(err, election.ErrNoLeader) {
		return leader()
	}
	el, err := election.New(election.Config{Client: c, Prefix: ctl.HAPrefix(), TTL: ctl.HA.LeaseTTL, Name: election.CommandName,
		Log: hclog.New(&hclog.LoggerOptions{Name: cmd, Level: hclog.Warn, Output: e.stderr})})
	if err != nil {
		fmt.Fprintf(e.stderr, "%s: %v\n", cmd, err)
		return cli.ExitError
	}
	// Elected at once where none leads; a replica that won meanwhile
	// holds it, and the campaign is given up. The writing itself may take
	// as long as the command does.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var started atomic.Bool
	giveUp := time.AfterFunc(ctl.HA.LeaseTTL+5*time.Second, func() {
		if !started.Load() {
			cancel()
		}
	})
	defer giveUp.Stop()
	ran, werr := false, error(nil)
	el.Run(cctx, func(lctx context.Context, _ int64) error {
		defer cancel()
		started.Store(true)
		ran = true
		store, err := state.OpenEtcd(lctx, state.EtcdOptions{Client: c, Prefix: ctl.HAPrefix() + "state/", Fence: el})
		if err == nil {
			err = write(store)
		}
		werr = err
		return err
	})
	switch {
	case !ran:
		return leader()
	case werr != nil:
		fmt.Fprintf(e.stderr, "%s: %v\n", cmd, werr)
		return cli.ExitError
	}
	return cli.ExitOK
}

// stopFirst is what to do about a state file another process holds.
func stopFirst(err error) string {
	if errors.Is(err, state.ErrInUse) {
		return ": stop the controller first (it holds its state file while it runs)"
	}
	return ""
}
