//go:build !unix

package dirlock

import (
	"errors"
	"io"
	"os"
)

// lockFile creates a new lock file at path and returns what the previous one held; without flock nothing is
// locked. As on unix, a symbolic link or other non-regular entry at path is refused (*NotLockFileError) and a
// previous regular file is read and removed, never written into.
func lockFile(path string) (*os.File, []byte, error) {
	var prev []byte
	if fi, err := os.Lstat(path); err == nil {
		if nl := notLockFile(path, fi); nl != nil {
			return nil, nil, nl
		}
		if old, err := os.Open(path); err == nil {
			prev, _ = io.ReadAll(io.LimitReader(old, 64<<10))
			old.Close()
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, nil, err
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, nil, err
	}
	return f, prev, nil
}

func unlockFile(f *os.File) { f.Close() }

// probeFile finds nothing held: without flock nothing is locked.
func probeFile(string) error { return nil }
