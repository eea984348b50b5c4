package store

import (
	"errors"
	"syscall"
)

// ErrStorageFull means a write could not be stored because the disk (or
// the file system's quota) is full. Nothing was written; reads keep
// working, and writes succeed again once space is freed.
var ErrStorageFull = errors.New("storage full")

// IsStorageFull reports whether err comes from a full disk: ENOSPC or
// EDQUOT anywhere in its chain, or ErrStorageFull itself.
func IsStorageFull(err error) bool {
	return err != nil && (errors.Is(err, ErrStorageFull) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT))
}
