package hub

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSnapshotDamagedRef checks that a refs/ file that holds no commit hash is reported with at most a short,
// escaped prefix of its content and its size, and that only a bounded start of it is read: a 300 MB file was read
// whole and quoted whole in the error. A ref of a hash with a trailing newline (written by hand) still works.
func TestSnapshotDamagedRef(t *testing.T) {
	cache := t.TempDir()
	mainDir, _ := writeHFCache(t, cache)
	const id = "google-bert/bert-base-uncased"
	ref := filepath.Join(cache, "models--google-bert--bert-base-uncased", "refs", "main")
	for _, tc := range []struct {
		content, want string
	}{
		{"abc123", `holds "abc123", not a commit hash`},
		{strings.Repeat("a", 100), `holds "` + strings.Repeat("a", 64) + `"… (100 bytes), not a commit hash`},
		{"\x00\x01" + strings.Repeat("z", 1000), `holds "\x00\x01` + strings.Repeat("z", 62) + `"… (more than 256 bytes), not a commit hash`},
	} {
		if err := os.WriteFile(ref, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Snapshot(cache, id, "")
		if err == nil || !strings.Contains(err.Error(), ref+" "+tc.want+": the cache is damaged") || len(err.Error()) > 400 {
			t.Errorf("%.20q: %v; want %q", tc.content, err, tc.want)
		}
	}
	// A huge ref (sparse, no disk used) is refused from its first bytes: the message stays short.
	if err := os.Truncate(ref, 1<<30); err != nil {
		t.Fatal(err)
	}
	if _, err := Snapshot(cache, id, ""); err == nil || !strings.Contains(err.Error(), `(more than 256 bytes), not a commit hash`) || len(err.Error()) > 400 {
		t.Errorf("a 1 GiB ref: %.500v", err)
	}
	if err := os.WriteFile(ref, []byte("86b5e0934494bd15c9632b12f734a8a67f723594\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := Snapshot(cache, id, ""); err != nil || got != mainDir {
		t.Errorf("a hash and a newline: %q, %v; want %q", got, err, mainDir)
	}
}
