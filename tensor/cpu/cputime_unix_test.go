//go:build unix

package cpu

import (
	"syscall"
	"time"
)

// processCPUTime returns the user+system CPU time this process has used (0 if unavailable).
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
