package smallfile

import (
	"io"
	"os"

	"github.com/tune-ml/tune/internal/badinput"
)

// MaxBytes is the most bytes Read accepts: 16 MiB, a thousand times a large real config or template.
const MaxBytes = 16 << 20

// Read returns the contents of the file at path, or an error: the operating system's as it is (errors.Is
// fs.ErrNotExist still tells a missing file), or, for a file larger than MaxBytes, a bad-input error naming
// the file and its size.
func Read(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxBytes {
		return nil, badinput.Errorf("%s is larger than %d bytes, more than tune reads for this file (a real one has a "+
			"few KB): is it the right file?", path, MaxBytes)
	}
	return data, nil
}
