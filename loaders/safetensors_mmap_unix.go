//go:build unix

package loaders

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/tune-ml/tune/internal/smallfile"
)

// mapFile maps the whole file read-only into memory (golang.org/x/sys/unix.Mmap) and returns its bytes and the
// function that unmaps them. Where mapping fails (an empty file, a file system without mmap) it falls back to reading the file.
// A named pipe, device or directory is refused before it is opened (opening a pipe waits for a writer).
func mapFile(path string) ([]byte, func() error, error) {
	f, err := smallfile.Open(path, "a safetensors file")
	if err != nil {
		return nil, nil, fmt.Errorf("loaders: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("loaders: %w", err)
	}
	size := st.Size()
	if size > 0 && int64(int(size)) == size {
		buf, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
		if err == nil {
			return buf, func() error { return unix.Munmap(buf) }, nil
		}
	}
	return readWhole(f, size)
}
