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
		{"missing input file", "", []string{"--tokenizer", tok, filepath.Join(t.TempDir(), "nope.txt")}, false, "nope.txt"},
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
