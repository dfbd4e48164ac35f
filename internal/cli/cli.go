// Package cli holds what the project's two commands share: autoscaler (the
// controller and its tools) and autoscaler-agent (the node's agent and the
// job-side commands). Exit statuses, flag sets with the logging flags,
// duration flags in the config's syntax, and the TLS transport for the
// controller's API.
package cli

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/fleet"
)

// Exit statuses.
const (
	ExitOK    = 0
	ExitError = 1 // the command failed: bad config, bad state, a cloud error
	ExitUsage = 2 // the command line was wrong
)

// NewFlagSet is a flag set for the command prog's subcommand name, writing
// its errors and usage ("Usage: PROG SYNOPSIS", then the flags) to stderr.
func NewFlagSet(stderr io.Writer, prog, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s %s\n\nFlags:\n", prog, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// Setup adds the logging flags every command takes (-log-level,
// -log-json) to fs, parses args and makes the command's logger, writing to
// stderr. When ok is false the command stops with the exit status code:
// help was asked for, or the command line is wrong.
func Setup(stderr io.Writer, fs *flag.FlagSet, args []string) (log hclog.Logger, code int, ok bool) {
	log, _, code, ok = SetupNamed(stderr, fs, args, "")
	return log, code, ok
}

// SetupNamed is Setup for a command that takes one name (a node, a
// token) besides its flags, first or last: `token issue NODE -config F`
// or `token issue -config F NODE`. what says what the name is, for the
// error when it is missing; "" takes none.
func SetupNamed(stderr io.Writer, fs *flag.FlagSet, args []string, what string) (log hclog.Logger, name string, code int, ok bool) {
	level := fs.String("log-level", "warn", "log level: trace, debug, info, warn or error")
	asJSON := fs.Bool("log-json", false, "write logs as JSON lines")
	if what != "" && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return nil, "", ExitOK, false
	case err != nil:
		return nil, "", ExitUsage, false
	case what != "" && name == "" && fs.NArg() == 1:
		name = fs.Arg(0)
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return nil, "", ExitUsage, false
	}
	if what != "" && name == "" {
		config := ""
		if fs.Lookup("config") != nil {
			config = " -config FILE"
		}
		fmt.Fprintf(stderr, "%s: name the %s: %s%s %s\n", fs.Name(), what, fs.Name(), config, strings.ToUpper(what))
		return nil, "", ExitUsage, false
	}
	lvl := hclog.LevelFromString(*level)
	if lvl == hclog.NoLevel {
		fmt.Fprintf(stderr, "%s: -log-level %q: want trace, debug, info, warn or error\n", fs.Name(), *level)
		return nil, "", ExitUsage, false
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:       "autoscaler",
		Level:      lvl,
		JSONFormat: *asJSON,
		Output:     stderr,
	}), name, ExitOK, true
}

// Duration is a flag holding a duration in the config's syntax ("90s",
// "10m", "14d"), never negative, and positive when Positive is set. D is
// its default until the flag is given.
type Duration struct {
	D        time.Duration
	Positive bool
	Given    bool // given on the command line, 0 included
}

// String is the duration in the config's syntax, "" for none.
func (f *Duration) String() string {
	if f == nil || f.D == 0 {
		return ""
	}
	return fleet.FormatDuration(f.D)
}

// Set parses s.
func (f *Duration) Set(s string) error {
	d, err := fleet.ParseDuration(s)
	switch {
	case err != nil, d < 0, f.Positive && d == 0:
		return fmt.Errorf("want a duration such as 10m, 1h30m or 14d")
	}
	f.D, f.Given = d, true
	return nil
}

// TLSTransport is an HTTP transport for the controller's API: TLS 1.2 or
// later, verifying against the PEM certificates in caFile (the system's
// roots when ""). It also returns caFile's bytes, nil when "".
func TLSTransport(caFile string) (*http.Transport, []byte, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return tr, nil, nil
	}
	data, err := os.ReadFile(caFile)
	if err != nil {
		return nil, nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(data) {
		return nil, nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	tr.TLSClientConfig.RootCAs = roots
	return tr, data, nil
}

// Version is a command's version line: "PROG VERSION (GO, OS/ARCH)". A
// build without one (version "dev") takes its module's version where go
// install recorded one.
func Version(prog, version string) string {
	if bi, ok := debug.ReadBuildInfo(); ok && version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		version = bi.Main.Version
	}
	return fmt.Sprintf("%s %s (%s, %s/%s)", prog, version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
