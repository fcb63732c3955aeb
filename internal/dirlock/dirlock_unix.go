//go:build unix

package dirlock

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"syscall"
)

// openNoFollow opens path with flag plus O_NOFOLLOW, so that a symbolic link at path is never followed (open(2):
// "If the trailing component (i.e., basename) of pathname is a symbolic link, then the open fails, with the
// error ELOOP"); that failure, and any other entry that is not a regular file, is a *NotLockFileError.
func openNoFollow(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) { // ELOOP for a link, EISDIR for a folder
			if fi, lerr := os.Lstat(path); lerr == nil {
				if nl := notLockFile(path, fi); nl != nil {
					return nil, nl
				}
			}
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if nl := notLockFile(path, fi); nl != nil {
		f.Close()
		return nil, nl
	}
	return f, nil
}

// lockFile takes an exclusive flock, without waiting, on a lock file at path that it created itself, and returns
// the file and what the previous lock file there held. A previous regular file is first flocked (a holder's
// flock refuses, with a *HeldError), read, removed and replaced by a new file made with O_CREATE|O_EXCL, so that
// nothing is ever written into a file tune did not create; a symbolic link or other non-regular entry is refused
// with a *NotLockFileError. The whole is taken again when path was removed or replaced between the steps (a
// holder's Release, another run taking over the same stale lock), so that two processes never lock two different
// files of the same name.
func lockFile(path string) (*os.File, []byte, error) {
	for attempt := 0; ; attempt++ {
		if attempt == 10 {
			return nil, nil, &os.PathError{Op: "lock", Path: path, Err: errors.New("the lock file keeps being replaced")}
		}
		var prev []byte
		old, err := openNoFollow(path, os.O_RDWR)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, nil, err
		default:
			if err := flock(old, path); err != nil {
				return nil, nil, err
			}
			if !samePath(old, path) {
				unlockFile(old)
				continue
			}
			prev, err = io.ReadAll(io.LimitReader(old, 64<<10))
			if err == nil {
				err = os.Remove(path)
			}
			if err != nil {
				unlockFile(old)
				return nil, nil, err
			}
		}
		f, err := openNoFollow(path, os.O_RDWR|os.O_CREATE|os.O_EXCL)
		if err != nil {
			if old != nil {
				unlockFile(old)
			}
			if errors.Is(err, os.ErrExist) { // another run made it first: its flock decides
				continue
			}
			return nil, nil, err
		}
		err = flock(f, path)
		if old != nil {
			unlockFile(old)
		}
		var he *HeldError
		if errors.As(err, &he) { // another run opened the new file and locked it first
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if !samePath(f, path) {
			unlockFile(f)
			continue
		}
		return f, prev, nil
	}
}

// flock takes f's exclusive flock without waiting: a *HeldError (closing f) when another process holds it.
func flock(f *os.File, path string) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return nil
	}
	prev, _ := io.ReadAll(io.LimitReader(f, 64<<10))
	f.Close()
	if errors.Is(err, syscall.EWOULDBLOCK) {
		he := &HeldError{Path: path}
		json.Unmarshal(prev, &he.Holder)
		return he
	}
	return &os.PathError{Op: "flock", Path: path, Err: err}
}

// samePath reports whether path (not followed) is still the file f has open.
func samePath(f *os.File, path string) bool {
	fi, err1 := f.Stat()
	pi, err2 := os.Lstat(path)
	return err1 == nil && err2 == nil && os.SameFile(fi, pi)
}

// probeFile returns a *HeldError when another process holds the flock of path, which it opens without creating
// it or following a link: a shared lock, taken and given back at once, is refused only while someone holds the
// exclusive one.
func probeFile(path string) error {
	f, err := openNoFollow(path, os.O_RDONLY)
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
