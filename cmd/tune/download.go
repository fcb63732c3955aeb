package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tune-ml/tune/hub"
)

func init() { register(newDownloadCmd) }

// downloadOptions holds `tune download`'s argument and flags.
type downloadOptions struct {
	RepoID      string   // the Hub repository id
	Revision    string   // branch, tag or commit ("" is main)
	Include     []string // globs selecting the files
	AllowPickle bool     // fetch pickle files too
	Quiet       bool     // no progress bars
	MaxFileSize string   // the most bytes a file may have ("50GB"; "0": no limit)
}

func newDownloadCmd() *cobra.Command {
	o := &downloadOptions{}
	cmd := &cobra.Command{
		Use:   "download REPO_ID",
		Short: "Fetch a model from the Hugging Face Hub into the Hugging Face cache",
		Long: `download fetches a model repository from the Hugging Face Hub into the cache Hugging Face tools use
($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub), in their layout, and prints the
snapshot directory on stdout. A model in that cache, fetched by tune or by transformers, huggingface-cli
or any other HF tool, is then named by its id wherever tune takes a model, adapter or tokenizer path:
model.path=bert-base-uncased in a recipe, --model, --adapter and --tokenizer of eval and predict, merge,
inspect.

Files already in the cache are not fetched again; an interrupted download resumes where it stopped (the
partial file is kept as blobs/ETAG.incomplete), and every file is checked against the Hub's checksum
before it is used. safetensors weights are fetched; pickle files (pytorch_model.bin, *.pt, *.ckpt, ...),
which run code when loaded and which tune does not read, only with --allow-pickle; other frameworks'
weights (tf_model.h5, flax_model.msgpack, *.onnx) only when --include names them.

Environment, as in huggingface_hub: HF_ENDPOINT (the Hub's address, for a mirror), HF_TOKEN (for private
and gated models; else the token huggingface-cli login saved), HF_HUB_OFFLINE=1 (no network: report
what the cache holds or lacks), HF_HUB_ETAG_TIMEOUT and HF_HUB_DOWNLOAD_TIMEOUT (seconds, 10 each: how long
the file list and each file's metadata, and each download's answer and reads, may take before it is an
error naming the address).

A file may have at most --max-file-size bytes (default 50GB, the Hub's own limit on one file): a file
announced larger is refused, and one whose size the server does not announce fails when it grows past the
limit, its partial file removed. More than its announced size is never accepted.`,
		Example: `  tune download bert-base-uncased
  tune download Qwen/Qwen2.5-0.5B --revision main
  tune download google-bert/bert-base-uncased --include '*.json' --include '*.txt'
  tune finetune recipes/bert.yaml model.path=bert-base-uncased`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("download takes one REPO_ID (such as bert-base-uncased or Qwen/Qwen2.5-0.5B), got %d arguments", len(args))
			}
			if !hub.ValidRepoID(args[0]) {
				return usagef("%q is not a Hub repository id: NAME or ORG/NAME, of letters, digits, '-', '_' and '.'", args[0])
			}
			if o.Revision != "" && !hub.ValidRevision(o.Revision) { // a flag's value: exit 2, as a bad REPO_ID
				return usagef("--revision %q is not a branch, tag or commit name: it must not be absolute or contain \"..\" or a backslash", o.Revision)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.RepoID = args[0]
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Revision, "revision", "", "branch, tag or commit hash to fetch (default main)")
	f.StringArrayVar(&o.Include, "include", nil, "fetch only the files matching this glob (repeatable; '*' matches across '/')")
	f.BoolVar(&o.AllowPickle, "allow-pickle", false, "also fetch pickle files (pytorch_model.bin, *.pt, *.ckpt), which run code when loaded")
	f.BoolVar(&o.Quiet, "quiet", false, "no progress bars; print only the snapshot directory")
	f.StringVar(&o.MaxFileSize, "max-file-size", "50GB", "the most bytes one file may have (kB, MB, GB, TB or KiB, MiB, GiB, TiB; 0: no limit)")
	return cmd
}

func (o *downloadOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	c := hub.NewClient()
	limit, err := parseByteSize(o.MaxFileSize)
	if err != nil {
		return usagef("--max-file-size %q: %v", o.MaxFileSize, err)
	}
	c.MaxFileSize = limit
	if u, err := url.Parse(c.Endpoint); !c.Offline && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		return usagef("HF_ENDPOINT %q is not an http(s) URL: set it to the Hub's or a mirror's address, such as %s, or unset it", c.Endpoint, hub.DefaultEndpoint)
	}
	if !o.Quiet {
		c.Progress = stderr
	}
	res, err := c.Download(ctx, o.RepoID, hub.Options{Revision: o.Revision, Include: o.Include, AllowPickle: o.AllowPickle})
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return fmt.Errorf("download of %s interrupted; run the same command again to resume: %w", o.RepoID, context.Canceled)
		}
		return err
	}
	rev := o.Revision
	if rev == "" {
		rev = hub.DefaultRevision
	}
	if !o.Quiet {
		if res.FromCache != "" {
			fmt.Fprintf(stderr, "tune: %s; using the cached snapshot of %s at %s (%d files)\n", res.FromCache, o.RepoID, rev, len(res.Cached))
		} else {
			fmt.Fprintf(stderr, "tune: %s at %s (commit %s): %d files fetched (%s), %d already cached\n",
				o.RepoID, rev, res.Commit[:12], len(res.Fetched), byteSize(res.Bytes), len(res.Cached))
		}
		for _, s := range res.Skipped {
			if s.Why != "not matched by --include" {
				fmt.Fprintf(stderr, "tune: skipped %s: %s\n", s.Name, s.Why)
			}
		}
	}
	if w := weightsNote(res, o.Include); w != "" {
		fmt.Fprintf(stderr, "tune: warning: %s\n", w)
	}
	fmt.Fprintln(stdout, res.Dir)
	return nil
}

// weightsNote warns when a full download brought no safetensors weights, which is all tune reads.
func weightsNote(res *hub.Result, include []string) string {
	if len(include) > 0 {
		return ""
	}
	for _, f := range append(append([]string{}, res.Fetched...), res.Cached...) {
		if strings.HasSuffix(f, ".safetensors") || strings.HasSuffix(f, ".safetensors.index.json") {
			return ""
		}
	}
	var pickles []string
	for _, s := range res.Skipped {
		if ext := path.Ext(s.Name); ext == ".bin" || ext == ".pt" || ext == ".pth" {
			pickles = append(pickles, s.Name)
		}
	}
	msg := "the snapshot holds no safetensors weights (model.safetensors), the only weights tune reads"
	if len(pickles) > 0 {
		msg += fmt.Sprintf("; the repository has only pickle weights (%s): convert them to safetensors (transformers' save_pretrained writes them) or use another revision", strings.Join(pickles, ", "))
	}
	return msg
}

// byteSize formats n bytes as kB/MB/GB (powers of 1000, as huggingface_hub's progress bars).
func byteSize(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

// parseByteSize reads a number of bytes with an optional unit: kB, MB, GB, TB (powers of 1000) or KiB, MiB,
// GiB, TiB (powers of 1024), case-insensitive; a bare number is bytes.
func parseByteSize(v string) (int64, error) {
	t := strings.TrimSpace(v)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	}
	mult := map[string]float64{"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}[unit]
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || mult == 0 || f < 0 || f*mult > 1<<62 {
		return 0, errors.New("want a number of bytes such as 50GB, 20GiB or 1000000 (0: no limit)")
	}
	return int64(f * mult), nil
}
