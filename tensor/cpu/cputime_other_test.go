//go:build !unix

package cpu

import "time"

// processCPUTime is unavailable here; benchmarks then omit their CPU-time metrics.
func processCPUTime() time.Duration { return 0 }
