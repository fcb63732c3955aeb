package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

func main() {
	stop := startCPUProfile(os.Getenv("TUNE_CPUPROFILE"))
	code := run(os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// startCPUProfile writes a Go CPU profile of the whole command to path (the TUNE_CPUPROFILE environment
// variable; `go tool pprof bin/tune PATH` reads it) and returns the function that finishes it. An empty path
// profiles nothing; a path that cannot be created is reported on stderr and the command runs unprofiled.
func startCPUProfile(path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "tune: TUNE_CPUPROFILE=%s: %v (running without a profile)\n", path, err)
		if f != nil {
			f.Close()
		}
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
