package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime/pprof"
)

func main() {
	stop, err := startCPUProfile(os.Getenv("TUNE_CPUPROFILE"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "tune: %v\n", err)
		os.Exit(exitUsage)
	}
	code := run(os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// startCPUProfile writes a Go CPU profile of the whole command to path (the TUNE_CPUPROFILE environment
// variable; `go tool pprof bin/tune PATH` reads it) and returns the function that finishes it. An empty path
// profiles nothing. The file must be new, as TUNE_BENCH_CPUPROFILE's: an existing file (a finished run's
// model.safetensors, the recipe being read) is refused before the command runs, and so is a path that cannot
// be created; the error says what to do and main exits with 2 without running the command.
func startCPUProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("TUNE_CPUPROFILE=%s: the file exists and tune does not replace it: name a new file "+
			"(or remove this one); the command did not run", path)
	}
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			f.Close()
			os.Remove(path)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("TUNE_CPUPROFILE=%s: %w (unset it or name a file that can be created); the command did not run", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
