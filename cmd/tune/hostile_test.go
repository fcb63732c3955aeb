package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// hostileData writes a copy of the tiny training file with line 3 replaced by row (a huge text, a huge label)
// and returns its path.
func hostileData(t *testing.T, row string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "recipes", "data", "tiny", "train.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")[:200]
	lines[2] = row
	p := filepath.Join(t.TempDir(), "train.tsv")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFinetuneHostileRows: a 2 MB row (beyond the 1 MiB a row may hold) and a label of 2147483647 are refused
// with an error naming the file and line, before the run allocates anything by them (the label used to size
// a table of 2^31 names and end in "fatal error: out of memory"; scripts/hostile-rss.sh measures the memory).
func TestFinetuneHostileRows(t *testing.T) {
	testutil.IsolateCache(t)
	for _, c := range []struct {
		name, row, want string
	}{
		{"a 2 MB row", strings.Repeat("very good ", 200_000) + "\t1", "train.tsv:3: row too long: the line is longer than 1048576 bytes"},
		{"a huge label", "A fine film.\t2147483647", "label 2147483647 at "},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := hostileData(t, c.row)
			out := filepath.Join(t.TempDir(), "out")
			code, _, stderr := runCLI("finetune", tinyRecipe, "data.train="+data, "training.output_dir="+out)
			if code == 0 || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, data) {
				t.Fatalf("exit %d, stderr:\n%s\nwant %q", code, stderr, c.want)
			}
		})
	}
}

// TestTokenizeLongLine: tune tokenize refuses a line longer than 1 MiB naming file:line, and truncates a long
// line within the limit to --max-length while reading it in pieces.
func TestTokenizeLongLine(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(in, []byte("short line\n"+strings.Repeat("good ", 300_000)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join("..", "..", "recipes", "data", "tiny")
	code, _, stderr := runCLI("tokenize", "--tokenizer", tok, "--max-length", "8", in)
	if code == 0 || !strings.Contains(stderr, in+":2: row too long") {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	if err := os.WriteFile(in, []byte(strings.Repeat("good ", 200_000)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI("tokenize", "--tokenizer", tok, "--max-length", "8", in)
	if code != 0 || strings.Count(stdout, ",") != 3*7+2 {
		t.Fatalf("exit %d, stdout %s, stderr %s", code, stdout, stderr)
	}
}

// TestTokenizerJSONStrict: a tokenizer.json whose post-processor declares an empty special token, or whose keys
// are spelled in another case, is refused when loaded, naming the file and the key (it used to break
// max_length, then training at step 1).
func TestTokenizerJSONStrict(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("..", "..", "recipes", "data", "tiny", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, old, new, want string }{
		{"an empty special token", "\"ids\": [\n          2\n        ]", `"ids": []`, `special_tokens["[CLS]"] has no ids`},
		{"a key in another case", `"vocab": {`, `"voCAB": {`, `model: key "voCAB" is not spelled as "vocab"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := strings.Replace(string(good), c.old, c.new, 1)
			if text == string(good) {
				t.Fatalf("%q not found in the tiny tokenizer.json", c.old)
			}
			p := filepath.Join(t.TempDir(), "tokenizer.json")
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			code, _, stderr := runCLI("tokenize", "--tokenizer", p, "--max-length", "3", "--pair", os.DevNull)
			if code == 0 || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, p) {
				t.Fatalf("exit %d, stderr %s", code, stderr)
			}
		})
	}
}

// TestFinetunePathLoops: every path of a recipe that is a loop of symbolic links (output_dir included, and a
// folder above it) or a dangling link as output_dir is refused up front with exit 2, naming the key, before
// anything loads; output_dir used to pass and fail after loading with "mkdir ...: file exists" (exit 1).
func TestFinetunePathLoops(t *testing.T) {
	testutil.IsolateCache(t)
	dir := t.TempDir()
	loop := filepath.Join(dir, "loop")
	if err := os.Symlink(loop, loop); err != nil {
		t.Fatal(err)
	}
	loopTSV := filepath.Join(dir, "loop.tsv")
	if err := os.Symlink(loopTSV, loopTSV); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "nowhere"), dangling); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, override, want string }{
		{"output_dir is a loop", "training.output_dir=" + loop, "training.output_dir: stat " + loop + ": too many levels of symbolic links"},
		{"a folder above output_dir is a loop", "training.output_dir=" + filepath.Join(loop, "run"), "training.output_dir: stat " + filepath.Join(loop, "run") + ": too many levels of symbolic links"},
		{"output_dir is a dangling link", "training.output_dir=" + dangling, "training.output_dir: " + dangling + " is a symbolic link to " + filepath.Join(dir, "nowhere") + ", which does not exist"},
		{"data.train is a loop", "data.train=" + loopTSV, "data.train: "},
		{"tokenizer.path is a loop", "tokenizer.path=" + loop, "tokenizer.path: "},
		// A device would be read without end (no line break in /dev/zero for the data, no end for the tokenizer).
		{"data.train is a device", "data.train=/dev/zero", "data.train: /dev/zero is a character device, not a regular file"},
		{"tokenizer.path is a device", "tokenizer.path=/dev/zero", "tokenizer.path: /dev/zero is a device"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"finetune", tinyRecipe, c.override, "data.format=tsv"}
			if !strings.HasPrefix(c.override, "training.output_dir=") {
				args = append(args, "training.output_dir="+filepath.Join(dir, "out"))
			}
			code, stdout, stderr := runCLI(args...)
			if code != exitUsage || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "too many levels of symbolic links") &&
				!strings.Contains(stderr, "which does not exist") && !strings.Contains(stderr, "is a device") &&
				!strings.Contains(stderr, "device, not a regular file") ||
				strings.Contains(stdout, "device:") {
				t.Fatalf("exit %d, stdout %s\nstderr %s\nwant %q", code, stdout, stderr, c.want)
			}
		})
	}
}

// TestInspectUnknownDType: a safetensors file with a dtype safetensors does not define is refused by tune
// inspect with the list of the dtypes that are valid and of those tune computes with.
func TestInspectUnknownDType(t *testing.T) {
	header := `{"w":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}}`
	data := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	data = append(append(data, header...), make([]byte, 16)...)
	p := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI("inspect", p)
	if code == 0 || !strings.Contains(stderr, `unknown dtype "F128"; safetensors dtypes are BF16, BOOL, C64, F16, F32`) ||
		!strings.Contains(stderr, "tune computes with BF16, F16, F32, I32, I64") {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
}
