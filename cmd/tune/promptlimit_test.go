package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestGeneratePromptIsBounded: tune generate read all of standard input and tokenized it before comparing it
// with the context (100 MB: 26 s, 5.7 GB, then out of memory; findings5 #17). It reads at most what the
// context could hold (64 bytes a position, at least 1 MiB) and says so (exit 2), before the model loads.
func TestGeneratePromptIsBounded(t *testing.T) {
	testutil.IsolateCache(t)
	model := filepath.Join(testutil.RepoRoot(t), "recipes", "data", "tiny-chat")
	code, _, stderr := runCLIStdin(strings.Repeat("a", 3<<20), "generate", "--device", "cpu", "--model", model, "--max-new-tokens", "3")
	if code != exitUsage || !strings.Contains(stderr, "the prompt has more than 1048576 bytes, which would not fit the model's context of 256 tokens") ||
		!strings.Contains(stderr, "the request is longer than the model's context") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := runCLIStdin("hello there", "generate", "--device", "cpu", "--model", model, "--max-new-tokens", "1"); code != exitOK {
		t.Errorf("a short prompt: exit %d, %s", code, stderr)
	}
}
