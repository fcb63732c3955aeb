package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tune-ml/tune/internal/atomicfile"
	"github.com/tune-ml/tune/internal/smallfile"
)

// checkOutputFile checks, before any work, a file that a command will create (flag names it in messages), and
// returns the path to write. Every problem is a usage error (exit 2) naming flag:
//
//   - out is a directory, or not a regular file (a device, a named pipe, a socket, or a symbolic link to one):
//     writing there would replace it with a regular file; standard output is "-";
//   - out is input (os.SameFile: the same file under another name, a hard link, or a symbolic link to it);
//   - out exists and force is false;
//   - out does not exist and its directory does not exist, or a file cannot be created in it.
//
// A symbolic link to a regular file is followed under force: the file it points to is replaced and the link
// kept (as a shell's > does), so the returned path is the link's resolved target. A dangling link is refused.
func checkOutputFile(flag, out, input string, force bool) (string, error) {
	lst, err := os.Lstat(out)
	if errors.Is(err, fs.ErrNotExist) {
		return out, checkOutputDir(flag, out)
	}
	if err != nil {
		return "", usagef("%s %s: %v", flag, out, pathProblem(err))
	}
	st, target := lst, out
	if lst.Mode()&fs.ModeSymlink != 0 {
		// os.Stat, not EvalSymlinks, gives the kind: it follows /proc's links (/dev/stdout → /proc/self/fd/1 →
		// pipe:[N]) as the kernel does.
		if st, err = os.Stat(out); err != nil {
			return "", usagef("%s %s is a symbolic link to %s, which cannot be used (%v); name a file", flag, out, linkTarget(out), pathProblem(err))
		}
	}
	switch {
	case st.IsDir():
		return "", usagef("%s %s is a directory; name a file to write the JSONL into", flag, out)
	case !st.Mode().IsRegular():
		return "", usagef("%s %s is %s, not a regular file, and would be replaced by one; name a file, or - (or no %s) for standard output", flag, out, smallfile.Kind(st.Mode()), flag)
	}
	if in, err := os.Stat(input); err == nil && os.SameFile(st, in) {
		return "", usagef("%s %s is the input file %s; writing it would destroy the input: choose another name", flag, out, input)
	}
	if !force {
		return "", usagef("%s %s already exists; pass --force to replace it, or choose another name", flag, out)
	}
	if lst.Mode()&fs.ModeSymlink != 0 {
		if target, err = filepath.EvalSymlinks(out); err != nil {
			return "", usagef("%s %s: cannot resolve the symbolic link: %v", flag, out, pathProblem(err))
		}
	}
	return target, checkOutputDir(flag, target)
}

// checkOutputDir reports, as a usage error naming flag, a file path whose directory does not exist, is not a
// directory, or does not let a file be created in it (read-only, no permission). It creates and removes a
// temporary file there to find out, named as atomicfile names its temporaries.
func checkOutputDir(flag, path string) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return usagef("%s %s: the directory %s does not exist; create it first", flag, path, dir)
	case err != nil:
		return usagef("%s %s: the directory %s: %v", flag, path, dir, pathProblem(err))
	case !st.IsDir():
		return usagef("%s %s: %s is not a directory", flag, path, dir)
	}
	f, err := os.CreateTemp(dir, atomicfile.TempPrefix+"probe-*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return usagef("%s %s: cannot create a file in %s: %v", flag, path, dir, pathProblem(err))
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// linkTarget is what the symbolic link p points to, or "?" if it cannot be read.
func linkTarget(p string) string {
	t, err := os.Readlink(p)
	if err != nil {
		return "?"
	}
	return t
}
