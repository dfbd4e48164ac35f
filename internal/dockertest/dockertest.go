// Package dockertest runs the Docker engine's command line for tests that
// build images of the project's binaries (from scratch: nothing can be
// pulled) and run them as containers.
package dockertest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// RequireEnv makes a missing Docker engine fail a test rather than skip
// it (.ci/run sets it).
const RequireEnv = "FLEETCAST_REQUIRE_DOCKER"

// Require skips the test where no Docker engine answers (fails it where
// RequireEnv is set).
func Require(t testing.TB) {
	t.Helper()
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		if os.Getenv(RequireEnv) == "" {
			t.Skipf("no Docker engine: %v %s", err, out)
		}
		t.Fatalf("no Docker engine (%s is set): %v %s", RequireEnv, err, out)
	}
}

// Run runs the docker command and returns its output, trimmed; a failure
// fails the test.
func Run(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}
