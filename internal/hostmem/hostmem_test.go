package hostmem

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"MemTotal:       24000000 kB\nMemAvailable:   20000000 kB\n", 20000000 << 10, true},
		{"MemTotal:       24000000 kB\n", 0, false},
		{"MemAvailable:   lots kB\n", 0, false},
		{"MemAvailable:   12 MB\n", 0, false},
		{"", 0, false},
	} {
		got, ok := Parse([]byte(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("Parse(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// TestAvailableHonoursTheCgroup: a container (or Slurm job) limited to 8 GiB on a machine with 20 GiB free
// must be planned for 8 GiB less what it uses; the memory checks read MemAvailable only, and under such a
// limit a model that fits the machine but not the cgroup was killed instead of refused.
func TestAvailableHonoursTheCgroup(t *testing.T) {
	write := func(root, p, s string) {
		t.Helper()
		p = filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const gib = 1 << 30
	meminfo := "MemTotal: 25000000 kB\nMemAvailable: 20971520 kB\n" // 20 GiB
	for _, c := range []struct {
		name  string
		files map[string]string
		want  uint64
		ok    bool
	}{
		{"no cgroup file", map[string]string{"proc/meminfo": meminfo}, 20 * gib, true},
		{"v2 without a limit", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "0::/user.slice\n",
			"sys/fs/cgroup/user.slice/memory.max": "max\n", "sys/fs/cgroup/user.slice/memory.current": "1000\n"}, 20 * gib, true},
		{"v2 limit 8 GiB, 1 GiB used", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "0::/job\n",
			"sys/fs/cgroup/job/memory.max": "8589934592\n", "sys/fs/cgroup/job/memory.current": "1073741824\n"}, 7 * gib, true},
		{"v2 over its limit", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "0::/job\n",
			"sys/fs/cgroup/job/memory.max": "1000\n", "sys/fs/cgroup/job/memory.current": "2000\n"}, 0, true},
		{"v1 limit 4 GiB", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "5:cpuacct,cpu:/\n4:memory:/docker/abc\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "4294967296\n",
			"sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes": "0\n"}, 4 * gib, true},
		{"v1 without a limit", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "4:memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, 20 * gib, true},
		{"a limit above MemAvailable", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "0::/big\n",
			"sys/fs/cgroup/big/memory.max": "68719476736\n", "sys/fs/cgroup/big/memory.current": "0\n"}, 20 * gib, true},
		{"nothing readable", map[string]string{}, 0, false},
	} {
		root := t.TempDir()
		for p, s := range c.files {
			write(root, p, s)
		}
		if got, ok := available(root); got != c.want || ok != c.ok {
			t.Errorf("%s: %d (%.2f GiB), %v; want %d, %v", c.name, got, float64(got)/gib, ok, c.want, c.ok)
		}
	}
}
