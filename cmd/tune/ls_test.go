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
	table, _, _ := strings.Cut(out, "\n\n") // the table, without the note below it
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 8 || !strings.HasPrefix(lines[0], "RECIPE") {
		t.Fatalf("want a header and 7 recipes, got\n%s", out)
	}
	for i, name := range []string{"bert", "bert-full", "gpt2-full", "llama-lora", "qwen-lora", "tiny", "tiny-chat"} {
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

// TestLsNeeds: ls says which recipes run from any directory (tiny: everything is embedded) and which need a
// checkpoint and data given as overrides (bert, bert-full), and its help no longer promises that every
// recipe runs anywhere.
func TestLsNeeds(t *testing.T) {
	_, out, _ := runTune(t, "ls")
	for _, c := range []struct{ name, want string }{
		{"bert", "model.path, data.train, data.eval"},
		{"bert-full", "model.path, data.train, data.eval"},
		{"tiny", "nothing (runs anywhere)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, l := range strings.Split(out, "\n") {
				if f := strings.Fields(l); len(f) > 0 && f[0] == c.name {
					if !strings.Contains(l, c.want) {
						t.Errorf("line %q lacks %q", l, c.want)
					}
					return
				}
			}
			t.Errorf("no line for %s:\n%s", c.name, out)
		})
	}
	if !strings.Contains(out, "tune finetune bert model.path=DIR data.train=FILE data.eval=FILE") {
		t.Errorf("ls does not show how to give a recipe its inputs:\n%s", out)
	}
	if _, help, _ := runTune(t, "ls", "--help"); strings.Contains(help, "Run one by name from any\ndirectory") {
		t.Errorf("ls --help still says every recipe runs from any directory:\n%s", help)
	}
}
