package hub

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// DefaultRevision is the revision used when none is given, as in huggingface_hub.
const DefaultRevision = "main"

// CacheDir returns the Hugging Face hub cache directory huggingface_hub uses (its constants.py): $HF_HUB_CACHE,
// else the legacy $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub. A leading ~ is expanded, as Python's os.path.expanduser does.
func CacheDir() string {
	for _, v := range []string{"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"} {
		if d := os.Getenv(v); d != "" {
			return expandHome(d)
		}
	}
	return filepath.Join(Home(), "hub")
}

// Home returns huggingface_hub's HF_HOME: $HF_HOME, else $XDG_CACHE_HOME/huggingface, else
// ~/.cache/huggingface. The token `huggingface-cli login` saves is its file "token".
func Home() string {
	if h := os.Getenv("HF_HOME"); h != "" {
		return expandHome(h)
	}
	if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
		return filepath.Join(expandHome(x), "huggingface")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = "."
	}
	return filepath.Join(home, ".cache", "huggingface")
}

func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[1:])
		}
	}
	return p
}

// repoIDPattern is huggingface_hub's REPO_ID_REGEX (utils/_validators.py): an optional namespace and a name of
// word characters, '-' and '.', at most 96 characters each.
var repoIDPattern = regexp.MustCompile(`^(\b[\w\-.]+\b/)?\b[\w\-.]{1,96}\b$`)

// commitPattern is a full git commit hash, as huggingface_hub's REGEX_COMMIT_HASH.
var commitPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// ValidRepoID reports whether id is a Hub repository id ("name" or "namespace/name") by huggingface_hub's rules:
// the pattern above, no "--" or "..", and no ".git" suffix.
func ValidRepoID(id string) bool {
	return repoIDPattern.MatchString(id) && !strings.Contains(id, "--") && !strings.Contains(id, "..") &&
		!strings.HasSuffix(id, ".git")
}

// RepoFolderName returns the cache folder of a model repository: "models--" and the id with "/" replaced by
// "--" (huggingface_hub's repo_folder_name).
func RepoFolderName(repoID string) string {
	return "models--" + strings.ReplaceAll(repoID, "/", "--")
}

// NotCachedError says that a repository, revision or file is not in the cache, and what fills it.
type NotCachedError struct {
	// RepoID and Revision are what was looked up.
	RepoID, Revision string
	// Cache is the cache directory searched.
	Cache string
	// Missing is the cache path that does not exist (the repository folder, a ref, a snapshot or a file).
	Missing string
	// Reason, when set, says why the cache was the only place looked in (offline, the Hub unreachable).
	Reason string
	// Local, when set, says that the id's namespace is a local folder (runs/ of runs/nope), so the value was
	// perhaps meant as a path into it, and what that folder holds.
	Local string
	// Links, when set, are the snapshot's files (paths relative to the snapshot) whose links point at blobs
	// that are not there (Missing is the first such blob): the snapshot exists but the cache is incomplete.
	Links []string
}

// Error says what is missing from which cache and how to fetch it.
func (e *NotCachedError) Error() string {
	rev := ""
	if e.Revision != "" && e.Revision != DefaultRevision {
		rev = " --revision " + e.Revision
	}
	if len(e.Links) > 0 {
		what := fmt.Sprintf("%s links to %s, which is missing", e.Links[0], e.Missing)
		if len(e.Links) > 1 {
			what = fmt.Sprintf("%s (and %s) link to blobs that are missing, such as %s", e.Links[0], strings.Join(e.Links[1:], ", "), e.Missing)
		}
		where := ""
		if e.Reason != "" {
			where = fmt.Sprintf(" where the Hub can be reached (here %s)", e.Reason)
		}
		return fmt.Sprintf("the Hugging Face cache %s holds %s at revision %s incomplete: in its snapshot, %s (a download "+
			"that was cut short, or a blob deleted by hand); run `tune download %s%s` again%s to fetch it, or set HF_HUB_CACHE "+
			"or HF_HOME to a complete cache", e.Cache, e.RepoID, revOrMain(e.Revision), what, e.RepoID, rev, where)
	}
	if e.Reason != "" { // Download could not fetch it: saying "run tune download" would send the user round
		return fmt.Sprintf("%s at revision %s is not in the Hugging Face cache %s, and %s: %s does not exist; run "+
			"`tune download %s%s` again where the Hub can be reached (HF_HUB_OFFLINE unset, HF_ENDPOINT for a mirror), "+
			"or set HF_HUB_CACHE or HF_HOME to a cache that holds it", e.RepoID, revOrMain(e.Revision), e.Cache,
			e.Reason, e.Missing, e.RepoID, rev)
	}
	local := ""
	if e.Local != "" {
		local = "; " + e.Local
	}
	return fmt.Sprintf("%s at revision %s is not in the Hugging Face cache %s: %s does not exist; fetch it with "+
		"`tune download %s%s` (or any Hugging Face tool), or set HF_HUB_CACHE or HF_HOME to the cache that holds it%s",
		e.RepoID, revOrMain(e.Revision), e.Cache, e.Missing, e.RepoID, rev, local)
}

func revOrMain(rev string) string {
	if rev == "" {
		return DefaultRevision
	}
	return rev
}

// Snapshot returns the snapshot directory of repoID at revision (a branch, a tag or a commit hash; "" is
// "main") in cache: snapshots/<commit>, the commit read from refs/<revision> unless revision is a commit
// hash. A repository, ref or snapshot that is not there is a *NotCachedError.
func Snapshot(cache, repoID, revision string) (string, error) {
	revision = revOrMain(revision)
	repo := filepath.Join(cache, RepoFolderName(repoID))
	missing := func(p string) error {
		return &NotCachedError{RepoID: repoID, Revision: revision, Cache: cache, Missing: p}
	}
	if st, err := os.Stat(repo); err != nil || !st.IsDir() {
		return "", missing(repo)
	}
	if !ValidRevision(revision) {
		return "", fmt.Errorf("hub: revision %q is not a branch, tag or commit name: it must not be absolute or contain \"..\" or a backslash", revision)
	}
	commit := revision
	if !commitPattern.MatchString(revision) {
		ref := filepath.Join(repo, "refs", filepath.FromSlash(revision))
		b, err := readRef(ref)
		if err != nil {
			return "", missing(ref)
		}
		commit = strings.TrimSpace(string(b))
		if !commitPattern.MatchString(commit) {
			return "", fmt.Errorf("hub: %s holds %s, not a commit hash: the cache is damaged; delete the file and fetch %s again", ref, quoteRef(b), repoID)
		}
	}
	snap := filepath.Join(repo, "snapshots", commit)
	if st, err := os.Stat(snap); err != nil || !st.IsDir() {
		return "", missing(snap)
	}
	if links, blob := brokenLinks(snap); len(links) > 0 {
		return "", &NotCachedError{RepoID: repoID, Revision: revision, Cache: cache, Missing: blob, Links: links}
	}
	return snap, nil
}

// maxRefBytes is the most bytes of a refs/ file Snapshot reads: a ref holds a 40-character commit hash
// (huggingface_hub writes it bare, with no newline), so more is a damaged file, whatever its size.
const maxRefBytes = 256

// maxRefQuote is the most bytes of a damaged ref an error quotes.
const maxRefQuote = 64

// readRef reads at most maxRefBytes+1 bytes of the ref file p: enough to tell a commit hash from anything else,
// with memory independent of the file.
func readRef(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxRefBytes+1))
}

// quoteRef quotes the start of a damaged ref's content b for an error: at most maxRefQuote bytes, escaped as Go
// quotes strings, then how long the file is when it is longer.
func quoteRef(b []byte) string {
	if len(b) <= maxRefQuote {
		return strconv.Quote(string(b))
	}
	more := fmt.Sprintf("%d bytes", len(b))
	if len(b) > maxRefBytes {
		more = fmt.Sprintf("more than %d bytes", maxRefBytes)
	}
	return strconv.Quote(string(b[:maxRefQuote])) + "… (" + more + ")"
}

// brokenLinks returns the files of the snapshot snap (relative paths, sorted) that are links to blobs that do
// not exist, and the first such blob's path: reading one would fail with a bare "no such file or directory"
// that names neither the repository nor the fix.
func brokenLinks(snap string) (links []string, blob string) {
	filepath.WalkDir(snap, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			rel, _ := filepath.Rel(snap, p)
			links = append(links, filepath.ToSlash(rel))
			if blob == "" {
				target, _ := os.Readlink(p)
				blob = filepath.Clean(filepath.Join(filepath.Dir(p), target))
			}
		}
		return nil
	})
	return links, blob
}

// Resolve returns the directory or file that value names: value itself when it exists on disk or cannot be a
// repository id (an absolute path, one starting with . or ~, or with more than one /); otherwise the snapshot
// of the repository value in CacheDir at revision (see Snapshot). A value that is neither is reported as a
// missing local path (an *fs.PathError) when it looks like a path, else as a *NotCachedError.
func Resolve(value, revision string) (string, error) {
	st, err := os.Stat(value)
	if err == nil && st.IsDir() {
		return value, snapshotDirProblem(value)
	}
	// Only a path that does not exist can be a Hub id: one that is there but cannot be read (a symbolic-link
	// loop, a permission problem) is reported as itself, never looked up in the cache.
	if err == nil || !LooksLikeRepoID(value) || !errors.Is(err, fs.ErrNotExist) {
		return value, err
	}
	snap, err := Snapshot(CacheDir(), value, revision)
	var nc *NotCachedError
	if errors.As(err, &nc) && len(nc.Links) == 0 {
		nc.Local = localNote(value)
	}
	return snap, err
}

// snapshotDirProblem reports a directory given as a path that is a snapshot of a Hugging Face cache
// (CACHE/models--org--name/snapshots/COMMIT) and holds links to blobs that are gone, as Snapshot does for an id;
// nil for any other directory.
func snapshotDirProblem(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	snaps, commit := filepath.Split(abs)
	repoDir := filepath.Dir(filepath.Clean(snaps))
	folder := filepath.Base(repoDir)
	if filepath.Base(filepath.Clean(snaps)) != "snapshots" || !strings.HasPrefix(folder, "models--") {
		return nil
	}
	links, blob := brokenLinks(abs)
	if len(links) == 0 {
		return nil
	}
	id := strings.ReplaceAll(strings.TrimPrefix(folder, "models--"), "--", "/")
	return &NotCachedError{RepoID: id, Revision: commit, Cache: filepath.Dir(repoDir), Missing: blob, Links: links}
}

// localNote says, for an id "ns/name" whose namespace ns is a local folder (a run's output folder, such as
// runs/ of runs/tiny), that the value may be a path into it and what the folder holds; "" otherwise.
func localNote(value string) string {
	ns, name, ok := strings.Cut(value, "/")
	if !ok {
		return ""
	}
	ents, err := os.ReadDir(ns)
	if err != nil {
		return ""
	}
	var dirs []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			dirs = append(dirs, e.Name())
		}
	}
	holds := "no folders"
	if len(dirs) > 0 {
		if len(dirs) > 8 {
			dirs = append(dirs[:8], "...")
		}
		holds = "the folders " + strings.Join(dirs, ", ")
	}
	return fmt.Sprintf("if %s is meant as a local path: the folder %s has no %s (it holds %s)", value, ns, name, holds)
}

// ValidRevision reports whether revision can name a branch, tag or commit: git refuses ref names with "..",
// a leading "/" or a backslash (git-check-ref-format), and such a revision would lead the cache lookup out of
// the repository's refs/ folder.
func ValidRevision(revision string) bool {
	return revision != "" && !strings.Contains(revision, "..") && !strings.HasPrefix(revision, "/") &&
		!strings.Contains(revision, "\\") && !filepath.IsAbs(revision)
}

// LooksLikeRepoID reports whether value, which does not exist on disk, is to be read as a Hub repository id
// rather than a local path: a valid id that does not start with "." or "~" (transformers reads "./bert" as a
// directory).
func LooksLikeRepoID(value string) bool {
	return ValidRepoID(value) && !strings.HasPrefix(value, ".") && !strings.HasPrefix(value, "~")
}

// IsNotCached reports whether err says something is missing from the cache.
func IsNotCached(err error) bool {
	var nc *NotCachedError
	return errors.As(err, &nc)
}
