//go:build unix

package dirlock

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"syscall"
)

// lockFile opens path (creating it), takes an exclusive flock without waiting and returns the file and what it
// held before. The lock is taken again when path was removed or replaced between open and flock (a holder's
// Release), so that two processes never lock two different files of the same name.
func lockFile(path string) (*os.File, []byte, error) {
	for attempt := 0; ; attempt++ {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			prev, _ := io.ReadAll(io.LimitReader(f, 64<<10))
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				he := &HeldError{Path: path}
				json.Unmarshal(prev, &he.Holder)
				return nil, nil, he
			}
			return nil, nil, &os.PathError{Op: "flock", Path: path, Err: err}
		}
		fi, err1 := f.Stat()
		pi, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(fi, pi) {
			prev, err := io.ReadAll(io.LimitReader(f, 64<<10))
			if err != nil {
				unlockFile(f)
				return nil, nil, err
			}
			return f, prev, nil
		}
		unlockFile(f)
		if attempt == 10 {
			return nil, nil, &os.PathError{Op: "lock", Path: path, Err: errors.New("the lock file keeps being replaced")}
		}
	}
}

// probeFile returns a *HeldError when another process holds the flock of path, which it opens without creating
// it: a shared lock, taken and given back at once, is refused only while someone holds the exclusive one.
func probeFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			prev, _ := io.ReadAll(io.LimitReader(f, 64<<10))
			he := &HeldError{Path: path}
			json.Unmarshal(prev, &he.Holder)
			return he
		}
		return &os.PathError{Op: "flock", Path: path, Err: err}
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return nil
}

func unlockFile(f *os.File) {
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	f.Close()
}
