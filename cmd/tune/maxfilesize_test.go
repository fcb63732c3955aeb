package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/hub/hubtest"
	"github.com/tune-ml/tune/internal/testutil"
)

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{"50GB": 50_000_000_000, "20GiB": 20 << 30, "1000": 1000, "0": 0,
		"1.5 kB": 1500, "2mib": 2 << 20} {
		if got, err := parseByteSize(in); err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "abc", "-1", "5 parsecs", "1e30"} {
		if _, err := parseByteSize(in); err == nil {
			t.Errorf("parseByteSize(%q) took it", in)
		}
	}
}

// TestDownloadMaxFileSize: --max-file-size bounds each file (tester10 T10-16): a file announced larger is
// refused naming it (exit 1), and a value that is not a size is bad usage (exit 2).
func TestDownloadMaxFileSize(t *testing.T) {
	testutil.IsolateCache(t)
	srv := hubtest.NewServer(t)
	srv.Add("org/m", &hubtest.Repo{SHA: "86b5e0934494bd15c9632b12f734a8a67f723594",
		Files: map[string][]byte{"config.json": []byte(`{"model_type": "bert"}` + strings.Repeat(" ", 100))}})
	t.Setenv("HF_HUB_CACHE", filepath.Join(t.TempDir(), "hub"))
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_TOKEN", "")
	code, _, stderr := runCLI("download", "--quiet", "--max-file-size", "50", "org/m")
	if code != exitError || !strings.Contains(stderr, "config.json from org/m is announced as 122 bytes, more than the 50 a file may have") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr = runCLI("download", "--quiet", "--max-file-size", "lots", "org/m"); code != exitUsage || !strings.Contains(stderr, `--max-file-size "lots"`) {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr = runCLI("download", "--quiet", "org/m"); code != exitOK {
		t.Errorf("default limit: exit %d, stderr %q", code, stderr)
	}
}
