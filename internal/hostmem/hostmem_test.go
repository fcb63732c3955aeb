package hostmem

import "testing"

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
