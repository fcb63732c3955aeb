package recipes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestEmbeddedCopyIsVerified: the unpacked copy of the embedded data was never checked again: a train.tsv
// truncated to 100 lines made tune finetune tiny train on 99 examples without a word (findings4). A copy whose
// files differ from the embedded bytes is replaced; without a user cache the copy goes to a per-user folder,
// not the shared /tmp/tune.
func TestEmbeddedCopyIsVerified(t *testing.T) {
	testutil.IsolateCache(t)
	dir, err := unpackEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "data", "tiny", "train.tsv")
	want, _ := os.ReadFile(p)
	if err := os.WriteFile(p, want[:100], 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := unpackEmbedded()
	if err != nil || again != dir {
		t.Fatalf("%s, %v", again, err)
	}
	if got, _ := os.ReadFile(p); string(got) != string(want) {
		t.Errorf("the truncated copy was used: %d bytes, want %d", len(got), len(want))
	}
	t.Setenv("HOME", "")
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("TMPDIR", t.TempDir())
	tmp, err := unpackEmbedded()
	if err != nil || !strings.Contains(tmp, string(filepath.Separator)+"tune-") {
		t.Errorf("without a user cache: %s, %v", tmp, err)
	}
}

// TestMarshalKeepsOutsidePathsAsWritten: tune validate --no-files bert printed the embedded recipe's paths that
// leave the embedded tree resolved against the hidden copy of the data (/root/.cache/shared/data/sst2/...),
// folders that never exist (findings4). They are printed as the recipe writes them; embedded ones resolve.
func TestMarshalKeepsOutsidePathsAsWritten(t *testing.T) {
	testutil.IsolateCache(t)
	r, err := Load("bert", nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"path: ../checkpoints/bert-base-uncased\n", "train: ../../shared/data/sst2/train.tsv\n", "eval: ../../shared/data/sst2/dev.tsv\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if strings.Count(string(out), "path: ../checkpoints/bert-base-uncased") != 2 || !strings.HasSuffix(r.Model.Path, filepath.Join("checkpoints", "bert-base-uncased")) || !filepath.IsAbs(r.Data.Train) {
		t.Errorf("tokenizer.path or the recipe itself changed: %s %s\n%s", r.Model.Path, r.Data.Train, out)
	}
}
