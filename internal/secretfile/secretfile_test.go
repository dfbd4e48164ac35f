package secretfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret")
	if _, err := Read(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
	if err := Write(path, "s3cret"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("written with %v, %v; want mode 0600", fi.Mode(), err)
	}
	if got, err := Read(path); err != nil || got != "s3cret" {
		t.Fatalf("Read = %q, %v", got, err)
	}
	for _, mode := range []os.FileMode{0o640, 0o604} {
		os.Chmod(path, mode)
		if _, err := Read(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %v: %v, want refused", mode, err)
		}
	}
}
