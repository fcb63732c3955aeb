package hostmem

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Available returns the memory available for new allocations in bytes: MemAvailable of /proc/meminfo, lowered
// to what the process's cgroup (v2: memory.max less memory.current; v1: memory.limit_in_bytes less
// memory.usage_in_bytes) still allows, as a container, Slurm job or systemd unit sets it. ok is false where
// neither can be read (not Linux): callers then check nothing.
func Available() (n uint64, ok bool) {
	return available("/")
}

// available is Available with the files read below root (a test stands in a machine).
func available(root string) (n uint64, ok bool) {
	if data, err := os.ReadFile(filepath.Join(root, "proc", "meminfo")); err == nil {
		n, ok = Parse(data)
	}
	if limit, lok := cgroupLeft(root); lok && (!ok || limit < n) {
		n, ok = limit, true
	}
	return n, ok
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

// cgroupLeft returns the bytes the process's memory cgroup still allows (limit less usage, 0 when over), ok
// false when it has no limit or it cannot be read. /proc/self/cgroup names the cgroup: "0::/PATH" (v2, files
// under /sys/fs/cgroup/PATH) or "N:memory:/PATH" (v1, under /sys/fs/cgroup/memory/PATH).
func cgroupLeft(root string) (uint64, bool) {
	data, err := os.ReadFile(filepath.Join(root, "proc", "self", "cgroup"))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case f[0] == "0" && f[1] == "":
			dir := filepath.Join(root, "sys", "fs", "cgroup", filepath.FromSlash(f[2]))
			if left, ok := limitLeft(filepath.Join(dir, "memory.max"), filepath.Join(dir, "memory.current")); ok {
				return left, true
			}
		case slices.Contains(strings.Split(f[1], ","), "memory"):
			dir := filepath.Join(root, "sys", "fs", "cgroup", "memory", filepath.FromSlash(f[2]))
			if left, ok := limitLeft(filepath.Join(dir, "memory.limit_in_bytes"), filepath.Join(dir, "memory.usage_in_bytes")); ok {
				return left, true
			}
		}
	}
	return 0, false
}

// limitLeft reads a limit file and a usage file of byte counts and returns limit − usage (0 when over); ok is
// false when the limit is "max", unreadable, or v1's "no limit" (a value near 2^63).
func limitLeft(limitFile, usageFile string) (uint64, bool) {
	lb, err := os.ReadFile(limitFile)
	if err != nil {
		return 0, false
	}
	limit, err := strconv.ParseUint(strings.TrimSpace(string(lb)), 10, 64)
	if err != nil || limit >= 1<<62 {
		return 0, false // "max" (v2) or 9223372036854771712 (v1): no limit
	}
	var usage uint64
	if ub, err := os.ReadFile(usageFile); err == nil {
		usage, _ = strconv.ParseUint(strings.TrimSpace(string(ub)), 10, 64)
	}
	if usage >= limit {
		return 0, true
	}
	return limit - usage, true
}
