package hub

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeHub is a Hub on loopback that speaks the parts of the API Download uses: /api/models/{id}/revision/{rev},
// HEAD and GET /{id}/resolve/{commit}/{file} (LFS files redirected to /cdn/ with X-Linked-Etag and
// X-Linked-Size, as the Hub does), Range requests, tokens, and the Hub's X-Error-Code headers.
type fakeHub struct {
	srv   *httptest.Server
	mu    sync.Mutex
	repos map[string]*fakeRepo
	// breakAfter, when > 0, makes the next GETs of a file body stop after that many bytes and drop the
	// connection (one drop per count in breaks).
	breakAfter int
	breaks     int
	corrupt    bool // serve LFS content with one byte flipped
	// gets and ranges record each body GET: the file and its Range header.
	gets   []string
	ranges []string
}

type fakeRepo struct {
	sha   string
	token string // required when set; a missing or wrong one gets 401 RepositoryNotFound
	gated bool
	files map[string][]byte
	lfs   map[string]bool
	order []string
}

func newFakeHub(t *testing.T) *fakeHub {
	h := &fakeHub{repos: map[string]*fakeRepo{}}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *fakeHub) add(id string, r *fakeRepo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name := range r.files {
		if !contains(r.order, name) {
			r.order = append(r.order, name)
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

func gitBlobSHA1(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (h *fakeHub) serve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := r.URL.EscapedPath()
	if rest, ok := strings.CutPrefix(p, "/cdn/"); ok {
		for _, repo := range h.repos {
			for name, b := range repo.files {
				if sha256Hex(b) == rest {
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
		if rev != "main" && rev != repo.sha {
			w.Header().Set("X-Error-Code", "RevisionNotFound")
			http.Error(w, "Invalid rev id: "+rev, http.StatusNotFound)
			return
		}
		var sib []map[string]string
		for _, f := range repo.order {
			sib = append(sib, map[string]string{"rfilename": f})
		}
		json.NewEncoder(w).Encode(map[string]any{"id": id, "sha": repo.sha, "siblings": sib})
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
	b, found := repo.files[file]
	if !found || (commit != repo.sha && commit != "main") {
		w.Header().Set("X-Error-Code", "EntryNotFound")
		http.Error(w, "Entry not found", http.StatusNotFound)
		return
	}
	w.Header().Set("X-Repo-Commit", repo.sha)
	if repo.lfs[file] {
		w.Header().Set("X-Linked-Etag", `"`+sha256Hex(b)+`"`)
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(b)))
		http.Redirect(w, r, h.srv.URL+"/cdn/"+sha256Hex(b), http.StatusFound)
		return
	}
	w.Header().Set("ETag", `"`+gitBlobSHA1(b)+`"`)
	h.body(w, r, file, b)
}

func (h *fakeHub) authorize(w http.ResponseWriter, r *http.Request, id string) *fakeRepo {
	repo := h.repos[id]
	switch {
	case repo == nil || repo.token != "" && !repo.gated && r.Header.Get("Authorization") != "Bearer "+repo.token:
		w.Header().Set("X-Error-Code", "RepositoryNotFound")
		http.Error(w, "Repository not found", http.StatusUnauthorized)
		return nil
	case repo.gated && r.Header.Get("Authorization") != "Bearer "+repo.token:
		w.Header().Set("X-Error-Code", "GatedRepo")
		http.Error(w, "Access to model "+id+" is restricted", http.StatusUnauthorized)
		return nil
	}
	return repo
}

// body serves b with Range support, breaking the transfer off when asked to.
func (h *fakeHub) body(w http.ResponseWriter, r *http.Request, name string, b []byte) {
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
