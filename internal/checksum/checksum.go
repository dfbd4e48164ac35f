// Package checksum checks a file against the SHA-256 a config gives it:
// a plugin's executable, before it runs.
package checksum

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
)

// Error is a file whose SHA-256 is not the one the config gives
// it: a plugin's executable that was replaced, or a sha256 that was not
// updated.
type Error struct {
	// Path is the file; Want the SHA-256 the config expects and Got the
	// file's, each 64 lowercase hex digits.
	Path, Want, Got string
}

// Error names the file and both checksums.
func (e *Error) Error() string {
	return fmt.Sprintf("checksum mismatch: %s has SHA-256 %s, but sha256 expects %s", e.Path, e.Got, e.Want)
}

// VerifySHA256 checks that the file at path has the SHA-256 want (hex):
// a *Error if it has another, an error naming the file if it
// cannot be read.
func VerifySHA256(path, want string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return &Error{Path: path, Want: want, Got: got}
	}
	return nil
}
