package hub

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/hub/hubtest"
)

const testSHA = "0123456789abcdef0123456789abcdef01234567"

// bertRepo is a repository shaped like bert-base-uncased on the Hub: small git files, LFS weights in three
// formats, and a nested file.
func bertRepo() *hubtest.Repo {
	weights := bytes.Repeat([]byte("safetensors-weights."), 5000) // 100 kB
	return &hubtest.Repo{
		SHA: testSHA,
		Files: map[string][]byte{
			"config.json":              []byte(`{"model_type": "bert", "hidden_size": 8}`),
			"tokenizer.json":           []byte(`{"version": "1.0"}`),
			"model.safetensors":        weights,
			"pytorch_model.bin":        []byte("pickled weights"),
			"tf_model.h5":              []byte("hdf5 weights"),
			"coreml/model.mlmodel":     []byte("coreml"),
			"onnx/tokenizer_config.js": []byte("{}"),
		},
		LFS:   map[string]bool{"model.safetensors": true, "pytorch_model.bin": true, "tf_model.h5": true},
		Order: []string{"config.json", "model.safetensors", "pytorch_model.bin", "tf_model.h5", "tokenizer.json"},
	}
}

func testClient(h *hubtest.Server, cache string) *Client {
	return &Client{Endpoint: h.URL, Cache: cache, HTTP: h.Client(), Retries: 3}
}

func TestDownloadWritesHuggingFaceLayout(t *testing.T) {
	h := hubtest.NewServer(t)
	repo := bertRepo()
	h.Add("bert-base-uncased", repo)
	cache := t.TempDir()
	var progress bytes.Buffer
	c := testClient(h, cache)
	c.Progress = &progress
	res, err := c.Download(context.Background(), "bert-base-uncased", Options{})
	if err != nil {
		t.Fatal(err)
	}
	folder := filepath.Join(cache, "models--bert-base-uncased")
	if want := filepath.Join(folder, "snapshots", testSHA); res.Dir != want {
		t.Fatalf("Dir = %s, want %s", res.Dir, want)
	}
	// The layout huggingface_hub writes: relative links from the snapshot into blobs named by etag.
	for name, etag := range map[string]string{
		"config.json":       hubtest.GitBlobSHA1(repo.Files["config.json"]),
		"tokenizer.json":    hubtest.GitBlobSHA1(repo.Files["tokenizer.json"]),
		"model.safetensors": hubtest.SHA256Hex(repo.Files["model.safetensors"]),
	} {
		link := filepath.Join(res.Dir, name)
		target, err := os.Readlink(link)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := "../../blobs/" + etag; target != want {
			t.Errorf("%s -> %s, want %s", name, target, want)
		}
		got, err := os.ReadFile(link)
		if err != nil || !bytes.Equal(got, repo.Files[name]) {
			t.Errorf("%s content differs (%v)", name, err)
		}
	}
	if ref, _ := os.ReadFile(filepath.Join(folder, "refs", "main")); string(ref) != testSHA {
		t.Errorf("refs/main = %q, want the bare commit %s", ref, testSHA)
	}
	for _, name := range []string{"pytorch_model.bin", "tf_model.h5"} {
		if _, err := os.Lstat(filepath.Join(res.Dir, name)); err == nil {
			t.Errorf("%s was fetched; safetensors are preferred and it was not asked for", name)
		}
	}
	var why []string
	for _, s := range res.Skipped {
		why = append(why, s.Name+": "+s.Why)
	}
	if j := strings.Join(why, "\n"); !strings.Contains(j, "pytorch_model.bin: a pickle file") || !strings.Contains(j, "tf_model.h5: weights of another framework") {
		t.Errorf("Skipped = %v", why)
	}
	if !strings.Contains(progress.String(), "model.safetensors") {
		t.Errorf("no progress bar for model.safetensors in %q", progress.String())
	}
	// Again: everything is in the cache, nothing is transferred.
	h.Requests()
	res, err = c.Download(context.Background(), "bert-base-uncased", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if gets, _ := h.Requests(); len(gets) != 0 || len(res.Fetched) != 0 || len(res.Cached) != 4 {
		t.Errorf("second download transferred files (fetched %v, cached %v)", res.Fetched, res.Cached)
	}
	// What tune wrote, tune (and so an HF tool reading the same layout) resolves.
	t.Setenv("HF_HUB_CACHE", cache)
	if dir, err := Resolve("bert-base-uncased", ""); err != nil || dir != res.Dir {
		t.Errorf("Resolve = %s, %v; want %s", dir, err, res.Dir)
	}
}

func TestDownloadIncludeAndPickle(t *testing.T) {
	h := hubtest.NewServer(t)
	h.Add("org/model", bertRepo())
	c := testClient(h, t.TempDir())
	res, err := c.Download(context.Background(), "org/model", Options{Include: []string{"*.json"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"config.json", "tokenizer.json"}; !slices.Equal(res.Fetched, want) {
		t.Errorf("--include '*.json' fetched %v, want %v", res.Fetched, want)
	}
	// Pickle files come only with AllowPickle, even when --include names them.
	_, err = c.Download(context.Background(), "org/model", Options{Include: []string{"*.bin"}})
	if err == nil || !strings.Contains(err.Error(), "pytorch_model.bin (a pickle file") || !strings.Contains(err.Error(), "--allow-pickle") {
		t.Errorf("--include '*.bin' without AllowPickle: %v", err)
	}
	res, err = c.Download(context.Background(), "org/model", Options{Include: []string{"*.bin", "*.h5"}, AllowPickle: true})
	if err != nil || !slices.Equal(res.Fetched, []string{"pytorch_model.bin", "tf_model.h5"}) {
		t.Errorf("AllowPickle with --include '*.bin' '*.h5': fetched %v, %v", res.Fetched, err)
	}
}

func TestDownloadResumesAnInterruptedTransfer(t *testing.T) {
	h := hubtest.NewServer(t)
	repo := bertRepo()
	h.Add("org/model", repo)
	cache := t.TempDir()
	c := testClient(h, cache)
	c.Retries = 0
	h.Interrupt(30000, 1)
	_, err := c.Download(context.Background(), "org/model", Options{Include: []string{"model.safetensors"}})
	if err == nil || !strings.Contains(err.Error(), "broke off") && !strings.Contains(err.Error(), "ended after") {
		t.Fatalf("a dropped connection: err = %v", err)
	}
	blob := filepath.Join(cache, "models--org--model", "blobs", hubtest.SHA256Hex(repo.Files["model.safetensors"]))
	st, err := os.Stat(blob + ".incomplete")
	if err != nil || st.Size() != 30000 {
		t.Fatalf("the partial file: %v, %d bytes (want 30000 kept)", err, st.Size())
	}
	// A later run resumes from byte 30000 with a Range request and verifies the whole.
	h.Requests()
	if _, err := c.Download(context.Background(), "org/model", Options{Include: []string{"model.safetensors"}}); err != nil {
		t.Fatal(err)
	}
	if _, ranges := h.Requests(); !slices.Equal(ranges, []string{"bytes=30000-"}) {
		t.Errorf("the second run's requests: Range headers differ, want [bytes=30000-]")
	}
	if got, _ := os.ReadFile(blob); !bytes.Equal(got, repo.Files["model.safetensors"]) {
		t.Error("the resumed blob differs from the file")
	}
	if _, err := os.Stat(blob + ".incomplete"); err == nil {
		t.Error(".incomplete left behind")
	}

	// Within one run, a dropped connection is resumed (Retries).
	cache2 := t.TempDir()
	c2 := testClient(h, cache2)
	h.Interrupt(10000, 2)
	h.Requests()
	if _, err := c2.Download(context.Background(), "org/model", Options{Include: []string{"model.safetensors"}}); err != nil {
		t.Fatal(err)
	}
	if _, ranges := h.Requests(); !slices.Equal(ranges, []string{"", "bytes=10000-", "bytes=20000-"}) {
		t.Errorf("one run with two drops: Range headers %q, want [\"\" bytes=10000- bytes=20000-]", ranges)
	}
}

func TestDownloadRejectsACorruptFile(t *testing.T) {
	h := hubtest.NewServer(t)
	h.Add("org/model", bertRepo())
	h.Corrupt(true)
	cache := t.TempDir()
	_, err := testClient(h, cache).Download(context.Background(), "org/model", Options{Include: []string{"model.safetensors"}})
	if err == nil || !strings.Contains(err.Error(), "checksum mismatch: SHA-256") {
		t.Fatalf("err = %v, want a SHA-256 mismatch", err)
	}
	blobs, _ := filepath.Glob(filepath.Join(cache, "models--org--model", "blobs", "*"))
	if len(blobs) != 0 {
		t.Errorf("a corrupt download left %v", blobs)
	}
	// A small (git) file is checked against its blob SHA-1.
	_, err = testClient(h, cache).Download(context.Background(), "org/model", Options{Include: []string{"config.json"}})
	if err == nil || !strings.Contains(err.Error(), "checksum mismatch: git blob SHA-1") {
		t.Errorf("err = %v, want a git blob SHA-1 mismatch", err)
	}
}

func TestDownloadRefusals(t *testing.T) {
	h := hubtest.NewServer(t)
	private := bertRepo()
	private.Token = "hf_right"
	h.Add("org/private", private)
	gated := bertRepo()
	gated.Token, gated.Gated = "hf_right", true
	h.Add("org/gated", gated)
	h.Add("org/model", bertRepo())
	for _, tc := range []struct {
		name, repo, token, rev string
		opts                   Options
		status                 int
		want                   []string
	}{
		{"unknown repo", "org/nope", "", "", Options{}, 401, []string{"repository org/nope not found", "set HF_TOKEN"}},
		{"private, no token", "org/private", "", "", Options{}, 401, []string{"not found", "if it is private or gated, set HF_TOKEN"}},
		{"private, wrong token", "org/private", "hf_wrong", "", Options{}, 401, []string{"the HF_TOKEN sent was not accepted"}},
		{"gated", "org/gated", "", "", Options{}, 401, []string{"org/gated is gated: accept its conditions at", "/org/gated"}},
		{"unknown revision", "org/model", "", "v9", Options{}, 404, []string{"org/model has no revision v9"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testClient(h, t.TempDir())
			c.Token = tc.token
			tc.opts.Revision = tc.rev
			_, err := c.Download(context.Background(), tc.repo, tc.opts)
			var he *HTTPError
			if !errors.As(err, &he) || he.Status != tc.status {
				t.Fatalf("err = %v, want an HTTPError %d", err, tc.status)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
	// The right token is sent and accepted.
	c := testClient(h, t.TempDir())
	c.Token = "hf_right"
	if _, err := c.Download(context.Background(), "org/private", Options{Include: []string{"config.json"}}); err != nil {
		t.Errorf("with the token: %v", err)
	}
	// A file the listing names but the server does not have: 404 EntryNotFound names the file.
	broken := bertRepo()
	broken.Order = append(broken.Order, "missing.json")
	h.Add("org/broken", broken)
	_, err := testClient(h, t.TempDir()).Download(context.Background(), "org/broken", Options{Include: []string{"missing.json"}})
	if err == nil || !strings.Contains(err.Error(), "missing.json in org/broken at "+testSHA+" not found (HTTP 404)") {
		t.Errorf("a missing file: %v", err)
	}
}

func TestDownloadOfflineAndUnreachable(t *testing.T) {
	h := hubtest.NewServer(t)
	h.Add("org/model", bertRepo())
	cache := t.TempDir()
	c := testClient(h, cache)
	c.Offline = true
	_, err := c.Download(context.Background(), "org/model", Options{})
	var nc *NotCachedError
	if !errors.As(err, &nc) || !strings.Contains(err.Error(), "HF_HUB_OFFLINE is set") ||
		!strings.Contains(err.Error(), filepath.Join(cache, "models--org--model")+" does not exist") ||
		!strings.Contains(err.Error(), "tune download org/model") {
		t.Fatalf("offline, empty cache: %v", err)
	}
	if gets, _ := h.Requests(); len(gets) != 0 {
		t.Errorf("offline sent requests: %v", gets)
	}
	c.Offline = false
	want, err := c.Download(context.Background(), "org/model", Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.Offline = true
	res, err := c.Download(context.Background(), "org/model", Options{})
	if err != nil || res.Dir != want.Dir || res.FromCache == "" {
		t.Errorf("offline with the snapshot cached: %+v, %v", res, err)
	}
	_, err = c.Download(context.Background(), "org/model", Options{Revision: "v2"})
	if err == nil || !strings.Contains(err.Error(), filepath.Join("refs", "v2")+" does not exist") {
		t.Errorf("offline, a revision not cached: %v", err)
	}
	// No network: the Hub's address refuses connections; the cache answers, or the error says what is missing.
	url := h.URL
	h.Close()
	down := &Client{Endpoint: url, Cache: cache, HTTP: &http.Client{}}
	res, err = down.Download(context.Background(), "org/model", Options{})
	if err != nil || res.Dir != want.Dir || !strings.Contains(res.FromCache, "cannot be reached") {
		t.Errorf("unreachable, cached: %+v, %v", res, err)
	}
	_, err = down.Download(context.Background(), "org/other", Options{})
	if !errors.As(err, &nc) || !strings.Contains(err.Error(), "cannot be reached") || !strings.Contains(err.Error(), "models--org--other does not exist") {
		t.Errorf("unreachable, not cached: %v", err)
	}
}

func TestDownloadRefusesABadID(t *testing.T) {
	_, err := (&Client{}).Download(context.Background(), "../etc", Options{})
	if err == nil || !strings.Contains(err.Error(), "not a Hub repository id") {
		t.Errorf("err = %v", err)
	}
}

// TestDownloadRepairsAnIncompleteSnapshot: after a blob is deleted from the cache, resolving the id says the
// cache is incomplete and to run tune download again, and that download fetches the blob and the snapshot
// resolves again: the advice works.
func TestDownloadRepairsAnIncompleteSnapshot(t *testing.T) {
	h := hubtest.NewServer(t)
	h.Add("bert-base-uncased", bertRepo())
	cache := t.TempDir()
	c := testClient(h, cache)
	res, err := c.Download(context.Background(), "bert-base-uncased", Options{})
	if err != nil {
		t.Fatal(err)
	}
	blob, err := filepath.EvalSymlinks(filepath.Join(res.Dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(blob)
	if _, err := Snapshot(cache, "bert-base-uncased", ""); !IsNotCached(err) || !strings.Contains(err.Error(), "incomplete") ||
		!strings.Contains(err.Error(), "run `tune download bert-base-uncased` again") {
		t.Fatalf("Snapshot after the blob went: %v", err)
	}
	if _, err := c.Download(context.Background(), "bert-base-uncased", Options{}); err != nil {
		t.Fatal(err)
	}
	if dir, err := Snapshot(cache, "bert-base-uncased", ""); err != nil || dir != res.Dir {
		t.Fatalf("Snapshot after tune download: %s, %v", dir, err)
	}
	if b, err := os.ReadFile(filepath.Join(res.Dir, "model.safetensors")); err != nil || !bytes.Equal(b, bertRepo().Files["model.safetensors"]) {
		t.Fatalf("model.safetensors after the repair: %d bytes, %v", len(b), err)
	}
}

// TestOfflineIncludeMatchesTheCache: offline (or with the Hub unreachable) Download answered with the cached
// snapshot whatever --include asked for, so --include "[[" (which, as in fnmatch, matches only a file named
// "[[") or a file never fetched passed (tester7 F5). A snapshot with no file matching any pattern is now a
// NotCachedError naming the patterns; one that holds a match is the answer, as before.
func TestOfflineIncludeMatchesTheCache(t *testing.T) {
	h := hubtest.NewServer(t)
	h.Add("org/model", bertRepo())
	c := testClient(h, t.TempDir())
	if _, err := c.Download(context.Background(), "org/model", Options{Include: []string{"config.json"}}); err != nil {
		t.Fatal(err)
	}
	c.Offline = true
	for _, inc := range [][]string{{"[["}, {"*.safetensors"}, {"[[", "vocab.txt"}} {
		_, err := c.Download(context.Background(), "org/model", Options{Include: inc})
		var nc *NotCachedError
		if !errors.As(err, &nc) || !strings.Contains(err.Error(), "a file matching --include \""+inc[0]+"\"") ||
			!strings.Contains(err.Error(), "HF_HUB_OFFLINE is set") {
			t.Errorf("--include %q: %v", inc, err)
		}
	}
	for _, inc := range [][]string{{"config.json"}, {"*.json"}, {"[[", "config.*"}, nil} {
		if res, err := c.Download(context.Background(), "org/model", Options{Include: inc}); err != nil || res.FromCache == "" {
			t.Errorf("--include %q: %v", inc, err)
		}
	}
}
