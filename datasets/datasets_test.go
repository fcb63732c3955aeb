package datasets_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/chat"
	"github.com/tune-ml/tune/datasets"
	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/sft"
	"github.com/tune-ml/tune/tokenizers"
	"github.com/tune-ml/tune/trainer"
)

// The adapters are what the Trainer reads: checked at compile time here, where importing trainer adds no
// dependency to the package itself.
var (
	_ trainer.Dataset = (*datasets.Text)(nil)
	_ trainer.Orderer = (*datasets.Text)(nil)
	_ trainer.Dataset = (*datasets.SFT)(nil)
)

func tinyTokenizer(t *testing.T) *loaders.Tokenizer {
	t.Helper()
	tok, err := loaders.LoadTokenizer(filepath.Join(testutil.RepoRoot(t), "recipes", "data", "tiny"))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadTextBatchesAndTruncates(t *testing.T) {
	tok := tinyTokenizer(t)
	p := writeFile(t, "train.tsv", "sentence\tlabel\nthe film was funny\tpos\nbad\tneg\nthe actors were really very funny\tpos\n")
	ds, err := datasets.LoadText(p, tok, datasets.TextOptions{MaxLength: 5})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Len() != 3 || !slices.Equal(ds.LabelNames, []string{"neg", "pos"}) {
		t.Fatalf("Len %d, LabelNames %q; want 3 and [neg pos] (run_glue sorts string labels)", ds.Len(), ds.LabelNames)
	}
	b, err := ds.Batch([]int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if b.B != 2 || b.T != 5 {
		t.Fatalf("batch %dx%d, want 2x5 (padded to the longest, truncated at MaxLength 5)", b.B, b.T)
	}
	if !slices.Equal(b.Labels, []int64{0, 1}) {
		t.Fatalf("labels %v, want [0 1]", b.Labels)
	}
}

func TestTextEpochOrderGroupsByLength(t *testing.T) {
	tok := tinyTokenizer(t)
	var rows strings.Builder
	rows.WriteString("sentence\tlabel\n")
	for i := range 16 {
		rows.WriteString(strings.Repeat("funny ", 1+(i*7)%16) + "\t1\n")
	}
	p := writeFile(t, "train.tsv", rows.String())
	plain, err := datasets.LoadText(p, tok, datasets.TextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	grouped, err := datasets.LoadText(p, tok, datasets.TextOptions{GroupByLength: true})
	if err != nil {
		t.Fatal(err)
	}
	a, err := plain.EpochOrder(0, true, 42, 4)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := loaders.EpochOrder(16, 0, loaders.SamplerOptions{Shuffle: true, Seed: 42})
	if !slices.Equal(a, want) {
		t.Fatalf("without group_by_length the order is loaders.EpochOrder's: got %v, want %v", a, want)
	}
	g, err := grouped.EpochOrder(0, true, 42, 4)
	if err != nil {
		t.Fatal(err)
	}
	lengths, _ := grouped.Collator.Lengths()
	wantG, _ := loaders.EpochOrder(16, 0, loaders.SamplerOptions{Shuffle: true, Seed: 42, GroupByLength: true, BatchSize: 4, Lengths: lengths})
	if !slices.Equal(g, wantG) || slices.Equal(g, a) {
		t.Fatalf("group_by_length order %v, want %v (and not the plain %v)", g, wantG, a)
	}
	again, _ := grouped.EpochOrder(0, true, 42, 4)
	if !slices.Equal(g, again) {
		t.Fatal("EpochOrder is not a pure function of its arguments: resuming would see another order")
	}
}

func TestLoadTextLabelRange(t *testing.T) {
	p := writeFile(t, "train.tsv", "sentence\tlabel\nfunny\t0\nbad\t3\n")
	_, err := datasets.LoadText(p, tinyTokenizer(t), datasets.TextOptions{DatasetOptions: loaders.DatasetOptions{NumLabels: 2}})
	var lre *loaders.LabelRangeError
	if !errors.As(err, &lre) || lre.Line != 3 || lre.Label != 3 {
		t.Fatalf("got %v, want a *loaders.LabelRangeError for label 3 at line 3", err)
	}
	if _, err := datasets.LoadText(p, nil, datasets.TextOptions{}); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("no tokenizer: got %v, want an error naming %s", err, p)
	}
}

func TestLoadSFTRowsAndBatch(t *testing.T) {
	dir := filepath.Join(testutil.RepoRoot(t), "recipes", "data", "tiny-chat")
	tok, err := tokenizers.LoadForTransformers(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := tokenizers.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.FromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tk := sft.Tokenizer{Tok: tok, Config: cfg, Template: tmpl}
	p := filepath.Join(dir, "dev.jsonl")
	plain, err := datasets.LoadSFT(p, tk, sft.Options{MaxLength: 256})
	if err != nil {
		t.Fatal(err)
	}
	packed, err := datasets.LoadSFT(p, tk, sft.Options{MaxLength: 256, Packing: true})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Len() != len(plain.Examples) || packed.Len() >= plain.Len() {
		t.Fatalf("rows: %d unpacked for %d examples, %d packed; want one row per example and fewer packed",
			plain.Len(), len(plain.Examples), packed.Len())
	}
	b, err := plain.Batch([]int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	if b.B != 2 || len(b.Labels) != 2*b.T {
		t.Fatalf("batch %dx%d with %d labels", b.B, b.T, len(b.Labels))
	}
	if _, err := plain.Batch([]int{plain.Len()}); err == nil {
		t.Fatal("a row index past the end was accepted")
	}
}

// TestLayering keeps the package below the trainer and the recipes: it adapts data, it does not reach into
// training or configuration.
func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/tune-ml/tune/datasets").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, above := range []string{"/trainer", "/recipes", "/cmd/", "/transformer", "/lora"} {
			if strings.Contains(dep, "github.com/tune-ml/tune"+above) {
				t.Errorf("datasets depends on %s: it must stay below the trainer and the recipes", dep)
			}
		}
	}
}
