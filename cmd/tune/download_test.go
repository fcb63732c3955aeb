package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/hub/hubtest"
	"github.com/tune-ml/tune/internal/testutil"
)

// tinyHubModel trains the tiny recipe for one step and returns its model files (config.json,
// model.safetensors, vocab.txt), a stand-in for a Hub model that the tests serve or cache.
func tinyHubModel(t *testing.T) map[string][]byte {
	t.Helper()
	out := tinyCheckpoint(t)
	files := map[string][]byte{}
	for _, name := range []string{"config.json", "model.safetensors", "vocab.txt"} {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
	}
	return files
}

// TestDownloadThenFinetuneByHubID is the README's path from a fresh clone: tune download fills the Hugging
// Face cache from a Hub (here a loopback test server, HF_ENDPOINT), then the bert recipe trains from
// model.path=bert-base-uncased, read from that cache; a second download transfers nothing.
func TestDownloadThenFinetuneByHubID(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model; skipped in -short mode")
	}
	testutil.IsolateCache(t)
	files := tinyHubModel(t)
	files["pytorch_model.bin"] = []byte("a pickle tune must not fetch")
	srv := hubtest.NewServer(t)
	const commit = "86b5e0934494bd15c9632b12f734a8a67f723594"
	srv.Add("bert-base-uncased", &hubtest.Repo{SHA: commit, Files: files,
		LFS: map[string]bool{"model.safetensors": true, "pytorch_model.bin": true}})
	cache := filepath.Join(t.TempDir(), "hf", "hub")
	t.Setenv("HF_HUB_CACHE", cache)
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_TOKEN", "")

	code, stdout, stderr := runCLI("download", "bert-base-uncased")
	if code != exitOK {
		t.Fatalf("download exit %d\n%s\n%s", code, stdout, stderr)
	}
	snap := filepath.Join(cache, "models--bert-base-uncased", "snapshots", commit)
	if strings.TrimSpace(stdout) != snap {
		t.Errorf("download printed %q, want the snapshot %s", stdout, snap)
	}
	for _, w := range []string{"bert-base-uncased at main (commit 86b5e0934494): 3 files fetched", "skipped pytorch_model.bin: a pickle file", "model.safetensors"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("download's stderr lacks %q:\n%s", w, stderr)
		}
	}
	if _, err := os.Lstat(filepath.Join(snap, "pytorch_model.bin")); err == nil {
		t.Error("pytorch_model.bin was fetched")
	}
	srv.Requests()
	if code, _, stderr = runCLI("download", "--quiet", "bert-base-uncased"); code != exitOK {
		t.Fatalf("second download exit %d: %s", code, stderr)
	}
	if gets, _ := srv.Requests(); len(gets) != 0 {
		t.Errorf("a second download transferred %v", gets)
	}

	tiny := filepath.Join("..", "..", "recipes", "data", "tiny")
	out := filepath.Join(t.TempDir(), "bert-lora")
	code, stdout, stderr = runCLI("finetune", "--device", "cpu", filepath.Join("..", "..", "recipes", "bert.yaml"),
		"model.path=bert-base-uncased", "data.train="+filepath.Join(tiny, "train.tsv"), "data.eval="+filepath.Join(tiny, "dev.tsv"),
		"data.max_length=64", "training.max_steps=2", "training.output_dir="+out)
	if code != exitOK {
		t.Fatalf("finetune model.path=bert-base-uncased exit %d\n%s\n%s", code, stdout, stderr)
	}
	// The adapter names its base by the Hub id, as PEFT writes it, so HF tools find the base by it too.
	cfg, err := os.ReadFile(filepath.Join(out, "adapter_config.json"))
	if err != nil || !strings.Contains(string(cfg), `"base_model_name_or_path": "bert-base-uncased"`) {
		t.Errorf("adapter_config.json: %v\n%s", err, cfg)
	}
	// eval and merge take the id too, and merge sees the adapter's base is the model given.
	dev := filepath.Join(tiny, "dev.tsv")
	if code, _, stderr = runCLI("eval", "--device", "cpu", "--model", "bert-base-uncased", "--adapter", out, "--data", dev); code != exitOK {
		t.Errorf("eval --model bert-base-uncased exit %d: %s", code, stderr)
	}
	merged := filepath.Join(t.TempDir(), "merged")
	if code, _, stderr = runCLI("merge", "--model", "bert-base-uncased", "--adapter", out, "--output", merged); code != exitOK || strings.Contains(stderr, "warning") {
		t.Errorf("merge --model bert-base-uncased exit %d: %s", code, stderr)
	}
	if code, stdout, stderr = runCLI("inspect", "bert-base-uncased"); code != exitOK || !strings.Contains(stdout, "model.safetensors") && !strings.Contains(stdout, "bert") {
		t.Errorf("inspect bert-base-uncased exit %d: %s%s", code, stdout, stderr)
	}

	// Offline, the cache answers; a model it lacks is named with what is missing (exit 1: the command could not run).
	t.Setenv("HF_HUB_OFFLINE", "1")
	if code, stdout, stderr = runCLI("download", "bert-base-uncased"); code != exitOK || strings.TrimSpace(stdout) != snap {
		t.Errorf("offline download of a cached model: exit %d, %q %s", code, stdout, stderr)
	}
	code, _, stderr = runCLI("download", "google-bert/bert-large-uncased")
	if code != exitError || !strings.Contains(stderr, "HF_HUB_OFFLINE is set") || !strings.Contains(stderr, filepath.Join(cache, "models--google-bert--bert-large-uncased")+" does not exist") {
		t.Errorf("offline download of an uncached model: exit %d: %s", code, stderr)
	}
	// A finetune naming an uncached id is a usage error before anything loads.
	code, _, stderr = runCLI("validate", filepath.Join("..", "..", "recipes", "bert.yaml"), "model.path=google-bert/bert-large-uncased",
		"data.train="+filepath.Join(tiny, "train.tsv"), "data.eval="+dev)
	if code != exitUsage || !strings.Contains(stderr, "model.path: no directory google-bert/bert-large-uncased here, and google-bert/bert-large-uncased at revision main is not in the Hugging Face cache") ||
		!strings.Contains(stderr, "tune download google-bert/bert-large-uncased") {
		t.Errorf("validate with an uncached id: exit %d: %s", code, stderr)
	}
	if code, _, stderr = runCLI("eval", "--model", "google-bert/bert-large-uncased", "--data", dev); code != exitUsage || !strings.Contains(stderr, "--model google-bert/bert-large-uncased: no such file or directory here, and") {
		t.Errorf("eval with an uncached id: exit %d: %s", code, stderr)
	}
	// A positional argument is named by its value, not its placeholder (tester 12: "tune: PATH evil/m: ...").
	if code, _, stderr = runCLI("inspect", "google-bert/bert-large-uncased"); code != exitUsage ||
		!strings.HasPrefix(stderr, "tune: google-bert/bert-large-uncased: no such file or directory here, and") {
		t.Errorf("inspect with an uncached id: exit %d: %s", code, stderr)
	}
}

// TestFinetuneFromHuggingFaceWrittenCache: a cache laid out as huggingface_hub writes it (an org/name id,
// refs/main, relative links into blobs/) serves a recipe's model.path, offline, with no tune download.
func TestFinetuneFromHuggingFaceWrittenCache(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model; skipped in -short mode")
	}
	testutil.IsolateCache(t)
	files := tinyHubModel(t)
	home := t.TempDir()
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HF_HOME", home) // the cache is $HF_HOME/hub
	t.Setenv("HF_HUB_OFFLINE", "1")
	snap := hubtest.WriteCache(t, filepath.Join(home, "hub"), "google-bert/bert-base-uncased", "1dbc166cf8765166998eff31ade2eb64c8a40076",
		[]string{"main"}, files, map[string]bool{"model.safetensors": true})
	tiny := filepath.Join("..", "..", "recipes", "data", "tiny")
	out := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := runCLI("finetune", "--device", "cpu", filepath.Join("..", "..", "recipes", "bert-full.yaml"),
		"model.path=google-bert/bert-base-uncased", "data.train="+filepath.Join(tiny, "train.tsv"), "data.eval="+filepath.Join(tiny, "dev.tsv"),
		"data.max_length=64", "training.max_steps=2", "training.output_dir="+out)
	if code != exitOK {
		t.Fatalf("finetune exit %d\n%s\n%s", code, stdout, stderr)
	}
	// Nothing was written into the cache.
	if after := hubtest.ReadDir(t, snap); len(after) != len(files) {
		t.Errorf("the snapshot now holds %d files, had %d", len(after), len(files))
	}
}

// TestDownloadBadEndpoint: an HF_ENDPOINT that is not an http(s) URL is bad usage naming it; before, the Go
// client's 'Get "notaurl/api/models/gpt2/revision/main": unsupported protocol scheme ""' with exit 1.
func TestDownloadBadEndpoint(t *testing.T) {
	testutil.IsolateCache(t)
	for _, ep := range []string{"notaurl", "ftp://example.com", "https://"} {
		t.Setenv("HF_ENDPOINT", ep)
		code, _, stderr := runCLI("download", "gpt2")
		if code != exitUsage || !strings.Contains(stderr, "HF_ENDPOINT") || !strings.Contains(stderr, "is not an http(s) URL") {
			t.Errorf("HF_ENDPOINT=%s: exit %d, %s", ep, code, stderr)
		}
	}
}

// TestDownloadBadRevision: a --revision that names no branch, tag or commit ("../../x", an absolute path) is a
// bad flag value, exit 2 naming the flag, before anything is asked of the Hub or the cache; it exited 1
// (tester7 F4), while a bad REPO_ID exits 2.
func TestDownloadBadRevision(t *testing.T) {
	testutil.IsolateCache(t)
	t.Setenv("HF_HUB_OFFLINE", "1")
	for _, rev := range []string{"../../x", "/etc", `a\b`} {
		code, _, stderr := runCLI("download", "gpt2", "--revision", rev)
		if code != exitUsage || !strings.Contains(stderr, "--revision \""+strings.ReplaceAll(rev, `\`, `\\`)+"\" is not a branch, tag or commit name") {
			t.Errorf("--revision %s: exit %d, %s", rev, code, stderr)
		}
	}
}
