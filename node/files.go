package node

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// File names inside the data folder.
const (
	OperatorTokenFile = "operator-token"
	DevAPIKeyFile     = "dev-api-key"
	AdminAddrFile     = "admin-addr"
)

// randomHex returns n random bytes as hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// loadOrCreateSecret returns the trimmed content of dir/name, creating it
// with a fresh random value (mode 0600) on first start.
func loadOrCreateSecret(dir, name string, fresh func() string) (string, bool, error) {
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err == nil {
		v := strings.TrimSpace(string(b))
		if v == "" {
			return "", false, fmt.Errorf("cannot use %q: file is empty", path)
		}
		return v, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", false, fmt.Errorf("cannot read %q: %w", path, err)
	}
	v := fresh()
	if err := writeFileAtomic(path, []byte(v+"\n"), 0o600); err != nil {
		return "", false, err
	}
	return v, true, nil
}

// writeFileAtomic writes via a temporary file and rename, so a crash never
// leaves a half-written token behind.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("cannot write %q: %w", tmp, err)
	}
	f, err := os.Open(tmp)
	if err == nil {
		err = f.Sync()
		f.Close()
	}
	if err != nil {
		return fmt.Errorf("cannot sync %q: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("cannot rename %q: %w", tmp, err)
	}
	return nil
}
