package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
)

// DefaultEndpoint is the Hub's address when HF_ENDPOINT is not set.
const DefaultEndpoint = "https://huggingface.co"

// Client fetches repositories from a Hub into a cache. The zero value is not usable; NewClient fills it from
// the environment.
type Client struct {
	// Endpoint is the Hub's base URL (HF_ENDPOINT, else DefaultEndpoint), without a trailing slash.
	Endpoint string
	// Token is sent as "Authorization: Bearer TOKEN" to Endpoint when set (HF_TOKEN).
	Token string
	// Cache is the cache directory (CacheDir).
	Cache string
	// Offline makes Download answer from the cache only (HF_HUB_OFFLINE=1).
	Offline bool
	// HTTP is the client requests go through.
	HTTP *http.Client
	// Progress, when set, receives a progress bar per file fetched.
	Progress io.Writer
	// Retries is how many times a file whose transfer broke off is resumed within one Download (3 by
	// NewClient, 0 for none).
	Retries int
	// ETagTimeout bounds the metadata requests (the repository's file list, each file's HEAD), and
	// DownloadTimeout the wait for a download's answer and for each of its reads, as huggingface_hub's
	// HF_HUB_ETAG_TIMEOUT and HF_HUB_DOWNLOAD_TIMEOUT do (10 s each by NewClient; 0: no limit). A server
	// that accepts the connection and never answers is then an error naming the address, not a hang.
	ETagTimeout, DownloadTimeout time.Duration
	// MaxFileSize bounds a file whose size the Hub does not announce (no X-Linked-Size or Content-Length
	// in its HEAD, no size in the file list): its transfer fails past this many bytes, and the partial
	// file is removed. A file announced larger than this is refused before its transfer. 0: no limit.
	// DefaultMaxFileSize by NewClient.
	MaxFileSize int64
}

// DefaultMaxFileSize is the Hub's limit on the size of one file, 50 GB ("Per file: 50GB max, 20GB
// recommended", https://huggingface.co/docs/hub/storage-limits; larger weights are uploaded as shards).
const DefaultMaxFileSize int64 = 50_000_000_000

// DefaultTimeout is huggingface_hub's default HF_HUB_ETAG_TIMEOUT and HF_HUB_DOWNLOAD_TIMEOUT.
const DefaultTimeout = 10 * time.Second

// timeoutEnv reads a timeout in seconds from the environment variable name (a number > 0), else def.
func timeoutEnv(name string, def time.Duration) time.Duration {
	if s, err := strconv.ParseFloat(strings.TrimSpace(os.Getenv(name)), 64); err == nil && s > 0 && s < 1e6 {
		return time.Duration(s * float64(time.Second))
	}
	return def
}

// NewClient returns a Client configured as huggingface_hub is by the environment: HF_ENDPOINT, HF_TOKEN (else
// the legacy HUGGING_FACE_HUB_TOKEN, else the token file Home()/token that `huggingface-cli login` writes),
// HF_HUB_OFFLINE, and CacheDir.
func NewClient() *Client {
	c := &Client{
		Endpoint: strings.TrimRight(os.Getenv("HF_ENDPOINT"), "/"),
		Token:    os.Getenv("HF_TOKEN"),
		Cache:    CacheDir(),
		Offline:  truthy(os.Getenv("HF_HUB_OFFLINE")),
		HTTP:     &http.Client{Timeout: 0, Transport: http.DefaultTransport},
		Retries:  3,
		// HF_HUB_ETAG_TIMEOUT / HF_HUB_DOWNLOAD_TIMEOUT, in seconds (huggingface_hub/constants.py).
		ETagTimeout:     timeoutEnv("HF_HUB_ETAG_TIMEOUT", DefaultTimeout),
		DownloadTimeout: timeoutEnv("HF_HUB_DOWNLOAD_TIMEOUT", DefaultTimeout),
		MaxFileSize:     DefaultMaxFileSize,
	}
	if c.Endpoint == "" {
		c.Endpoint = DefaultEndpoint
	}
	if c.Token == "" {
		c.Token = os.Getenv("HUGGING_FACE_HUB_TOKEN")
	}
	if c.Token == "" {
		if b, err := os.ReadFile(filepath.Join(Home(), "token")); err == nil {
			c.Token = strings.TrimSpace(string(b))
		}
	}
	return c
}

// truthy reads a boolean environment variable as huggingface_hub's _is_true does.
func truthy(v string) bool {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "1", "ON", "YES", "TRUE":
		return true
	}
	return false
}

// Options selects what Download fetches.
type Options struct {
	// Revision is a branch, tag or commit hash; "" is "main".
	Revision string
	// Include, when set, keeps only the files matching one of these globs (fnmatch rules: '*' crosses '/').
	Include []string
	// AllowPickle lets pickle files (.bin, .pt, .pth, .ckpt, .pkl) be fetched.
	AllowPickle bool
}

// Result is what Download did.
type Result struct {
	// Dir is the snapshot directory: pass it where a model directory goes.
	Dir string
	// Commit is the commit the revision resolved to.
	Commit string
	// Fetched and Cached are the files transferred and the files already in the cache.
	Fetched, Cached []string
	// Bytes is the number of bytes transferred.
	Bytes int64
	// Skipped lists the files left out and why.
	Skipped []Skipped
	// FromCache is set, with the reason, when the Hub was not asked (offline) or not reachable.
	FromCache string
}

// HTTPError is a refusal from the Hub, with what it means for the user.
type HTTPError struct {
	// Status is the HTTP status code; Code is the Hub's X-Error-Code header (RepositoryNotFound,
	// RevisionNotFound, EntryNotFound, GatedRepo), when sent.
	Status int
	Code   string
	// URL is the request's address.
	URL string
	// Msg says what happened and what to do.
	Msg string
}

// Error returns Msg.
func (e *HTTPError) Error() string { return e.Msg }

// repoInfo is the part of /api/models/{id}/revision/{rev} that Download reads.
type repoInfo struct {
	SHA      string `json:"sha"`
	Siblings []struct {
		RFilename string `json:"rfilename"`
		// Size is the file's size in bytes, in the listing of /api/models/REPO?blobs=true (and of mirrors that
		// always send it); nil when absent.
		Size *int64 `json:"size"`
	} `json:"siblings"`
}

// Download fetches repoID at o.Revision into the cache and returns the snapshot directory. Files already in
// the cache (the blob of the same etag) are not transferred again. See the package comment for the protocol,
// the file selection, resuming and verification.
func (c *Client) Download(ctx context.Context, repoID string, o Options) (*Result, error) {
	if !ValidRepoID(repoID) {
		return nil, fmt.Errorf("hub: %q is not a Hub repository id (NAME or ORG/NAME: letters, digits, '-', '_', '.')", repoID)
	}
	rev := revOrMain(o.Revision)
	if !ValidRevision(rev) {
		// refs/<rev> is written below: a revision with ".." would write outside the cache.
		return nil, fmt.Errorf("hub: revision %q is not a branch, tag or commit name: it must not be absolute or contain \"..\" or a backslash", rev)
	}
	if c.Offline {
		return c.fromCache(repoID, rev, "HF_HUB_OFFLINE is set, so the Hub was not asked", o.Include)
	}
	info, err := c.repoInfo(ctx, repoID, rev)
	if err != nil {
		if unreachable(err) {
			return c.fromCache(repoID, rev, fmt.Sprintf("the Hub at %s cannot be reached (%s)", c.Endpoint, netProblem(err)), o.Include)
		}
		return nil, err
	}
	if !commitPattern.MatchString(info.SHA) {
		return nil, fmt.Errorf("hub: %s answered for %s at %s without a commit hash (sha %q)", c.Endpoint, repoID, rev, info.SHA)
	}
	names := make([]string, 0, len(info.Siblings))
	listed := map[string]int64{}
	for _, s := range info.Siblings {
		names = append(names, s.RFilename)
		if s.Size != nil && *s.Size >= 0 {
			listed[s.RFilename] = *s.Size
		}
	}
	fetch, skipped := selectFiles(names, o)
	if len(fetch) == 0 {
		return nil, fmt.Errorf("hub: nothing to fetch from %s at %s: %s", repoID, rev, describeSkipped(names, skipped))
	}
	repo := filepath.Join(c.Cache, RepoFolderName(repoID))
	res := &Result{Dir: filepath.Join(repo, "snapshots", info.SHA), Commit: info.SHA, Skipped: skipped}
	for _, f := range fetch {
		size, ok := listed[f]
		if !ok {
			size = -1
		}
		n, cached, err := c.file(ctx, repoID, info.SHA, f, repo, size)
		if err != nil {
			return res, err
		}
		res.Bytes += n
		if cached {
			res.Cached = append(res.Cached, f)
		} else {
			res.Fetched = append(res.Fetched, f)
		}
	}
	if rev != info.SHA {
		ref := filepath.Join(repo, "refs", filepath.FromSlash(rev))
		if err := os.MkdirAll(filepath.Dir(ref), 0o755); err != nil {
			return res, fmt.Errorf("hub: %w", err)
		}
		// huggingface_hub writes the bare commit hash, no newline.
		if err := writeFileAtomic(ref, []byte(info.SHA)); err != nil {
			return res, fmt.Errorf("hub: %w", err)
		}
	}
	return res, nil
}

// describeSkipped says why no file was selected.
func describeSkipped(names []string, skipped []Skipped) string {
	if len(names) == 0 {
		return "the repository has no files"
	}
	parts := make([]string, 0, len(skipped))
	for i, s := range skipped {
		if i == 8 {
			parts = append(parts, fmt.Sprintf("and %d more", len(skipped)-i))
			break
		}
		parts = append(parts, s.Name+" ("+s.Why+")")
	}
	return "every file was left out: " + strings.Join(parts, "; ")
}

// fromCache answers a Download that cannot ask the Hub: the snapshot the cache holds for rev, or an error
// naming what is missing.
func (c *Client) fromCache(repoID, rev, reason string, include []string) (*Result, error) {
	dir, err := Snapshot(c.Cache, repoID, rev)
	if err != nil {
		var nc *NotCachedError
		if errors.As(err, &nc) {
			nc.Reason = reason
		}
		return nil, err
	}
	res := &Result{Dir: dir, Commit: filepath.Base(dir), FromCache: reason}
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			res.Cached = append(res.Cached, filepath.ToSlash(rel))
		}
		return nil
	})
	patterns := globs(include)
	if len(include) > 0 && !slices.ContainsFunc(res.Cached, func(f string) bool { return matchAny(patterns, f) }) {
		// None of what was asked for is there: the snapshot alone is no answer (tester7 F5, --include "[[",
		// which matches itself as in fnmatch).
		quoted := make([]string, len(include))
		for i, p := range include {
			quoted[i] = strconv.Quote(p)
		}
		return nil, &NotCachedError{RepoID: repoID, Revision: rev, Cache: c.Cache, Reason: reason,
			Missing: fmt.Sprintf("a file matching --include %s in %s", strings.Join(quoted, ", "), dir)}
	}
	return res, nil
}

// netProblem says briefly why a connection failed: the DNS or dial error without the request around it.
func netProblem(err error) string {
	if te := (*timeoutError)(nil); errors.As(err, &te) {
		return strings.TrimPrefix(te.msg, "hub: ")
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		return "cannot resolve " + de.Name + ": " + de.Err
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Op + ": " + oe.Err.Error()
	}
	return err.Error()
}

// unreachable reports whether err means the Hub could not be reached at all (no network, refused, DNS).
func unreachable(err error) bool {
	var ne net.Error
	var oe *net.OpError
	var de *net.DNSError
	return errors.As(err, &oe) || errors.As(err, &de) || errors.As(err, &ne) && ne.Timeout()
}

// request sends an authenticated request to the Hub; redirects to another host lose the token (net/http drops
// Authorization when a redirect leaves the host).
func (c *Client) request(ctx context.Context, method, u string, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", "tune (huggingface_hub-compatible)")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("hub: %s %s: %w", method, u, err)
	}
	return resp, nil
}

func (c *Client) repoInfo(ctx context.Context, repoID, rev string) (*repoInfo, error) {
	u := fmt.Sprintf("%s/api/models/%s/revision/%s", c.Endpoint, repoID, url.PathEscape(rev))
	ctx, cancel := c.metadataContext(ctx)
	defer cancel()
	resp, err := c.request(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, c.timedOut(ctx, err, "HF_HUB_ETAG_TIMEOUT", c.ETagTimeout)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, c.refusal(resp, repoID, rev, "")
	}
	var info repoInfo
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&info); err != nil {
		return nil, c.timedOut(ctx, fmt.Errorf("hub: reading %s: %w", u, err), "HF_HUB_ETAG_TIMEOUT", c.ETagTimeout)
	}
	return &info, nil
}

// metadataContext is ctx bounded by ETagTimeout.
func (c *Client) metadataContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.ETagTimeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.ETagTimeout)
}

// timeoutError is a request the server did not answer in time; it unwraps to the request's error.
type timeoutError struct {
	msg string
	err error
}

func (e *timeoutError) Error() string   { return e.msg }
func (e *timeoutError) Unwrap() error   { return e.err }
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }

// timedOut returns err, or, when ctx ran out of time (and not because the caller's context ended), an error
// saying that the server did not answer within d and which variable gives it longer.
func (c *Client) timedOut(ctx context.Context, err error, env string, d time.Duration) error {
	if err == nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	return &timeoutError{fmt.Sprintf("hub: the Hub at %s did not answer within %v; try again later, or set %s "+
		"(seconds) to wait longer", c.Endpoint, d, env), err}
}

// refusal turns a Hub error response into an *HTTPError that says what to do, as huggingface_hub's
// hf_raise_for_status reads X-Error-Code.
func (c *Client) refusal(resp *http.Response, repoID, rev, file string) error {
	code := resp.Header.Get("X-Error-Code")
	e := &HTTPError{Status: resp.StatusCode, Code: code, URL: resp.Request.URL.String()}
	tokenHint := "set HF_TOKEN to a token that can read it (https://huggingface.co/settings/tokens)"
	if c.Token != "" {
		tokenHint = "the HF_TOKEN sent was not accepted for it; check the token's access"
	}
	what := repoID
	if file != "" {
		what = file + " in " + repoID
	}
	switch {
	case code == "GatedRepo":
		e.Msg = fmt.Sprintf("hub: %s is gated: accept its conditions at %s/%s, then %s", repoID, c.Endpoint, repoID, tokenHint)
	case code == "RepositoryNotFound" || resp.StatusCode == http.StatusUnauthorized && file == "":
		e.Msg = fmt.Sprintf("hub: repository %s not found at %s (HTTP %d): check the id; if it is private or gated, %s", repoID, c.Endpoint, resp.StatusCode, tokenHint)
	case code == "RevisionNotFound":
		e.Msg = fmt.Sprintf("hub: %s has no revision %s (HTTP %d): name a branch, tag or commit hash of the repository", repoID, rev, resp.StatusCode)
	case code == "EntryNotFound" || resp.StatusCode == http.StatusNotFound && file != "":
		e.Msg = fmt.Sprintf("hub: %s at %s not found (HTTP %d)", what, rev, resp.StatusCode)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		e.Msg = fmt.Sprintf("hub: %s refused (HTTP %d): %s", what, resp.StatusCode, tokenHint)
	case resp.StatusCode == http.StatusNotFound:
		e.Msg = fmt.Sprintf("hub: %s at revision %s not found at %s (HTTP 404): check the id and the revision", repoID, rev, c.Endpoint)
	default:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		e.Msg = fmt.Sprintf("hub: %s %s: HTTP %d %s", resp.Request.Method, e.URL, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return e
}

// fileMeta is what the HEAD of /resolve/ says about a file (huggingface_hub's get_hf_file_metadata).
type fileMeta struct {
	etag string
	size int64
}

func (c *Client) resolveURL(repoID, commit, file string) string {
	parts := strings.Split(file, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return fmt.Sprintf("%s/%s/resolve/%s/%s", c.Endpoint, repoID, commit, strings.Join(parts, "/"))
}

// head reads a file's etag and size without following a redirect: the Hub answers an LFS file with a 302 to
// its CDN that carries X-Linked-Etag and X-Linked-Size, the etag and size of the content.
func (c *Client) head(ctx context.Context, repoID, commit, file string) (fileMeta, error) {
	hc := *c.HTTP
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	ctx, cancel := c.metadataContext(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, c.resolveURL(repoID, commit, file), nil)
	if err != nil {
		return fileMeta{}, fmt.Errorf("hub: %w", err)
	}
	req.Header.Set("Accept-Encoding", "identity")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fileMeta{}, c.timedOut(ctx, fmt.Errorf("hub: HEAD %s: %w", req.URL, err), "HF_HUB_ETAG_TIMEOUT", c.ETagTimeout)
	}
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		return fileMeta{}, c.refusal(resp, repoID, commit, file)
	}
	etag := resp.Header.Get("X-Linked-Etag")
	if etag == "" {
		etag = resp.Header.Get("ETag")
	}
	etag = strings.Trim(strings.TrimPrefix(etag, "W/"), `"`)
	if etag == "" || strings.ContainsAny(etag, `/\`) || etag == "." || etag == ".." {
		return fileMeta{}, fmt.Errorf("hub: %s gave no usable etag for %s (%q): the cache names blobs by it", c.Endpoint, file, etag)
	}
	size := resp.ContentLength
	if s := resp.Header.Get("X-Linked-Size"); s != "" {
		if size, err = strconv.ParseInt(s, 10, 64); err != nil || size < 0 {
			return fileMeta{}, fmt.Errorf("hub: %s gave %s the size X-Linked-Size %q, not a number of bytes", c.Endpoint, file, s)
		}
	}
	return fileMeta{etag: etag, size: size}, nil
}

// file makes snapshots/<commit>/<file> point at its blob, fetching the blob unless the cache has it. listed is
// the file's size in the repository's file list (-1: not given), used when its HEAD announces none. It
// returns the bytes transferred and whether the blob was already there.
func (c *Client) file(ctx context.Context, repoID, commit, file, repo string, listed int64) (int64, bool, error) {
	if strings.HasPrefix(file, "/") || strings.Contains("/"+file+"/", "/../") {
		return 0, false, fmt.Errorf("hub: %s lists a file outside the repository (%q); refusing it", repoID, file)
	}
	if file == "" || file == "." || path.Clean(file) != file || strings.Contains(file, "\\") {
		// "", "." or "a/./b" would make the snapshot directory itself, or a folder in it, the file's link.
		return 0, false, fmt.Errorf("hub: %s lists a file named %q, which is not a plain path in the repository; refusing it", repoID, file)
	}
	meta, err := c.head(ctx, repoID, commit, file)
	if err != nil {
		return 0, false, err
	}
	if meta.size < 0 {
		meta.size = listed
	}
	if c.MaxFileSize > 0 && meta.size > c.MaxFileSize {
		return 0, false, fmt.Errorf("hub: %s from %s is announced as %d bytes, more than the %d a file may have (the "+
			"Hub's own limit by default): check HF_ENDPOINT (%s), or raise the limit (tune download --max-file-size)",
			file, repoID, meta.size, c.MaxFileSize, c.Endpoint)
	}
	blob := filepath.Join(repo, "blobs", meta.etag)
	link := filepath.Join(repo, "snapshots", commit, filepath.FromSlash(file))
	var n int64
	cached := true
	if st, err := os.Stat(blob); err != nil || meta.size >= 0 && st.Size() != meta.size {
		cached = false
		unlock, err := lockBlob(filepath.Join(c.Cache, ".locks", RepoFolderName(repoID), meta.etag+".lock"))
		if err != nil {
			return 0, false, err
		}
		n, err = c.fetchBlob(ctx, repoID, commit, file, blob, meta)
		unlock()
		if err != nil {
			return n, false, err
		}
	}
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return n, cached, fmt.Errorf("hub: %w", err)
	}
	rel, err := filepath.Rel(filepath.Dir(link), blob)
	if err != nil {
		return n, cached, fmt.Errorf("hub: %w", err)
	}
	if cur, err := os.Readlink(link); err == nil && cur == rel {
		return n, cached, nil
	}
	_ = os.Remove(link)
	if err := os.Symlink(rel, link); err != nil {
		return n, cached, fmt.Errorf("hub: linking %s: %w", link, err)
	}
	return n, cached, nil
}

// fetchBlob downloads the file into blob+".incomplete", resuming what an earlier attempt left there, verifies
// it and renames it to blob.
func (c *Client) fetchBlob(ctx context.Context, repoID, commit, file, blob string, meta fileMeta) (int64, error) {
	if st, err := os.Stat(blob); err == nil && (meta.size < 0 || st.Size() == meta.size) {
		return 0, nil // another process finished it while we waited for the lock
	}
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		return 0, fmt.Errorf("hub: %w", err)
	}
	tmp := blob + ".incomplete"
	var bar *progressbar.ProgressBar
	if c.Progress != nil {
		bar = progressbar.NewOptions64(meta.size, progressbar.OptionSetWriter(c.Progress),
			progressbar.OptionSetDescription(file), progressbar.OptionShowBytes(true), progressbar.OptionSetWidth(24),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionShowCount(),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(c.Progress) }), progressbar.OptionSetRenderBlankState(true))
	}
	var total int64
	var err error
	for attempt := 0; ; attempt++ {
		var n int64
		n, err = c.getRange(ctx, repoID, commit, file, tmp, meta, bar)
		total += n
		if err == nil || ctx.Err() != nil || attempt >= c.Retries || !retryable(err) {
			break
		}
	}
	if err != nil {
		return total, err
	}
	if err := verify(tmp, meta); err != nil {
		_ = os.Remove(tmp)
		return total, fmt.Errorf("hub: %s from %s: %w; the partial file was removed, run the download again", file, repoID, err)
	}
	if err := os.Rename(tmp, blob); err != nil {
		return total, fmt.Errorf("hub: %w", err)
	}
	return total, nil
}

// transferError is a transfer that broke off after it started; it is resumed.
type transferError struct{ err error }

func (e *transferError) Error() string { return e.err.Error() }
func (e *transferError) Unwrap() error { return e.err }

func retryable(err error) bool {
	var te *transferError
	return errors.As(err, &te) || unreachable(err)
}

// getRange appends to tmp what it lacks of the file: a Range request from its current size (huggingface_hub's
// http_get resume_size), or the whole file when the server ignores the range.
func (c *Client) getRange(ctx context.Context, repoID, commit, file, tmp string, meta fileMeta, bar *progressbar.ProgressBar) (int64, error) {
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, fmt.Errorf("hub: %w", err)
	}
	defer f.Close()
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, fmt.Errorf("hub: %w", err)
	}
	if meta.size >= 0 && have > meta.size || meta.size < 0 && c.MaxFileSize > 0 && have > c.MaxFileSize { // not the same file: start over
		have = 0
	}
	h := http.Header{"Accept-Encoding": {"identity"}}
	if have > 0 {
		h.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	// The answer and every read must come within DownloadTimeout: a timer, reset by each read, cancels the
	// request when the server goes quiet.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var idle atomic.Bool
	var timer *time.Timer
	if c.DownloadTimeout > 0 {
		timer = time.AfterFunc(c.DownloadTimeout, func() { idle.Store(true); cancel() })
		defer timer.Stop()
	}
	quiet := func(err error, got int64) error {
		if err == nil || !idle.Load() || ctx.Err() != nil {
			return err
		}
		return &transferError{&timeoutError{fmt.Sprintf("hub: %s from %s: the server at %s sent nothing for %v (after %d bytes); "+
			"try again later, or set HF_HUB_DOWNLOAD_TIMEOUT (seconds) to wait longer", file, repoID, c.Endpoint, c.DownloadTimeout, got), err}}
	}
	resp, err := c.request(rctx, http.MethodGet, c.resolveURL(repoID, commit, file), h)
	if err != nil {
		return 0, quiet(err, have)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0:
	case resp.StatusCode == http.StatusOK:
		have = 0 // the server sent the whole file
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		have = 0
		if err := f.Truncate(0); err != nil {
			return 0, fmt.Errorf("hub: %w", err)
		}
		return 0, &transferError{fmt.Errorf("hub: %s: the server refused to resume (HTTP 416); starting over", file)}
	default:
		return 0, c.refusal(resp, repoID, commit, file)
	}
	if err := f.Truncate(have); err != nil {
		return 0, fmt.Errorf("hub: %w", err)
	}
	if _, err := f.Seek(have, io.SeekStart); err != nil {
		return 0, fmt.Errorf("hub: %w", err)
	}
	var w io.Writer = f
	if bar != nil {
		bar.Set64(have)
		w = io.MultiWriter(f, bar)
	}
	var body io.Reader = resp.Body
	if timer != nil {
		body = &resettingReader{body, timer, c.DownloadTimeout}
	}
	if meta.size >= 0 {
		body = io.LimitReader(body, meta.size-have+1) // one byte more than announced tells a longer body
	} else if c.MaxFileSize > 0 {
		body = io.LimitReader(body, c.MaxFileSize-have+1) // no size announced: at most MaxFileSize
	}
	n, err := io.Copy(w, body)
	if meta.size < 0 && c.MaxFileSize > 0 && have+n > c.MaxFileSize {
		f.Close()
		_ = os.Remove(tmp)
		return n, fmt.Errorf("hub: %s from %s: the server announced no size (no X-Linked-Size or Content-Length) and sent "+
			"more than %d bytes, the most a file may have; the partial file was removed: check HF_ENDPOINT (%s), or raise "+
			"the limit (tune download --max-file-size)", file, repoID, c.MaxFileSize, c.Endpoint)
	}
	if meta.size >= 0 && have+n > meta.size {
		f.Close()
		_ = os.Remove(tmp)
		return n, fmt.Errorf("hub: %s from %s: the server sent more than the %d bytes it announced (X-Linked-Size or "+
			"Content-Length, or the file list); the partial file was removed: check HF_ENDPOINT (%s) and run the download again", file, repoID, meta.size, c.Endpoint)
	}
	if err != nil {
		if qe := quiet(err, have+n); qe != err {
			return n, qe
		}
		return n, &transferError{fmt.Errorf("hub: %s from %s broke off after %d bytes (kept in %s, resumed on the next try): %w", file, repoID, have+n, tmp, err)}
	}
	if meta.size >= 0 && have+n != meta.size {
		return n, &transferError{fmt.Errorf("hub: %s from %s ended after %d of %d bytes (kept in %s, resumed on the next try)", file, repoID, have+n, meta.size, tmp)}
	}
	if err := f.Sync(); err != nil {
		return n, fmt.Errorf("hub: %w", err)
	}
	return n, nil
}

// resettingReader restarts the idle timer t (to d) after every read of r.
type resettingReader struct {
	r io.Reader
	t *time.Timer
	d time.Duration
}

func (r *resettingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.t.Reset(r.d)
	}
	return n, err
}

// verify checks a finished download against its etag: a 64-hex etag is the SHA-256 of an LFS file's content,
// a 40-hex etag the git blob SHA-1 of a small file (sha1("blob <size>\x00" + content)); the size must match
// in every case.
func verify(p string, meta fileMeta) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if meta.size >= 0 && st.Size() != meta.size {
		return fmt.Errorf("size %d, the Hub says %d", st.Size(), meta.size)
	}
	var h hash.Hash
	kind := ""
	switch {
	case len(meta.etag) == 64 && isHex(meta.etag):
		h, kind = sha256.New(), "SHA-256"
	case len(meta.etag) == 40 && isHex(meta.etag):
		h, kind = sha1.New(), "git blob SHA-1"
		fmt.Fprintf(h, "blob %d\x00", st.Size())
	default:
		return nil // an etag that is no content hash (a mirror's); the size was checked
	}
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != strings.ToLower(meta.etag) {
		return fmt.Errorf("checksum mismatch: %s %s, the Hub's etag is %s", kind, got, meta.etag)
	}
	return nil
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// writeFileAtomic writes data to p through a temporary file in the same directory.
func writeFileAtomic(p string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+path.Base(filepath.ToSlash(p))+".tmp*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), p)
}
