package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/loaders"
)

// runTokenize runs `tune tokenize args...` with stdin and returns stdout and the error.
func runTokenize(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetArgs(append([]string{"tokenize"}, args...))
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.Execute()
	return out.String(), err
}

func TestTokenizeCommand(t *testing.T) {
	tok := testutil.SharedData(t, "bert-base-uncased")
	file := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(file, []byte("Hello world\r\nnaïve café"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"one line from stdin", "Hello world\n", []string{"--tokenizer", tok},
			`{"input_ids":[101,7592,2088,102],"token_type_ids":[0,0,0,0],"attention_mask":[1,1,1,1]}` + "\n"},
		{"a file with CRLF and no final newline", "", []string{"--tokenizer", tok, file},
			`{"input_ids":[101,7592,2088,102],"token_type_ids":[0,0,0,0],"attention_mask":[1,1,1,1]}` + "\n" +
				`{"input_ids":[101,15743,7668,102],"token_type_ids":[0,0,0,0],"attention_mask":[1,1,1,1]}` + "\n"},
		{"an empty line is [CLS] [SEP]", "\n", []string{"--tokenizer", tok},
			`{"input_ids":[101,102],"token_type_ids":[0,0],"attention_mask":[1,1]}` + "\n"},
		{"pairs get type id 1 and longest_first truncation", "one two three four five six\tseven eight\n",
			[]string{"--tokenizer", filepath.Join(tok, "vocab.txt"), "--pair", "--max-length", "8"},
			`{"input_ids":[101,2028,2048,2093,102,2698,2809,102],"token_type_ids":[0,0,0,0,0,1,1,1],"attention_mask":[1,1,1,1,1,1,1,1]}` + "\n"},
		{"no input, no output", "", []string{"--tokenizer", tok}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := runTokenize(t, c.stdin, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("output\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}

func TestTokenizeCommandErrors(t *testing.T) {
	tok := testutil.SharedData(t, "bert-base-uncased")
	cases := []struct {
		name  string
		stdin string
		args  []string
		usage bool   // a usageError (exit code 2)
		want  string // substring of the message
	}{
		{"missing --tokenizer", "x\n", nil, true, "--tokenizer is required"},
		{"negative --max-length", "x\n", []string{"--tokenizer", tok, "--max-length", "-1"}, true, "--max-length must be >= 0"},
		{"unknown --truncation", "x\n", []string{"--tokenizer", tok, "--truncation", "shortest"}, true, "--truncation must be"},
		{"two files", "", []string{"--tokenizer", tok, "a", "b"}, true, "one FILE"},
		{"pair line without a tab names the line", "a\tb\nno tab here\n", []string{"--tokenizer", tok, "--pair"}, false, "standard input:2: --pair expects text<TAB>pair"},
		{"max length below the special tokens names the line", "x\n", []string{"--tokenizer", tok, "--max-length", "1"}, false, "standard input:1:"},
		{"tokenizer directory without files", "x\n", []string{"--tokenizer", t.TempDir()}, false, "neither tokenizer.json nor vocab.txt"},
		{"missing input file", "", []string{"--tokenizer", tok, filepath.Join(t.TempDir(), "nope.txt")}, true, "nope.txt: no such file or directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := runTokenize(t, c.stdin, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
			var ue usageError
			if got := errors.As(err, &ue); got != c.usage {
				t.Errorf("is a usage error (exit 2): %v, want %v (%v)", got, c.usage, err)
			}
		})
	}
}

func TestTokenizeOptions(t *testing.T) {
	o := &tokenizeOptions{Tokenizer: "x", MaxLength: 16, Truncation: "only_second"}
	opts, err := o.encodeOptions()
	if err != nil {
		t.Fatal(err)
	}
	if opts.MaxLength != 16 || opts.Truncation != loaders.OnlySecond || opts.Padding != 0 || opts.NoSpecialTokens {
		t.Errorf("encodeOptions() = %+v", opts)
	}
}

// TestTokenizeBPE: a byte-pair-encoding tokenizer.json prints the tokenizers library's ids (testdata/bpe/goldens).
func TestTokenizeBPE(t *testing.T) {
	sp := filepath.Join("..", "..", "testdata", "bpe", "tiny-sp", "tokenizer.json")
	got, err := runTokenize(t, "Hello world\n\n", "--tokenizer", sp)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"input_ids":[1,313,722,729,343,297,289],"attention_mask":[1,1,1,1,1,1,1]}` + "\n" +
		`{"input_ids":[1],"attention_mask":[1]}` + "\n"
	if got != want {
		t.Errorf("got\n%swant\n%s", got, want)
	}
	// --max-length keeps room for <s>: 1 + 3 text ids.
	if got, err = runTokenize(t, "Hello world\n", "--tokenizer", sp, "--max-length", "4"); err != nil || got != `{"input_ids":[1,313,722,729],"attention_mask":[1,1,1,1]}`+"\n" {
		t.Errorf("--max-length 4: %q %v", got, err)
	}
	// Pairs: "<s> $A $B:1" (the golden's pair ids), type ids 1 for the second text.
	if got, err = runTokenize(t, "Hello world\tHow are you?\n", "--tokenizer", sp, "--pair"); err != nil ||
		!strings.HasPrefix(got, `{"input_ids":[1,313,722,729,343,297,289,313,280,365,320,725,310,341,66],"token_type_ids":[0,0,0,0,0,0,0,1,1,1,1,1,1,1,1]`) {
		t.Errorf("--pair: %q %v", got, err)
	}
	gpt2 := filepath.Join("..", "..", "testdata", "bpe", "tiny-gpt2")
	file := filepath.Join(t.TempDir(), "bad.txt")
	if err := os.WriteFile(file, []byte("fine\nbad \xff byte\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = runTokenize(t, "", "--tokenizer", gpt2, file)
	if err == nil || !strings.Contains(err.Error(), file+":2: ") || !strings.Contains(err.Error(), "invalid UTF-8 (byte 0xff at column 5)") {
		t.Errorf("invalid UTF-8: %v", err)
	}
}

func TestTruncatePair(t *testing.T) {
	a, b := []int32{1, 2, 3, 4, 5, 6}, []int32{7, 8}
	for _, c := range []struct{ m, n1, n2 int }{{5, 3, 2}, {8, 6, 2}, {3, 2, 1}, {2, 1, 1}, {9, 6, 2}} {
		x, y := truncatePair(a, b, c.m)
		if len(x) != c.n1 || len(y) != c.n2 {
			t.Errorf("m=%d: got %d+%d, want %d+%d", c.m, len(x), len(y), c.n1, c.n2)
		}
	}
}

// TestTokenizeGarbageTokenizerJSONExit2: a tokenizer.json that is not JSON is the file's fault, exit 2 as
// eval's and finetune's for the same file (findings6 #1: tokenize's model-type probe exited 1).
func TestTokenizeGarbageTokenizerJSONExit2(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(p, []byte("garbage{\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{p, dir} {
		code, _, stderr := runCLIStdin("hi\n", "tokenize", "--tokenizer", path)
		if code != exitUsage || !strings.Contains(stderr, "not a tokenizer.json: invalid JSON at line 1 column 1") {
			t.Errorf("tokenize --tokenizer %s: exit %d, stderr %q; want exit %d naming the JSON error", path, code, stderr, exitUsage)
		}
	}
}
