package hub

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/hub/hubtest"
)

// writeHFCache lays out a cache as huggingface_hub's hf_hub_download writes it (file_download.py:
// _create_symlink makes snapshots/<commit>/<path> a relative link to ../../blobs/<etag>, one more ../ per
// folder level; refs/<revision> holds the bare commit; .locks/ and .no_exist/ beside), for two revisions.
func writeHFCache(t *testing.T, cache string) (mainDir, tagDir string) {
	t.Helper()
	repo := filepath.Join(cache, "models--google-bert--bert-base-uncased")
	const c1, c2 = "86b5e0934494bd15c9632b12f734a8a67f723594", "1dbc166cf8765166998eff31ade2eb64c8a40076"
	files := map[string]string{
		"config.json":       `{"model_type": "bert"}`,
		"model.safetensors": "weights",
		"onnx/config.json":  `{"onnx": true}`,
	}
	for _, d := range []string{"blobs", "refs", "snapshots/" + c1 + "/onnx", "snapshots/" + c2, ".no_exist/" + c1} {
		if err := os.MkdirAll(filepath.Join(repo, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range files {
		etag := hubtest.GitBlobSHA1([]byte(body))
		if err := os.WriteFile(filepath.Join(repo, "blobs", etag), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		up := strings.Repeat("../", strings.Count(name, "/")+2)
		if err := os.Symlink(up+"blobs/"+etag, filepath.Join(repo, "snapshots", c1, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../../blobs/"+hubtest.GitBlobSHA1([]byte(files["config.json"])), filepath.Join(repo, "snapshots", c2, "config.json")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(c1), 0o644)
	os.MkdirAll(filepath.Join(repo, "refs", "refs", "pr"), 0o755)
	os.WriteFile(filepath.Join(repo, "refs", "refs", "pr", "1"), []byte(c2), 0o644)
	os.WriteFile(filepath.Join(repo, ".no_exist", c1, "tokenizer.json"), nil, 0o644)
	os.MkdirAll(filepath.Join(cache, ".locks", "models--google-bert--bert-base-uncased"), 0o755)
	return filepath.Join(repo, "snapshots", c1), filepath.Join(repo, "snapshots", c2)
}

func TestResolveReadsHuggingFaceCache(t *testing.T) {
	cache := t.TempDir()
	mainDir, prDir := writeHFCache(t, cache)
	t.Setenv("HF_HUB_CACHE", cache)
	for _, tc := range []struct{ value, rev, want string }{
		{"google-bert/bert-base-uncased", "", mainDir},
		{"google-bert/bert-base-uncased", "main", mainDir},
		{"google-bert/bert-base-uncased", "refs/pr/1", prDir},
		{"google-bert/bert-base-uncased", "1dbc166cf8765166998eff31ade2eb64c8a40076", prDir},
	} {
		got, err := Resolve(tc.value, tc.rev)
		if err != nil || got != tc.want {
			t.Errorf("Resolve(%q, %q) = %s, %v; want %s", tc.value, tc.rev, got, err, tc.want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(mainDir, "onnx", "config.json")); err != nil || string(b) != `{"onnx": true}` {
		t.Errorf("a nested file through its link: %q, %v", b, err)
	}
	for _, tc := range []struct{ value, rev, missing string }{
		{"google-bert/bert-large-uncased", "", "models--google-bert--bert-large-uncased"},
		{"google-bert/bert-base-uncased", "v1.0", filepath.Join("refs", "v1.0")},
		{"google-bert/bert-base-uncased", "ffffffffffffffffffffffffffffffffffffffff", filepath.Join("snapshots", "ffffffffffffffffffffffffffffffffffffffff")},
	} {
		_, err := Resolve(tc.value, tc.rev)
		var nc *NotCachedError
		if !errors.As(err, &nc) || !strings.HasSuffix(nc.Missing, tc.missing) {
			t.Errorf("Resolve(%q, %q): %v; want %s missing", tc.value, tc.rev, err, tc.missing)
			continue
		}
		for _, w := range []string{cache, "tune download " + tc.value} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q lacks %q", err, w)
			}
		}
	}
	// Local paths win and are never looked up in the cache.
	local := t.TempDir()
	if got, err := Resolve(local, ""); err != nil || got != local {
		t.Errorf("a local directory: %s, %v", got, err)
	}
	for _, p := range []string{"./bert", "../x/y", "/no/such/dir", "a/b/c", "~/m"} {
		_, err := Resolve(p, "")
		if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Resolve(%q): %v; want a missing path", p, err)
		}
	}
}

func TestCacheDirFollowsHuggingFaceEnvironment(t *testing.T) {
	for _, v := range []string{"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"} {
		t.Setenv(v, "")
	}
	t.Setenv("HOME", "/home/u")
	if got := CacheDir(); got != "/home/u/.cache/huggingface/hub" {
		t.Errorf("default: %s", got)
	}
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	if got := CacheDir(); got != "/xdg/huggingface/hub" {
		t.Errorf("XDG_CACHE_HOME: %s", got)
	}
	t.Setenv("HF_HOME", "~/hf")
	if got := CacheDir(); got != "/home/u/hf/hub" {
		t.Errorf("HF_HOME: %s", got)
	}
	t.Setenv("HF_HUB_CACHE", "/c")
	if got := CacheDir(); got != "/c" {
		t.Errorf("HF_HUB_CACHE: %s", got)
	}
}

func TestValidRepoID(t *testing.T) {
	for id, want := range map[string]bool{
		"bert-base-uncased": true, "Qwen/Qwen2.5-0.5B": true, "google-bert/bert-base-uncased": true,
		"a/b/c": false, "org--x/y": false, "x..y": false, "model.git": false, "": false, "/abs": false, "-x": false,
	} {
		if got := ValidRepoID(id); got != want {
			t.Errorf("ValidRepoID(%q) = %v", id, got)
		}
	}
}

func TestGlobMatchesAsFnmatch(t *testing.T) {
	for _, tc := range []struct {
		glob, name string
		want       bool
	}{
		{"*.json", "config.json", true},
		{"*.json", "onnx/config.json", true}, // fnmatch's * crosses /
		{"onnx/", "onnx/model.onnx", true},
		{"model-0000?-of-*.safetensors", "model-00001-of-00002.safetensors", true},
		{"[!t]*.json", "tokenizer.json", false},
		{"[ct]*.json", "tokenizer.json", true},
		{"*.safetensors", "model.safetensors.index.json", false},
	} {
		if got := globRegexp(tc.glob).MatchString(tc.name); got != tc.want {
			t.Errorf("%q matches %q: %v", tc.glob, tc.name, got)
		}
	}
}

// TestResolveIncompleteSnapshot: a snapshot whose link points at a blob that is gone is reported as an
// incomplete cache, naming the file, the missing blob and the tune download that repairs it, not as a bare
// "no such file or directory" when the file is read.
func TestResolveIncompleteSnapshot(t *testing.T) {
	cache := t.TempDir()
	mainDir, _ := writeHFCache(t, cache)
	t.Setenv("HF_HUB_CACHE", cache)
	blob, err := filepath.EvalSymlinks(filepath.Join(mainDir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(blob)
	_, err = Resolve("google-bert/bert-base-uncased", "")
	var nc *NotCachedError
	if !errors.As(err, &nc) || !IsNotCached(err) || len(nc.Links) != 1 || nc.Links[0] != "model.safetensors" || nc.Missing != blob {
		t.Fatalf("Resolve: %v (%+v); want a NotCachedError naming model.safetensors and its blob", err, nc)
	}
	for _, w := range []string{"the Hugging Face cache " + cache + " holds google-bert/bert-base-uncased at revision main incomplete",
		"model.safetensors links to " + blob + ", which is missing", "run `tune download google-bert/bert-base-uncased` again"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q lacks %q", err, w)
		}
	}
	// The other revision, whose snapshot links only config.json, is complete.
	if _, err := Resolve("google-bert/bert-base-uncased", "refs/pr/1"); err != nil {
		t.Errorf("the complete snapshot: %v", err)
	}
}

// TestResolveNotesALocalNamespace: a value such as runs/tny that is neither a path nor cached, whose first part
// is a local folder, says so and lists that folder's folders: it was most likely a mistyped local path.
func TestResolveNotesALocalNamespace(t *testing.T) {
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	t.Chdir(t.TempDir())
	os.MkdirAll(filepath.Join("runs", "tiny"), 0o755)
	_, err := Resolve("runs/tny", "")
	if !IsNotCached(err) || !strings.HasSuffix(err.Error(), "; if runs/tny is meant as a local path: the folder runs has no tny (it holds the folders tiny)") {
		t.Errorf("Resolve(runs/tny): %v", err)
	}
	if _, err := Resolve("google-bert/bert-base-uncased", ""); !IsNotCached(err) || strings.Contains(err.Error(), "local path") {
		t.Errorf("an id whose namespace is no local folder: %v", err)
	}
}

// TestResolveSnapshotPathIncomplete: a snapshot directory given as a path, not by its id, is checked too.
func TestResolveSnapshotPathIncomplete(t *testing.T) {
	cache := t.TempDir()
	mainDir, prDir := writeHFCache(t, cache)
	blob, _ := filepath.EvalSymlinks(filepath.Join(mainDir, "model.safetensors"))
	os.Remove(blob)
	_, err := Resolve(mainDir, "")
	var nc *NotCachedError
	if !errors.As(err, &nc) || nc.RepoID != "google-bert/bert-base-uncased" || len(nc.Links) != 1 ||
		!strings.Contains(err.Error(), "run `tune download google-bert/bert-base-uncased --revision "+filepath.Base(mainDir)+"` again") {
		t.Fatalf("Resolve(%s): %v", mainDir, err)
	}
	if got, err := Resolve(prDir, ""); err != nil || got != prDir {
		t.Errorf("a complete snapshot path: %s, %v", got, err)
	}
	if got, err := Resolve(t.TempDir(), ""); err != nil || got == "" {
		t.Errorf("a plain directory: %s, %v", got, err)
	}
}
