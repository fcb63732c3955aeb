package loaders

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sugarme/tokenizer/model/wordpiece"

	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/internal/smallfile"
)

// TestTokenizerFileBounded checks that a tokenizer.json or vocab.txt that is a symbolic link to /dev/zero, or
// larger than smallfile.MaxTokenizerBytes, is refused as bad input naming the file before it is read (it ran the
// process out of memory), and that a vocab.txt line longer than MaxVocabLineBytes is reported by its number.
func TestTokenizerFileBounded(t *testing.T) {
	_, zeroErr := os.Stat("/dev/zero")
	for _, tc := range []struct {
		name string
		make func(p string) error
		want string
	}{
		{"tokenizer.json", func(p string) error { return os.Symlink("/dev/zero", p) }, " is a character device, not a regular file: tune reads a tokenizer.json only from a regular file"},
		{"vocab.txt", func(p string) error { return os.Symlink("/dev/zero", p) }, " is a character device, not a regular file: tune reads a vocab.txt only from a regular file"},
		{"tokenizer.json", func(p string) error {
			os.WriteFile(p, []byte("{"), 0o644)
			return os.Truncate(p, smallfile.MaxTokenizerBytes+1)
		}, " is larger than 268435456 bytes (268435457 bytes), more than tune reads for a tokenizer.json"},
		{"vocab.txt", func(p string) error {
			return os.WriteFile(p, []byte("[PAD]\n[UNK]\r\n"+strings.Repeat("a", MaxVocabLineBytes+1)+"\n[CLS]\n"), 0o644)
		}, " line 3 is longer than 65536 bytes, the most tune reads for a token of a vocab.txt"},
	} {
		if strings.Contains(tc.want, "device") && zeroErr != nil {
			continue
		}
		dir := t.TempDir()
		p := filepath.Join(dir, tc.name)
		if err := tc.make(p); err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{dir, p} {
			_, err := LoadTokenizer(path)
			if err == nil || !badinput.Is(err) || !strings.Contains(err.Error(), p+tc.want) || strings.Contains(err.Error(), "bufio") {
				t.Errorf("%s (%s): %v, want bad input with %q", tc.name, path, err, p+tc.want)
			}
		}
	}
}

// TestReadVocabTxtMatchesLibrary checks that tune's bounded vocab.txt reader gives the vocabulary
// github.com/sugarme/tokenizer's wordpiece.NewWordPieceFromFile (which tune used before) gives: "\r\n" line ends,
// an empty line, a repeated token (the last id wins) and a last line without "\n".
func TestReadVocabTxtMatchesLibrary(t *testing.T) {
	for _, content := range []string{
		"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n##s\n",
		"[PAD]\r\n[UNK]\r\n\r\nhello\r\nhello\n[CLS]\n[SEP]",
		"\n\n a \n\t\n",
		"",
	} {
		p := filepath.Join(t.TempDir(), "vocab.txt")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := readVocabTxt(p)
		if err != nil {
			t.Fatal(err)
		}
		wp, err := wordpiece.NewWordPieceFromFile(p, "[UNK]", 100)
		if err != nil {
			t.Fatal(err)
		}
		if want := wp.GetVocab(); !reflect.DeepEqual(map[string]int(got), want) {
			t.Errorf("%q: got %v, want %v", content, got, want)
		}
	}
}
