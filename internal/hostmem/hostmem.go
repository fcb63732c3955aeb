package hostmem

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Available returns the memory available for new allocations in bytes, MemAvailable of /proc/meminfo; ok is
// false where that file cannot be read or holds no such line (not Linux): callers then check nothing.
func Available() (n uint64, ok bool) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	return Parse(data)
}

// Parse reads the "MemAvailable: N kB" line of /proc/meminfo's contents, in bytes.
func Parse(meminfo []byte) (n uint64, ok bool) {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		rest, found := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !found {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil || kb > 1<<53 {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}
