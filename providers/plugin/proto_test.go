package plugin

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RequireProtocEnv, when set (as .ci/run sets it), turns missing pinned
// generators into a failure of TestGeneratedCodeUpToDate, not a skip.
const RequireProtocEnv = "FLEETCAST_REQUIRE_PROTOC"

// TestGeneratedCodeUpToDate: the committed Go code of the protocol is
// what the pinned generators make of provider.proto now
// (scripts/proto.sh).
func TestGeneratedCodeUpToDate(t *testing.T) {
	out := t.TempDir()
	cmd := exec.Command("bash", "../../scripts/proto.sh", out)
	msg, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 3 && os.Getenv(RequireProtocEnv) == "" {
		t.Skipf("the pinned generators are not installed (scripts/proto.sh --install): %s", msg)
	}
	if err != nil {
		t.Fatalf("scripts/proto.sh: %v\n%s", err, msg)
	}
	for _, f := range []string{"provider.pb.go", "provider_grpc.pb.go"} {
		want, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("proto", f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("proto/%s is not what provider.proto makes: run make proto, and commit it", f)
		}
	}
}
