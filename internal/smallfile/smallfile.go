package smallfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/tune-ml/tune/internal/badinput"
)

// MaxBytes is the most bytes Read accepts: 16 MiB, a thousand times a large real config or template.
const MaxBytes = 16 << 20

// Read returns the contents of the file at path, or an error: the operating system's as it is (errors.Is
// fs.ErrNotExist still tells a missing file), or, for a file that is not a regular one (a named pipe, which
// would be waited on for ever, a device, a directory) or is larger than MaxBytes, a bad-input error naming the
// file, its kind or its size.
func Read(path string) ([]byte, error) {
	f, err := Open(path, "this file")
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

// MaxTokenizerBytes is the most bytes ReadCapped's callers accept for a tokenizer.json or vocab.txt: 256 MiB.
// Real tokenizer.json files are far smaller, even for the largest vocabularies (Llama 3's, 128,256 tokens and
// their merges, is about 9 MB; Qwen2's, 151,643 tokens, about 7 MB), so the cap is generous for any real one while
// a symbolic link to /dev/zero or a broken download is refused before it is read (parsing one takes several
// times its size in memory: a 600 MB file ran a 1.4 GB process out of memory).
const MaxTokenizerBytes = 256 << 20

// ReadCapped returns the contents of the file at path when it is a regular file (or a symbolic link to one) of
// at most max bytes. An error of the operating system is returned as it is (errors.Is fs.ErrNotExist still tells
// a missing file); a device, a named pipe or a socket, and a file larger than max, are refused before anything
// is read with a bad-input error naming the file. what names the file for people ("a tokenizer.json").
func ReadCapped(path string, max int64, what string) ([]byte, error) {
	notRegular := func(m fs.FileMode) error {
		return badinput.Errorf("%s is %s, not a regular file: tune reads %s only from a regular file; "+
			"replace it with the model's own file", path, Kind(m), what)
	}
	f, err := openRegular(path, notRegular)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	tooBig := func(size string) error {
		return badinput.Errorf("%s is larger than %d bytes (%s), more than tune reads for %s (a real one has at "+
			"most tens of MB): is it the right file? Replace it with the model's own, or download the model again",
			path, max, size, what)
	}
	if st.Size() > max {
		return nil, tooBig(fmt.Sprintf("%d bytes", st.Size()))
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max { // it grew since Stat
		return nil, tooBig("and growing")
	}
	return data, nil
}

// Open opens the file at path for reading when it is a regular file (or a symbolic link to one). It stats the
// path before it opens it, as opening a named pipe waits for a writer (a data.train pointing at a FIFO hung
// with no message), and again after. An error of the operating system is returned as it is (errors.Is
// fs.ErrNotExist still tells a missing file); a directory, device, named pipe or socket is refused with a
// bad-input error naming the file and its kind. what names the file for people ("a data file").
func Open(path, what string) (*os.File, error) {
	notRegular := func(m fs.FileMode) error {
		return badinput.Errorf("%s is %s, not a regular file: tune reads %s only from a regular file (a pipe or a "+
			"device would be waited on or read without end); name a regular file, or save what the pipe gives to one "+
			"first", path, Kind(m), what)
	}
	return openRegular(path, notRegular)
}

// openRegular is Open with the caller's refusal: it stats path before opening it (opening a named pipe would
// wait for a writer) and the open file again (it may have been replaced in between).
func openRegular(path string, notRegular func(fs.FileMode) error) (*os.File, error) {
	if st, err := os.Stat(path); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, notRegular(st.Mode())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil {
		f.Close()
		return nil, err
	} else if !st.Mode().IsRegular() { // replaced since the Stat
		f.Close()
		return nil, notRegular(st.Mode())
	}
	return f, nil
}

// Kind names the type of a file that is not a regular file, for messages: "a directory", "a character device".
func Kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsRegular():
		return "a regular file"
	}
	return "a special file (" + m.Type().String() + ")"
}
