package dirlock

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Name is the lock file's name inside the locked directory.
const Name = ".tune.lock"

// Holder is what the lock file records about the process holding it.
type Holder struct {
	PID     int       `json:"pid"`     // process id
	Host    string    `json:"host"`    // os.Hostname of the holder's machine
	Started time.Time `json:"started"` // when it took the lock (UTC)
	Command string    `json:"command"` // its command line
}

// String describes the holder: "pid 4242 on host gpu1, started 2026-12-01 19:40:00 UTC: tune finetune ...".
func (h Holder) String() string {
	s := fmt.Sprintf("pid %d on host %s", h.PID, h.Host)
	if !h.Started.IsZero() {
		s += ", started " + h.Started.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	if h.Command != "" {
		s += ": " + h.Command
	}
	return s
}

// HeldError is Acquire's error when another process holds the directory.
type HeldError struct {
	Dir    string // the directory
	Path   string // its lock file
	Holder Holder // what the lock file says about the holder (zero when it could not be read)
}

// Error names the directory, the holder and what to do.
func (e *HeldError) Error() string {
	who := "another process"
	if e.Holder.PID != 0 {
		who = e.Holder.String()
	}
	return fmt.Sprintf("%s is in use by another tune run (%s; lock file %s): wait for it to finish, or choose another "+
		"training.output_dir", e.Dir, who, e.Path)
}

// NotLockFileError is Acquire's and Check's error when the lock path holds something other than a regular file:
// a symbolic link (to a user's file, or dangling), a folder, a device or a FIFO. The lock is never written, read
// or created through such an entry, so that a link planted at output_dir/.tune.lock cannot make a run overwrite
// the file it points to (tester10 T10-7); the user removes it.
type NotLockFileError struct {
	Path string // the lock path
	What string // what is there: "a symbolic link to /x/y", "a folder", ...
}

// Error names the path, what is there and what to do.
func (e *NotLockFileError) Error() string {
	return fmt.Sprintf("%s is %s, not a tune lock file: tune neither follows nor replaces it; remove it (rm %s) and "+
		"run again", e.Path, e.What, e.Path)
}

// notLockFile returns a *NotLockFileError for path when fi (its Lstat) is not a regular file, nil when it is.
func notLockFile(path string, fi os.FileInfo) error {
	m := fi.Mode()
	if m.IsRegular() {
		return nil
	}
	what := fmt.Sprintf("not a regular file (%s)", m.Type())
	switch {
	case m&os.ModeSymlink != 0:
		what = "a symbolic link"
		if to, err := os.Readlink(path); err == nil {
			what += " to " + to
		}
	case m.IsDir():
		what = "a folder"
	}
	return &NotLockFileError{Path: path, What: what}
}

// Lock is a held directory lock; Release gives it back.
type Lock struct {
	// Stale, when not empty, says that the lock file was left by a process that ended without releasing it
	// (killed, or crashed) and that this lock took it over; callers report it as a warning.
	Stale string
	e     *entry
	once  sync.Once
}

// entry is one directory locked by this process, shared by its handles.
type entry struct {
	key        string
	dir, path  string
	f          *os.File
	refs       int
	createdDir bool
}

var (
	mu   sync.Mutex
	held = map[string]*entry{}
)

// Acquire locks dir, creating it (and its parents) when absent. It fails with a *HeldError when another process
// holds it, with a *NotLockFileError when the lock path is a symbolic link or anything but a regular file, and
// with the file system's error when the directory or the lock file cannot be made. The lock file it writes is
// always one it created itself (O_EXCL, no link followed): a stale one, readable or not, is removed and replaced,
// never written into.
func Acquire(dir string) (*Lock, error) {
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	key, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, err
	}
	if key, err = filepath.Abs(key); err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	if e := held[key]; e != nil {
		e.refs++
		return &Lock{e: e}, nil
	}
	path := filepath.Join(dir, Name)
	f, prev, err := lockFile(path)
	if err != nil {
		var he *HeldError
		if errors.As(err, &he) {
			he.Dir = dir
		}
		return nil, err
	}
	l := &Lock{e: &entry{key: key, dir: dir, path: path, f: f, refs: 1, createdDir: statErr != nil}}
	if len(strings.TrimSpace(string(prev))) > 0 {
		var h Holder
		if json.Unmarshal(prev, &h) == nil && h.PID != 0 {
			l.Stale = fmt.Sprintf("%s held a stale lock of a run that ended without releasing it (%s); it is taken over", path, h)
		} else {
			l.Stale = fmt.Sprintf("%s held an unreadable stale lock; it is taken over", path)
		}
	}
	host, _ := os.Hostname()
	me, _ := json.Marshal(Holder{PID: os.Getpid(), Host: host, Started: time.Now().UTC(), Command: strings.Join(os.Args, " ")})
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt(append(me, '\n'), 0)
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			unlockFile(f)
			return nil, fmt.Errorf("writing the lock file: %w", err)
		}
	}
	held[key] = l.e
	return l, nil
}

// Check returns a *HeldError when another process holds dir, a *NotLockFileError when its lock path is not a
// regular file (a symbolic link, which Check does not follow), nil otherwise (dir or its lock file absent, the
// lock free or held by this process), creating nothing: for the checks made before a run takes the lock
// (tune validate, a recipe's resume_from_checkpoint), so that a folder in use is named as such rather than by
// what the running run has not written yet.
func Check(dir string) error {
	if key, err := filepath.EvalSymlinks(dir); err == nil {
		if key, err = filepath.Abs(key); err == nil {
			mu.Lock()
			mine := held[key] != nil
			mu.Unlock()
			if mine {
				return nil
			}
		}
	}
	path := filepath.Join(dir, Name)
	if fi, err := os.Lstat(path); err == nil {
		if err := notLockFile(path, fi); err != nil {
			return err
		}
	}
	err := probeFile(path)
	var he *HeldError
	if errors.As(err, &he) {
		he.Dir = dir
		return he
	}
	var nl *NotLockFileError
	if errors.As(err, &nl) {
		return nl
	}
	return nil
}

// Release gives the lock back (the last handle of the process removes the lock file first, so that no run
// waits on a file that is about to go, and a directory Acquire created that is left empty). Calling it again,
// or on a nil Lock, does nothing.
func (l *Lock) Release() error {
	if l == nil || l.e == nil {
		return nil
	}
	var err error
	l.once.Do(func() {
		mu.Lock()
		defer mu.Unlock()
		e := l.e
		if e.refs--; e.refs > 0 {
			return
		}
		delete(held, e.key)
		if rmErr := os.Remove(e.path); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			err = rmErr
		}
		unlockFile(e.f)
		if e.createdDir {
			os.Remove(e.dir) // only when empty: a run that failed before writing anything leaves no folder
		}
	})
	return err
}
