package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// TempPrefix starts the name of every temporary file or directory this package creates; the full name is
// TempPrefix + filepath.Base(destination) + "-" + a random suffix (".tmp-checkpoint-20-1234567").
const TempPrefix = ".tmp-"

// bufferSize is the size of Write's buffer; larger writes (tensor data) go straight to the file.
const bufferSize = 64 << 10

// WriteFile writes data to path atomically: into a temporary file in path's directory, which is synced, given the
// permissions perm and renamed over path. perm is applied exactly (the umask does not narrow it, unlike
// os.WriteFile). The directory must exist. On error path is untouched and the temporary file removed.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return writeTemp(path, perm, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}

// Write is WriteFile for content produced by write, which is given a buffered writer on the temporary file (the
// buffer is flushed after write returns). If write returns an error, or panics, path is untouched and the
// temporary file removed; the error is returned wrapped with the path.
func Write(path string, perm os.FileMode, write func(w io.Writer) error) error {
	return writeTemp(path, perm, bufferedFill(write))
}

// WriteNew is Write for a path that must not exist, and never replaces one: the complete, synced temporary
// file is hard-linked to path (link(2) fails if path exists, even if it was created while write ran), then
// removed. If path exists, whatever it is (a file, a directory, a symbolic link, dangling or not), it is left
// untouched and WriteNew returns an error wrapping fs.ErrExist; the caller's write has then run for nothing, so
// a caller that can check earlier should, and rely on WriteNew for the race. On a file system without hard links
// (FAT, some network mounts) path is instead created empty with O_EXCL and the temporary renamed over it, which
// is as safe for what was there before but lets a reader see an empty file for a moment.
func WriteNew(path string, perm os.FileMode, write func(w io.Writer) error) error {
	return writeTempCommit(path, perm, bufferedFill(write), linkNew)
}

// linkNew moves the temporary file tmp to path unless path exists (see WriteNew).
func linkNew(tmp, path string) error {
	err := os.Link(tmp, path)
	if err == nil {
		os.Remove(tmp) // path is complete; a temporary left behind is only litter
		return nil
	}
	if errors.Is(err, errors.ErrUnsupported) || errors.Is(err, fs.ErrPermission) {
		// No hard links here (vfat reports EPERM): reserve path with O_EXCL, then rename over the reservation.
		var f *os.File
		if f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
			f.Close()
			if err = os.Rename(tmp, path); err != nil {
				os.Remove(path)
			}
			return err
		}
	}
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("it already exists (%w)", fs.ErrExist)
	}
	return withoutPath(err)
}

// withoutPath drops the *fs.PathError or *os.LinkError around err: it names a temporary file, which means
// nothing to a user, and wrap names the destination instead. errors.Is still finds the cause (the errno).
func withoutPath(err error) error {
	var le *os.LinkError
	var pe *fs.PathError
	switch {
	case errors.As(err, &le):
		return le.Err
	case errors.As(err, &pe):
		return pe.Err
	}
	return err
}

// bufferedFill adapts a caller's write function to writeTemp's fill: it is given a buffered writer on the
// temporary file, flushed after write returns.
func bufferedFill(write func(w io.Writer) error) func(f *os.File) error {
	return func(f *os.File) error {
		w := bufio.NewWriterSize(f, bufferSize)
		if err := write(w); err != nil {
			return err
		}
		return w.Flush()
	}
}

// writeTemp creates the temporary file, runs fill on it, then syncs, chmods, closes and renames it over path.
func writeTemp(path string, perm os.FileMode, fill func(f *os.File) error) error {
	return writeTempCommit(path, perm, fill, os.Rename)
}

// writeTempCommit is writeTemp with commit, given the temporary's name and path, in place of the rename. commit
// must leave the temporary removed when it succeeds; when it fails, the temporary is removed here.
func writeTempCommit(path string, perm os.FileMode, fill func(f *os.File) error, commit func(tmp, path string) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), tempPattern(path))
	if err != nil {
		return wrap(path, withoutPath(err))
	}
	committed := false
	defer func() { // also runs when fill panics
		if !committed {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := fill(f); err != nil {
		return wrap(path, err)
	}
	if err := f.Sync(); err != nil {
		return wrap(path, err)
	}
	if err := f.Chmod(perm); err != nil { // CreateTemp made it 0600
		return wrap(path, err)
	}
	if err := f.Close(); err != nil {
		return wrap(path, err)
	}
	if err := commit(f.Name(), path); err != nil {
		return wrap(path, err)
	}
	committed = true
	return wrap(path, SyncDir(filepath.Dir(path)))
}

// Dir creates the directory path atomically: build fills a new temporary directory in path's parent (which must
// exist), which is then given the permissions perm less the umask (as os.Mkdir gives them), synced and renamed
// to path. path must not exist, or be an empty directory (which is replaced); anything else there is left
// untouched and Dir returns an error wrapping fs.ErrExist. If build fails (or panics) the temporary directory
// is removed.
func Dir(path string, perm os.FileMode, build func(dir string) error) error {
	return buildDir(path, perm, build, func(tmp string) error {
		if st, err := os.Lstat(path); err == nil {
			if !st.IsDir() {
				return fmt.Errorf("it exists and is not a directory (%w)", fs.ErrExist)
			}
			ents, err := os.ReadDir(path)
			if err != nil {
				return err
			}
			if len(ents) > 0 {
				return fmt.Errorf("it is a directory that is not empty (%w)", fs.ErrExist)
			}
			// Remove refuses a directory filled since, so nothing a user put there is lost.
			if err := os.Remove(path); err != nil {
				return err
			}
		}
		return os.Rename(tmp, path)
	})
}

// ReplaceDir is Dir for a destination that may already exist: whatever is at path is moved aside, the new
// directory renamed into place, and only then the old one removed (if the rename fails the old one is moved
// back). Use it where replacing is intended, such as a resumed run saving the same checkpoint again.
func ReplaceDir(path string, perm os.FileMode, build func(dir string) error) error {
	return buildDir(path, perm, build, func(tmp string) error {
		if _, err := os.Lstat(path); err != nil {
			return os.Rename(tmp, path)
		}
		old := tmp + ".old"
		if err := os.Rename(path, old); err != nil {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			os.Rename(old, path)
			return err
		}
		return os.RemoveAll(old)
	})
}

// buildDir runs build on a new temporary directory, then sets perm, syncs it and calls commit to move it to path.
func buildDir(path string, perm os.FileMode, build func(dir string) error, commit func(tmp string) error) error {
	parent := filepath.Dir(path)
	tmp, err := os.MkdirTemp(parent, tempPattern(path))
	if err != nil {
		return wrap(path, withoutPath(err))
	}
	committed := false
	defer func() { // also runs when build panics
		if !committed {
			os.RemoveAll(tmp)
		}
	}()
	if err := build(tmp); err != nil {
		return wrap(path, err)
	}
	if err := os.Chmod(tmp, umasked(tmp, perm)); err != nil { // MkdirTemp made it 0700
		return wrap(path, err)
	}
	if err := SyncDir(tmp); err != nil {
		return wrap(path, err)
	}
	if err := commit(tmp); err != nil {
		return wrap(path, err)
	}
	committed = true
	return wrap(path, SyncDir(parent))
}

// umasked returns perm as the process's umask leaves it for a new directory (what os.Mkdir(path, perm) gives,
// as Python's os.makedirs gives transformers' checkpoint folders), found by making one inside dir: chmod alone
// ignores the umask, and reading it (syscall.Umask) would change it for every goroutine meanwhile. If the probe
// cannot be made, perm is returned as it is.
func umasked(dir string, perm os.FileMode) os.FileMode {
	probe := filepath.Join(dir, ".umask-probe")
	if err := os.Mkdir(probe, perm); err != nil {
		return perm
	}
	defer os.Remove(probe)
	st, err := os.Stat(probe)
	if err != nil {
		return perm
	}
	return st.Mode().Perm()
}

// SyncDir flushes the entries of directory dir (the files created and renamed in it) to disk. File systems that
// cannot sync a directory are not an error, and on Windows, which has no such call, it does nothing.
func SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) && !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	return nil
}

// tempPattern is the os.CreateTemp / os.MkdirTemp pattern of path's temporary.
func tempPattern(path string) string { return TempPrefix + filepath.Base(path) + "-*" }

// wrap names path in err; nil stays nil.
func wrap(path string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("writing %s: %w", path, err)
}
