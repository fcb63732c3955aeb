package hubtest

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Server is a Hugging Face Hub on loopback that speaks the parts of the API hub.Client uses:
// GET /api/models/{id}/revision/{rev} (the commit and file list), HEAD and GET /{id}/resolve/{commit}/{file}
// (an LFS file is redirected to /cdn/ with X-Linked-Etag and X-Linked-Size, as the Hub redirects to its CDN;
// a small file carries its git blob SHA-1 as ETag), Range requests, tokens, and the Hub's X-Error-Code
// headers (RepositoryNotFound, GatedRepo, RevisionNotFound, EntryNotFound).
type Server struct {
	// URL is the server's base address, for HF_ENDPOINT or hub.Client.Endpoint.
	URL string

	srv   *httptest.Server
	mu    sync.Mutex
	repos map[string]*Repo
	// breakAfter and breaks: the next breaks body transfers longer than breakAfter bytes stop there and drop
	// the connection.
	breakAfter, breaks int
	corrupt            bool
	gets, ranges       []string
}

// Repo is a repository the Server holds.
type Repo struct {
	// SHA is its commit hash (40 hex digits); "main" and SHA are the revisions it answers.
	SHA string
	// Token, when set, must be sent as "Bearer Token"; without it the repository is answered 401
	// RepositoryNotFound (as the Hub hides private repositories), or 401 GatedRepo when Gated is set.
	Token string
	Gated bool
	// Files maps each path in the repository to its content; LFS marks those served as LFS files.
	Files map[string][]byte
	LFS   map[string]bool
	// Order is the listing order of the files; files not in it are listed after, in no set order.
	Order []string
}

// NewServer starts a Server on loopback, closed when the test ends.
func NewServer(t testing.TB) *Server {
	h := &Server{repos: map[string]*Repo{}}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	h.URL = h.srv.URL
	t.Cleanup(h.srv.Close)
	return h
}

// Close stops the server: later requests find nothing listening (a Hub out of reach).
func (h *Server) Close() { h.srv.Close() }

// Client returns an HTTP client for the server.
func (h *Server) Client() *http.Client { return h.srv.Client() }

// Interrupt makes the next times body transfers longer than after bytes send only after bytes and then drop
// the connection.
func (h *Server) Interrupt(after, times int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.breakAfter, h.breaks = after, times
}

// Corrupt makes the server flip the first byte of every file body it sends (a transfer that went wrong).
func (h *Server) Corrupt(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.corrupt = on
}

// Requests returns, for each file body sent since the last call, the file's name and the request's Range
// header ("" for none), and forgets them.
func (h *Server) Requests() (files, ranges []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	files, ranges = h.gets, h.ranges
	h.gets, h.ranges = nil, nil
	return files, ranges
}

// Add puts a repository on the server under id ("name" or "org/name").
func (h *Server) Add(id string, r *Repo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name := range r.Files {
		if !contains(r.Order, name) {
			r.Order = append(r.Order, name)
		}
	}
	h.repos[id] = r
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// GitBlobSHA1 returns the git blob id of b, the Hub's etag for a small file.
func GitBlobSHA1(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// SHA256Hex returns the SHA-256 of b in hex, the Hub's etag for an LFS file.
func SHA256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (h *Server) serve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := r.URL.EscapedPath()
	if rest, ok := strings.CutPrefix(p, "/cdn/"); ok {
		for _, repo := range h.repos {
			for name, b := range repo.Files {
				if SHA256Hex(b) == rest {
					h.body(w, r, name, b)
					return
				}
			}
		}
		http.NotFound(w, r)
		return
	}
	if rest, ok := strings.CutPrefix(p, "/api/models/"); ok {
		id, rev, ok := strings.Cut(rest, "/revision/")
		repo := h.authorize(w, r, id)
		if !ok || repo == nil {
			return
		}
		if rev != "main" && rev != repo.SHA {
			w.Header().Set("X-Error-Code", "RevisionNotFound")
			http.Error(w, "Invalid rev id: "+rev, http.StatusNotFound)
			return
		}
		var sib []map[string]string
		for _, f := range repo.Order {
			sib = append(sib, map[string]string{"rfilename": f})
		}
		json.NewEncoder(w).Encode(map[string]any{"id": id, "sha": repo.SHA, "siblings": sib})
		return
	}
	id, rest, ok := strings.Cut(strings.TrimPrefix(p, "/"), "/resolve/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	repo := h.authorize(w, r, id)
	if repo == nil {
		return
	}
	commit, file, _ := strings.Cut(rest, "/")
	b, found := repo.Files[file]
	if !found || (commit != repo.SHA && commit != "main") {
		w.Header().Set("X-Error-Code", "EntryNotFound")
		http.Error(w, "Entry not found", http.StatusNotFound)
		return
	}
	w.Header().Set("X-Repo-Commit", repo.SHA)
	if repo.LFS[file] {
		w.Header().Set("X-Linked-Etag", `"`+SHA256Hex(b)+`"`)
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(b)))
		http.Redirect(w, r, h.srv.URL+"/cdn/"+SHA256Hex(b), http.StatusFound)
		return
	}
	w.Header().Set("ETag", `"`+GitBlobSHA1(b)+`"`)
	h.body(w, r, file, b)
}

func (h *Server) authorize(w http.ResponseWriter, r *http.Request, id string) *Repo {
	repo := h.repos[id]
	switch {
	case repo == nil || repo.Token != "" && !repo.Gated && r.Header.Get("Authorization") != "Bearer "+repo.Token:
		w.Header().Set("X-Error-Code", "RepositoryNotFound")
		http.Error(w, "Repository not found", http.StatusUnauthorized)
		return nil
	case repo.Gated && r.Header.Get("Authorization") != "Bearer "+repo.Token:
		w.Header().Set("X-Error-Code", "GatedRepo")
		http.Error(w, "Access to model "+id+" is restricted", http.StatusUnauthorized)
		return nil
	}
	return repo
}

// body serves b with Range support, breaking the transfer off when asked to.
func (h *Server) body(w http.ResponseWriter, r *http.Request, name string, b []byte) {
	if h.corrupt && len(b) > 0 {
		b = append([]byte{b[0] ^ 0xff}, b[1:]...)
	}
	start := 0
	if rg := r.Header.Get("Range"); rg != "" {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(rg, "bytes="), "-"))
		if err != nil || n > len(b) {
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		start = n
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(b)-start))
	if r.Method == http.MethodHead {
		return
	}
	h.gets = append(h.gets, name)
	h.ranges = append(h.ranges, r.Header.Get("Range"))
	if start > 0 {
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(b)-1, len(b)))
		w.WriteHeader(http.StatusPartialContent)
	}
	if h.breaks > 0 && h.breakAfter > 0 && len(b)-start > h.breakAfter {
		h.breaks--
		w.Write(b[start : start+h.breakAfter])
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	w.Write(b[start:])
}

// WriteCache lays repoID at commit out in cache as huggingface_hub's hf_hub_download writes it
// (file_download.py): blobs/<etag> with the git blob SHA-1 of small files and the SHA-256 of LFS ones,
// snapshots/<commit>/<path> as a relative link to ../../blobs/<etag> (one more ../ per folder level),
// refs/<ref> holding the bare commit for each ref, and .locks/<repo folder>/. It returns the snapshot
// directory.
func WriteCache(t testing.TB, cache, repoID, commit string, refs []string, files map[string][]byte, lfs map[string]bool) string {
	t.Helper()
	repo := filepath.Join(cache, "models--"+strings.ReplaceAll(repoID, "/", "--"))
	snap := filepath.Join(repo, "snapshots", commit)
	must := func(err error) {
		if err != nil {
			t.Helper()
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(repo, "blobs"), 0o755))
	must(os.MkdirAll(filepath.Join(cache, ".locks", filepath.Base(repo)), 0o755))
	for name, body := range files {
		etag := GitBlobSHA1(body)
		if lfs[name] {
			etag = SHA256Hex(body)
		}
		must(os.WriteFile(filepath.Join(repo, "blobs", etag), body, 0o644))
		link := filepath.Join(snap, filepath.FromSlash(name))
		must(os.MkdirAll(filepath.Dir(link), 0o755))
		up := strings.Repeat("../", strings.Count(name, "/")+2)
		must(os.Symlink(up+"blobs/"+etag, link))
	}
	for _, ref := range refs {
		p := filepath.Join(repo, "refs", filepath.FromSlash(ref))
		must(os.MkdirAll(filepath.Dir(p), 0o755))
		must(os.WriteFile(p, []byte(commit), 0o644))
	}
	return snap
}

// ReadDir returns the regular files of dir (a model directory) by their slash path inside it, following
// links, for WriteCache or Repo.Files.
func ReadDir(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
