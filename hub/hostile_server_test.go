package hub

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hostileHub answers the API for any repository with one file, config.json, whose HEAD and GET behave as
// mode says: "slowapi" never answers the file list, "slowhead" the HEAD, "slowbody" sends 10 bytes of the
// body and then nothing, "endless" announces 100 bytes and streams 300 MB, "badsize" announces a size that is
// not a number; "empty" and "dot" list a file named "" or ".".
func hostileHub(t *testing.T, mode string) *httptest.Server {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wait := func() {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		if strings.HasPrefix(r.URL.Path, "/api/") {
			if mode == "slowapi" {
				wait()
				return
			}
			name := "config.json"
			switch mode {
			case "empty":
				name = ""
			case "dot":
				name = "."
			}
			json.NewEncoder(w).Encode(map[string]any{"sha": testSHA, "siblings": []map[string]string{{"rfilename": name}}})
			return
		}
		w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef01234567"`)
		switch mode {
		case "badsize":
			w.Header().Set("X-Linked-Size", "abc")
		case "endless":
			w.Header().Set("X-Linked-Size", "100")
		default:
			w.Header().Set("Content-Length", "100")
		}
		if r.Method == http.MethodHead {
			if mode == "slowhead" {
				wait()
			}
			return
		}
		switch mode {
		case "slowbody":
			w.Write(make([]byte, 10))
			w.(http.Flusher).Flush()
			wait()
		case "endless":
			chunk := make([]byte, 1<<20)
			for i := 0; i < 300 && r.Context().Err() == nil; i++ {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv
}

// TestDownloadFromAHostileHub: a Hub or mirror that never answers made tune download wait forever (no
// timeout at all), one that sends more than it announced filled the disk, and listed names "" or "."
// replaced the snapshot directory by a link (findings5 #10, #11, #12). Each is an error naming the problem
// within the timeouts, and nothing larger than the announced size is kept.
func TestDownloadFromAHostileHub(t *testing.T) {
	for _, c := range []struct{ mode, want string }{
		{"slowapi", "did not answer within 200ms; try again later, or set HF_HUB_ETAG_TIMEOUT"},
		{"slowhead", "did not answer within 200ms; try again later, or set HF_HUB_ETAG_TIMEOUT"},
		{"slowbody", "sent nothing for 200ms (after 10 bytes); try again later, or set HF_HUB_DOWNLOAD_TIMEOUT"},
		{"endless", "the server sent more than the 100 bytes it announced"},
		{"badsize", `the size X-Linked-Size "abc", not a number of bytes`},
		{"empty", `lists a file named "", which is not a plain path`},
		{"dot", `lists a file named ".", which is not a plain path`},
	} {
		t.Run(c.mode, func(t *testing.T) {
			srv := hostileHub(t, c.mode)
			cache := t.TempDir()
			cl := &Client{Endpoint: srv.URL, Cache: cache, HTTP: srv.Client(), Retries: 1,
				ETagTimeout: 200 * time.Millisecond, DownloadTimeout: 200 * time.Millisecond}
			start := time.Now()
			_, err := cl.Download(context.Background(), "t/"+c.mode, Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %v", d)
			}
			filepath.Walk(cache, func(p string, fi os.FileInfo, err error) error {
				if err == nil && !fi.IsDir() && fi.Size() > 100 {
					t.Errorf("%s kept %d bytes", p, fi.Size())
				}
				return nil
			})
			if st, err := os.Lstat(filepath.Join(cache, "models--t--"+c.mode, "snapshots", testSHA)); err == nil && !st.IsDir() {
				t.Errorf("the snapshot directory is a %v", st.Mode())
			}
		})
	}
}

// TestTimeoutsFollowTheEnvironment: HF_HUB_ETAG_TIMEOUT and HF_HUB_DOWNLOAD_TIMEOUT set the timeouts, in
// seconds, as in huggingface_hub; unset or unusable, they are 10 s.
func TestTimeoutsFollowTheEnvironment(t *testing.T) {
	t.Setenv("HF_HUB_ETAG_TIMEOUT", "2.5")
	t.Setenv("HF_HUB_DOWNLOAD_TIMEOUT", "abc")
	c := NewClient()
	if c.ETagTimeout != 2500*time.Millisecond || c.DownloadTimeout != DefaultTimeout {
		t.Errorf("ETagTimeout %v, DownloadTimeout %v", c.ETagTimeout, c.DownloadTimeout)
	}
}
