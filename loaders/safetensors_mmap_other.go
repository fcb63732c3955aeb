//go:build !unix

package loaders

import (
	"fmt"
	"os"
)

// mapFile reads the whole file into memory (this platform has no mmap support in tune) and returns its bytes and
// a no-op release function.
func mapFile(path string) ([]byte, func() error, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("loaders: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("loaders: %w", err)
	}
	return readWhole(f, st.Size())
}
