package main

import (
	"strings"
	"testing"
)

// TestUsageExitCodes: every way of calling tune wrongly exits 2, as the root help promises, and says what was
// wrong.
func TestUsageExitCodes(t *testing.T) {
	for _, c := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"an unknown command", []string{"bogus"}, `unknown command "bogus"`},
		{"a misspelt command suggests the right one", []string{"finetun"}, "finetune"},
		{"an unknown flag", []string{"ls", "--bogus"}, "unknown flag"},
		{"an argument to a command that takes none (cobra.NoArgs)", []string{"merge", "extra"}, `unknown command "extra"`},
		{"a command's own argument check", []string{"cp", "tiny"}, "cp needs NAME and DEST"},
		{"help on an unknown command", []string{"help", "nosuch"}, `unknown command "nosuch"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, errOut := runTune(t, c.args...)
			if code != exitUsage || !strings.Contains(errOut, c.stderr) {
				t.Errorf("tune %v: exit %d (want %d), stderr %q (want ∋ %q)", c.args, code, exitUsage, errOut, c.stderr)
			}
		})
	}
	if code, out, _ := runTune(t, "help", "finetune"); code != exitOK || !strings.Contains(out, "finetune") {
		t.Errorf("tune help finetune: exit %d, want 0 and its help; stdout %q", code, out)
	}
	if code, out, _ := runTune(t); code != exitOK || !strings.Contains(out, "Exit codes") {
		t.Errorf("tune without arguments: exit %d, want 0 and the help; stdout %q", code, out)
	}
}

// TestVersionNamesTheRevision: a binary whose build stamped no VCS information (GOFLAGS=-buildvcs=false, as
// make build ran) said "tune (devel) go1.26.8 linux/amd64" (tester7 F12); the Makefile's revision, set through
// -ldflags, is named instead. (go test stamps no VCS information either.)
func TestVersionNamesTheRevision(t *testing.T) {
	defer func(r string) { revision = r }(revision)
	revision = "0123456789ab+dirty"
	code, stdout, _ := runCLI("--version")
	if code != exitOK || !strings.Contains(stdout, " (0123456789ab+dirty) go1.") {
		t.Errorf("exit %d: %q", code, stdout)
	}
	revision = ""
	if v := version(); strings.Contains(v, "()") {
		t.Errorf("without a revision: %q", v)
	}
}
