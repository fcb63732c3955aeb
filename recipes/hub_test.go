package recipes

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/hub/hubtest"
	"github.com/tune-ml/tune/internal/testutil"
)

// TestModelPathHubID: model.path (and tokenizer.path) given as a Hub id is read from the Hugging Face cache,
// laid out as huggingface_hub writes it, at model.revision; a local path of that name wins; an id missing
// from the cache is an error naming the cache and tune download.
// seqclsVocab keeps the first 99 tokens of the tiny vocabulary: the reference seqcls checkpoint's vocab_size.
func seqclsVocab(vocab []byte) []byte {
	lines := strings.SplitAfter(string(vocab), "\n")
	return []byte(strings.Join(lines[:99], ""))
}

func TestModelPathHubID(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("HF_HUB_CACHE", cache)
	files := hubtest.ReadDir(t, testutil.Testdata(t, "safetensors", "reference", "seqcls"))
	vocab, err := os.ReadFile(filepath.Join(testutil.RepoRoot(t), "recipes", "data", "tiny", "vocab.txt"))
	if err != nil {
		t.Fatal(err)
	}
	files["vocab.txt"] = seqclsVocab(vocab)
	const c1, c2 = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	snap := hubtest.WriteCache(t, cache, "org/tiny-bert", c1, []string{"main"}, files, map[string]bool{"model.safetensors": true})
	old := hubtest.WriteCache(t, cache, "org/tiny-bert", c2, []string{"v1"}, files, nil)
	data := filepath.Join(testutil.RepoRoot(t), "recipes", "data", "tiny", "train.tsv")
	dir := t.TempDir()
	load := func(extra ...string) (*Recipe, error) {
		t.Helper()
		args := append([]string{"data.train=" + data, "data.max_length=64", "training.output_dir=" + filepath.Join(dir, "out")}, extra...)
		r, err := Decode([]byte("model:\n  path: org/tiny-bert\n"), filepath.Join(dir, "r.yaml"), dir, args)
		if err != nil {
			return nil, err
		}
		return r, r.CheckFiles()
	}
	r, err := load()
	if err != nil {
		t.Fatal(err)
	}
	if r.Model.Path != snap || r.Tokenizer.Path != snap || r.HubID("model.path") != "org/tiny-bert" {
		t.Errorf("model.path %s, tokenizer.path %s, id %q; want the snapshot %s", r.Model.Path, r.Tokenizer.Path, r.HubID("model.path"), snap)
	}
	if r, err = load("model.revision=v1"); err != nil || r.Model.Path != old {
		t.Errorf("model.revision=v1: %v, %v; want %s", r, err, old)
	}
	if r, err = load("model.path=org/tiny-bert", "tokenizer.path=org/tiny-bert"); err != nil || r.Tokenizer.Path != snap {
		t.Errorf("an override: %v, %+v", err, r)
	}
	// Missing from the cache: the error names the key, the id, the cache and the fix; exit 2 (ErrInvalid).
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"model.path=org/other"}, []string{"model.path: no directory org/other here, and org/other at revision main is not in the Hugging Face cache " + cache, "tune download org/other"}},
		{[]string{"model.revision=v2"}, []string{"org/tiny-bert at revision v2 is not in the Hugging Face cache", filepath.Join("refs", "v2") + " does not exist", "tune download org/tiny-bert --revision v2"}},
		{[]string{"tokenizer.path=org/tok"}, []string{"tokenizer.path: no file or directory org/tok here, and org/tok at revision main"}},
	} {
		_, err := load(tc.args...)
		if err == nil || !errors.Is(err, ErrInvalid) {
			t.Errorf("%v: err = %v, want ErrInvalid", tc.args, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q lacks %q", tc.args, err, w)
			}
		}
	}
	// A snapshot without config.json (a partial download) names the repository and tune download.
	os.Remove(filepath.Join(snap, "config.json"))
	if _, err := load(); err == nil || !strings.Contains(err.Error(), "the Hugging Face cache's snapshot of org/tiny-bert; `tune download org/tiny-bert` fetches what it lacks") {
		t.Errorf("a partial snapshot: %v", err)
	}
	// A local directory of the same name is used, not the cache.
	local := filepath.Join(dir, "org", "tiny-bert")
	os.MkdirAll(local, 0o755)
	for name, b := range files {
		os.WriteFile(filepath.Join(local, name), b, 0o644)
	}
	if r, err := load(); err != nil || r.Model.Path != local || r.HubID("model.path") != "" {
		t.Errorf("a local org/tiny-bert beside the recipe: %v, %+v", err, r)
	}
}
