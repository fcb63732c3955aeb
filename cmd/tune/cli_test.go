package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestCommandLineGaps: the command lines a new user tried that failed (issue 20, item 10).
func TestCommandLineGaps(t *testing.T) {
	testutil.IsolateCache(t)
	// validate takes finetune's precision and device flags, so a finetune command line validates as is.
	code, stdout, stderr := runCLI("validate", "--bf16", "--device", "cpu", "tiny")
	if code != exitOK || !strings.Contains(stdout, "bf16: true") || !strings.Contains(stdout, "device: cpu") {
		t.Errorf("validate --bf16 --device cpu: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr = runCLI("validate", "--fp16", "--bf16", "tiny"); code != exitUsage || !strings.Contains(stderr, "exclusive") {
		t.Errorf("validate --fp16 --bf16: exit %d %s", code, stderr)
	}
	// lora=null and ~lora turn LoRA off.
	for _, off := range []string{"lora=null", "~lora"} {
		code, stdout, stderr = runCLI("validate", "--no-files", "bert", off)
		if code != exitOK || strings.Contains(stdout, "lora:") {
			t.Errorf("validate bert %s: exit %d, LoRA still on:\n%s%s", off, code, stdout, stderr)
		}
	}
	// --version.
	if code, stdout, _ = runCLI("--version"); code != exitOK || !strings.HasPrefix(stdout, "tune ") || !strings.Contains(stdout, "go1.") {
		t.Errorf("--version: exit %d %q", code, stdout)
	}
	// Hugging Face's flag style gets the recipe key.
	code, _, stderr = runCLI("finetune", "tiny", "--learning_rate", "1e-4")
	if code != exitUsage || !strings.Contains(stderr, "unknown flag: --learning_rate: recipe keys are key=value arguments, not flags: write training.learning_rate=VALUE") {
		t.Errorf("--learning_rate: exit %d %s", code, stderr)
	}
	if code, _, stderr = runCLI("finetune", "tiny", "--num-train-epochs=2"); !strings.Contains(stderr, "write training.num_train_epochs=VALUE") {
		t.Errorf("--num-train-epochs: exit %d %s", code, stderr)
	}
	// Tester 12: the other hints of an unknown flag.
	for _, c := range []struct {
		args []string
		want string // "" = the bare message, no hint
	}{
		{[]string{"finetune", "tiny", "--training.learning_rate=3e-4"}, "write training.learning_rate=VALUE (as in tune finetune RECIPE training.learning_rate=VALUE)"},
		{[]string{"validate", "tiny", "--max_steps=3"}, "write training.max_steps=VALUE (as in tune validate RECIPE"},
		{[]string{"predict", "--model", "m", "--data", "d.tsv"}, "unknown flag: --data: tune predict takes it as --input"},
		{[]string{"eval", "--model", "m", "--input", "d.tsv"}, "unknown flag: --input: tune eval takes it as --data"},
		{[]string{"predict", "--model", "m", "--text-colum", "x"}, "unknown flag: --text-colum: did you mean --text-column?"},
		{[]string{"eval", "--model", "m", "--learning_rate", "1"}, ""}, // eval takes no recipe: no recipe key
	} {
		code, _, stderr := runCLI(c.args...)
		line, _, _ := strings.Cut(stderr, "\n")
		if code != exitUsage || (c.want != "" && !strings.Contains(line, c.want)) || (c.want == "" && strings.Contains(line, ": recipe keys")) {
			t.Errorf("%v: exit %d, first line %q, want %q", c.args, code, line, c.want)
		}
	}
}

// TestPredictFromStdin: `echo text | tune predict --model DIR --input -` reads standard input, one text per
// line (or JSONL), and gives the same logits as the file.
func TestPredictFromStdin(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model; skipped in -short mode")
	}
	testutil.IsolateCache(t)
	out := tinyCheckpoint(t)
	file := filepath.Join(t.TempDir(), "in.tsv")
	os.WriteFile(file, []byte("sentence\na gripping film\nnot good at all\n"), 0o644)
	code, fromFile, stderr := runCLI("predict", "--device", "cpu", "--model", out, "--input", file)
	if code != exitOK {
		t.Fatal(stderr)
	}
	for _, in := range []string{"a gripping film\nnot good at all\n", `{"text": "a gripping film"}` + "\n" + `{"text": "not good at all"}` + "\n"} {
		code, stdout, stderr := runCLIStdin(in, "predict", "--device", "cpu", "--model", out, "--input", "-")
		if code != exitOK {
			t.Fatalf("--input - exit %d: %s", code, stderr)
		}
		// Lines are the input's (1, 2), the file's have a header (2, 3); the logits are the same.
		if a, b := logitsOf(t, stdout), logitsOf(t, fromFile); a != b {
			t.Errorf("stdin logits %s, file logits %s", a, b)
		}
	}
	if code, _, stderr := runCLIStdin("", "predict", "--device", "cpu", "--model", out, "--input", "-"); code != exitUsage || !strings.Contains(stderr, "standard input is empty") {
		t.Errorf("empty stdin: exit %d %s", code, stderr)
	}
	// Standard input is copied line by line: a line over 1 MiB is refused naming its line, not read whole.
	long := "fine\n" + strings.Repeat("good ", 250_000) + "\n"
	if code, _, stderr := runCLIStdin(long, "predict", "--device", "cpu", "--model", out, "--input", "-"); code == exitOK ||
		!strings.Contains(stderr, "standard input (--input -):2: row too long") {
		t.Errorf("a 1.25 MB line on stdin: exit %d %s", code, stderr)
	}
	// Blank lines keep their place: line 3 is the third prediction.
	code, stdout, stderr := runCLIStdin("\na gripping film\n\nnot good at all\n\n", "predict", "--device", "cpu", "--model", out, "--input", "-")
	if code != exitOK || strings.Count(stdout, "\n") < 4 {
		t.Errorf("blank lines on stdin: exit %d %s %s", code, stdout, stderr)
	}
}

// runCLIStdin is runCLI with stdin as standard input.
func runCLIStdin(stdin string, args ...string) (int, string, string) {
	var out, errb strings.Builder
	code := runIn(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func logitsOf(t *testing.T, jsonl string) string {
	t.Helper()
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(jsonl), "\n") {
		i := strings.Index(line, `"logits":`)
		if i < 0 {
			t.Fatalf("no logits in %q", line)
		}
		b.WriteString(line[i:] + "\n")
	}
	return b.String()
}
