// Package hostmem reads how much host memory is available for new allocations (MemAvailable of
// /proc/meminfo), so that a size that cannot fit is an error before the Go runtime aborts with its fatal
// "out of memory", which no caller can recover from.
package hostmem
