package main

import (
	"bytes"
	"strings"
	"testing"
)

// runTune runs the CLI with args and returns the exit code, stdout and stderr.
func runTune(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestLs(t *testing.T) {
	code, out, _ := runTune(t, "ls")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "RECIPE") {
		t.Fatalf("want a header and 3 recipes, got\n%s", out)
	}
	for i, name := range []string{"bert", "bert-full", "tiny"} {
		f := strings.Fields(lines[i+1])
		if len(f) < 3 || f[0] != name {
			t.Errorf("line %d = %q, want %s and its description", i+1, lines[i+1], name)
		}
	}
	if !strings.Contains(out, "from scratch") {
		t.Errorf("tiny's description is missing:\n%s", out)
	}
	if code, _, stderr := runTune(t, "ls", "extra"); code != exitUsage || !strings.Contains(stderr, "no arguments") {
		t.Errorf("ls extra: exit %d, stderr %q; want exit 2", code, stderr)
	}
}
