package hub

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sizelessHub answers for one file, config.json, with a HEAD that announces no size (an ETag, no
// Content-Length or X-Linked-Size) and a GET that streams body bytes without a Content-Length; listed, when
// >= 0, is the size the file list gives.
func sizelessHub(t *testing.T, body []byte, listed int64) *httptest.Server {
	sum := sha1.Sum(append(fmt.Appendf(nil, "blob %d\x00", len(body)), body...))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			sib := map[string]any{"rfilename": "config.json"}
			if listed >= 0 {
				sib["size"] = listed
			}
			json.NewEncoder(w).Encode(map[string]any{"sha": testSHA, "siblings": []any{sib}})
			return
		}
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
		if r.Method == http.MethodHead {
			return
		}
		for off := 0; off < len(body) && r.Context().Err() == nil; off += 1000 {
			if _, err := w.Write(body[off:min(off+1000, len(body))]); err != nil {
				return
			}
			w.(http.Flusher).Flush() // chunked: no Content-Length
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestDownloadOfAFileWithNoSize: a server that announced no size for a file got it downloaded without bound
// (8.8 GB in 40 s, tester10 T10-16). Without a size, MaxFileSize bounds it and nothing partial is kept; a size
// in the file list bounds it as an announced one does; a file announced larger than MaxFileSize is refused
// before its transfer; a file with no size under the limit downloads.
func TestDownloadOfAFileWithNoSize(t *testing.T) {
	big := make([]byte, 50_000)
	for _, c := range []struct {
		name   string
		body   []byte
		listed int64
		want   string
	}{
		{"no size, over the limit", big, -1, "announced no size (no X-Linked-Size or Content-Length) and sent more than 10000 bytes, the most a file may have; the partial file was removed"},
		{"a listed size", big, 100, "the server sent more than the 100 bytes it announced"},
		{"a listed size over the limit", big, 20_000, "is announced as 20000 bytes, more than the 10000 a file may have"},
		{"no size, under the limit", big[:5000], -1, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := sizelessHub(t, c.body, c.listed)
			cache := t.TempDir()
			cl := &Client{Endpoint: srv.URL, Cache: cache, HTTP: srv.Client(), Retries: 1, MaxFileSize: 10_000}
			res, err := cl.Download(context.Background(), "t/m", Options{})
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if b, err := os.ReadFile(filepath.Join(res.Dir, "config.json")); err != nil || len(b) != len(c.body) {
					t.Fatalf("config.json: %d bytes, %v", len(b), err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			filepath.Walk(cache, func(p string, fi os.FileInfo, err error) error {
				if err == nil && !fi.IsDir() && strings.Contains(p, "/blobs/") {
					t.Errorf("%s kept %d bytes", p, fi.Size())
				}
				return nil
			})
		})
	}
	if NewClient().MaxFileSize != DefaultMaxFileSize {
		t.Errorf("NewClient's MaxFileSize is not DefaultMaxFileSize")
	}
}
