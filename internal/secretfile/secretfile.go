// Package secretfile reads and writes the small files that hold secrets
// (credentials, bootstrap secrets, nonces, the API token): mode 0600, and
// a file that others may read is refused, never used.
package secretfile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Read returns the secret in path, without the white space around it. A
// file its group or others may read is an error saying how to fix it; a
// missing one is an error that errors.Is os.ErrNotExist.
func Read(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s has mode %v: others may read it; chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Write writes secret and a line break to path: a new file (mode 0600),
// synced, renamed over the old one, and its directory synced, so that it
// survives a power loss once Write returns (others may already count on
// it).
func Write(path, secret string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".secret-*")
	if err != nil {
		return err
	}
	_, err = tmp.WriteString(secret + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil {
		err = SyncDir(path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// SyncDir syncs the directory holding path, so that a rename into it
// survives a power loss.
func SyncDir(path string) error {
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
