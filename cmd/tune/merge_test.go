package main

import (
	"flag"
	"fmt"
	"github.com/tune-ml/tune/transformer/bert"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/trainer"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/detweights"
)

// mergeFixture writes a tiny base checkpoint (3 labels, tokenizer files) and a LoRA adapter trained on it (B
// and the classifier set to non-zero values) and returns their directories, a batch and the adapted model's
// logits on it.
func mergeFixture(t *testing.T) (model, adapter string, batch *loaders.Batch, want []float32) {
	t.Helper()
	dir := t.TempDir()
	model, adapter = filepath.Join(dir, "base"), filepath.Join(dir, "adapter")
	cfg := bert.DefaultBertConfig()
	cfg.VocabSize, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = 60, 32, 2, 2, 48
	cfg.MaxPositionEmbeddings, cfg.ID2Label = 16, bert.DefaultLabels(3)
	base, err := bert.NewBertForSequenceClassification(cpu.New(), cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	if err := base.Save(model); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"tokenizer.json": `{"model":{}}`, "vocab.txt": "[PAD]\n[UNK]\n"} {
		if err := os.WriteFile(filepath.Join(model, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lc := lora.DefaultConfig()
	lc.R, lc.LoraAlpha, lc.TaskType = 4, 8, lora.TaskSeqCls
	lc.TargetModules = lora.TargetModules{Names: []string{"query", "value", "intermediate.dense"}}
	m, err := lora.Apply(base, lc, 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, np := range m.NamedParameters() {
		if strings.Contains(np.Name, "lora_B") || strings.HasPrefix(np.Name, "classifier.") {
			if err := cpu.New().Upload(np.Value, detweights.Values(9, np.Name, np.Value.Shape)); err != nil {
				t.Fatal(err)
			}
		}
	}
	m.WeightsUpdated()
	if err := m.Save(adapter); err != nil {
		t.Fatal(err)
	}
	batch = &loaders.Batch{B: 2, T: 5, InputIDs: []int32{2, 7, 9, 30, 3, 2, 44, 3, 0, 0},
		TokenTypeIDs: make([]int32, 10), AttentionMask: []int32{1, 1, 1, 1, 1, 1, 1, 1, 0, 0}}
	out, err := m.Forward(batch, trainer.ForwardOptions{HostLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	return model, adapter, batch, out.Logits
}

// TestMerge runs `tune merge` on a tiny base and adapter: the output is a complete checkpoint (config.json,
// model.safetensors with transformers' names only, the tokenizer files byte for byte) that LoadPretrained reads
// with nothing missing, unexpected or re-initialised, giving the adapted model's logits; no temporary directory
// is left; an empty output directory is accepted and a non-empty one refused untouched.
func TestMerge(t *testing.T) {
	model, adapter, batch, want := mergeFixture(t)
	parent := t.TempDir()
	out := filepath.Join(parent, "merged")
	if err := os.Mkdir(out, 0o755); err != nil { // an empty directory may be the target
		t.Fatal(err)
	}
	code, stdout, stderr := runTune(t, "merge", "--model", model, "--adapter", adapter, "--output", out)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	t.Log(strings.TrimSpace(stdout))
	if !strings.Contains(stdout, "(6 LoRA modules") || stderr != "" {
		t.Errorf("stdout %q, stderr %q", stdout, stderr)
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json", "vocab.txt"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	if a, b := readFile(t, filepath.Join(model, "vocab.txt")), readFile(t, filepath.Join(out, "vocab.txt")); a != b {
		t.Errorf("vocab.txt not copied byte for byte")
	}
	if tmp, _ := filepath.Glob(filepath.Join(parent, ".*tmp*")); len(tmp) > 0 {
		t.Errorf("temporary directories left: %v", tmp)
	}
	ck, err := loaders.OpenCheckpoint(out)
	if err != nil {
		t.Fatal(err)
	}
	names := ck.Names()
	ck.Close()
	ref, err := loaders.OpenCheckpoint(model)
	if err != nil {
		t.Fatal(err)
	}
	if refNames := ref.Names(); !slices.Equal(names, refNames) {
		t.Errorf("merged tensor names %v, want the base's %v", names, refNames)
	}
	ref.Close()
	m, report, err := bert.LoadPretrained(out, cpu.New(), transformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Missing)+len(report.Unexpected)+len(report.Mismatched)+len(report.Initialized) != 0 {
		t.Errorf("loading the merged checkpoint: %v", report)
	}
	got, err := m.Forward(batch, trainer.ForwardOptions{HostLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	var d float64
	for i := range want {
		d = math.Max(d, math.Abs(float64(got.Logits[i]-want[i])))
	}
	if d > 1e-5 {
		t.Errorf("merged logits differ from the adapted model's by %g", d)
	}

	before := readFile(t, filepath.Join(out, "config.json"))
	code, _, stderr = runTune(t, "merge", "--model", model, "--adapter", adapter, "--output", out)
	if code != exitUsage || !strings.Contains(stderr, "not empty") || readFile(t, filepath.Join(out, "config.json")) != before {
		t.Errorf("merge into a non-empty directory: exit %d, stderr %q", code, stderr)
	}
}

// TestMergeUsage checks the refusals that are usage errors (exit 2).
func TestMergeUsage(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no --output", []string{"merge", "--model", dir, "--adapter", dir}, "--output"},
		{"no --adapter", []string{"merge", "--model", dir, "--output", filepath.Join(dir, "o")}, "--adapter"},
		{"an output that is a file", []string{"merge", "--model", dir, "--adapter", dir, "--output", file}, "is a file"},
		{"an adapter directory without adapter_config.json", []string{"merge", "--model", dir, "--adapter", dir,
			"--output", filepath.Join(dir, "o")}, "not a PEFT adapter"},
		{"a positional argument", []string{"merge", "x"}, "unknown command"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runTune(t, c.args...)
			if code != exitUsage && !(c.name == "a positional argument" && code != exitOK) {
				t.Errorf("exit %d, want %d (stderr %q)", code, exitUsage, stderr)
			}
			if !strings.Contains(stderr, c.want) {
				t.Errorf("stderr %q, want it to mention %q", stderr, c.want)
			}
		})
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var updateMerged = flag.Bool("update-merged", false,
	"rewrite testdata/lora/merged_by_tune, the checkpoint `tune merge` writes that tools/reference/peft_goldens.py check-merged loads into transformers")

// TestMergeFixture merges testdata/lora/saved_by_tune/basic into the detweights base of the PEFT goldens (the
// same model peft_goldens.py builds) with the real command and requires the bytes of the checked-in
// testdata/lora/merged_by_tune, which peft_goldens.py check-merged loads with transformers. Run with
// -update-merged to rewrite it (then rerun the check).
func TestMergeFixture(t *testing.T) {
	adapter := testutil.Testdata(t, "lora", "saved_by_tune", "basic")
	fixture := testutil.Testdata(t, "lora", "merged_by_tune")
	cfg := bert.DefaultBertConfig()
	cfg.VocabSize, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = 128, 64, 2, 4, 128
	cfg.MaxPositionEmbeddings, cfg.HiddenDropoutProb, cfg.AttentionProbsDropoutProb = 64, 0, 0
	base, err := bert.NewBertForSequenceClassification(cpu.New(), cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, np := range base.NamedParameters() {
		if err := cpu.New().Upload(np.Value, detweights.Values(20261129, np.Name, np.Value.Shape)); err != nil {
			t.Fatal(err)
		}
	}
	model := filepath.Join(t.TempDir(), "base")
	if err := base.Save(model); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "merged")
	if *updateMerged {
		if err := os.RemoveAll(fixture); err != nil {
			t.Fatal(err)
		}
		out = fixture
	}
	if code, _, stderr := runTune(t, "merge", "--model", model, "--adapter", adapter, "--output", out); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, name := range []string{loaders.ConfigName, loaders.SafetensorsWeightsName} {
		want, err := os.ReadFile(filepath.Join(fixture, name))
		if err != nil {
			t.Fatalf("%v (create it with go test ./cmd/tune -run TestMergeFixture -update-merged)", err)
		}
		if got := readFile(t, filepath.Join(out, name)); got != string(want) {
			t.Errorf("%s differs from testdata/lora/merged_by_tune (rerun with -update-merged if intended)", name)
		}
	}
}

// TestMergeChecksTheBase sets the adapter's base_model_name_or_path in several ways and checks when merge takes
// --model for another model: it then refuses (exit 2, nothing written; tester 12 merged an adapter of a
// 30522-token BERT onto a 256-token one and got a checkpoint eval could not load) and with --force merges with
// a "tune: warning:" line, as eval and predict print theirs; and that its report says where the output went
// and that the inputs were only read.
func TestMergeChecksTheBase(t *testing.T) {
	model, adapter, _, _ := mergeFixture(t)
	other, _, _, _ := mergeFixture(t) // same shapes, different weights
	absModel, err := filepath.Abs(model)
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	relToWD, err := filepath.Rel(wd, absModel)
	if err != nil {
		t.Fatal(err)
	}
	relToAdapter, err := filepath.Rel(adapter, absModel)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		base string // base_model_name_or_path; "" writes null
		warn bool
	}{
		{"the absolute path of --model", absModel, false},
		{"a path relative to the working directory", relToWD, false},
		{"a path relative to the adapter directory", relToAdapter, false},
		{"null: nothing to check", "", false},
		{"a Hub id ending in the model's directory name", "someone/" + filepath.Base(model), false},
		{"another existing model directory", other, true},
		{"a Hub id of another model", "google-bert/bert-base-uncased", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _, err := lora.ReadAdapterConfig(adapter)
			if err != nil {
				t.Fatal(err)
			}
			if err := lora.WriteAdapterConfig(adapter, cfg, tt.base); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "merged")
			if tt.warn { // another base: refused (exit 2, nothing written), then merged with --force and a warning
				code, _, stderr := runTune(t, "merge", "--model", model, "--adapter", adapter, "--output", out)
				if code != exitUsage || !strings.Contains(stderr, "merging onto another base model") || !strings.Contains(stderr, "pass --force") {
					t.Fatalf("exit %d, want %d refusing the other base; stderr %q", code, exitUsage, stderr)
				}
				if _, err := os.Stat(out); !os.IsNotExist(err) {
					t.Fatalf("a refused merge left %s (%v)", out, err)
				}
			}
			args := []string{"merge", "--model", model, "--adapter", adapter, "--output", out}
			if tt.warn {
				args = append(args, "--force")
			}
			code, stdout, stderr := runTune(t, args...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if warned := strings.Contains(stderr, "merging onto another base model"); warned != tt.warn {
				t.Errorf("warned %v, want %v; stderr %q", warned, tt.warn, stderr)
			}
			if tt.warn && !strings.HasPrefix(stderr, "tune: warning: the adapter was trained on") {
				t.Errorf("the warning does not start as eval's and predict's do (tune: warning: ...): %q", stderr)
			}
			for _, w := range []string{"merged the adapter " + adapter, "with the base model " + model,
				"wrote the merged checkpoint to " + out + ": config.json, model.safetensors", "are unchanged"} {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
		})
	}
}

// TestMergeWithoutTokenizer checks that merging an adapter onto a base that, like the adapter, holds no
// tokenizer still writes the merged checkpoint, and warns that it has no tokenizer instead of staying silent.
func TestMergeWithoutTokenizer(t *testing.T) {
	model, adapter := tinyModelDir(t)
	out := filepath.Join(t.TempDir(), "merged")
	code, _, stderr := runTune(t, "merge", "--model", model, "--adapter", adapter, "--output", out)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if want := "tune: warning: neither " + adapter + " nor " + model + " holds a tokenizer"; !strings.Contains(stderr, want) {
		t.Errorf("stderr %q lacks %q", stderr, want)
	}
	if got := dirNames(t, out); !slices.Equal(got, []string{"config.json", "model.safetensors"}) {
		t.Errorf("merged checkpoint holds %v, want config.json and model.safetensors", got)
	}
}

// TestMergeRefusesATokenizerPastTheVocab (a fresh tester): merge --force onto another base wrote the adapter's
// tokenizer (30522 tokens) beside the base's config.json (vocab_size 256), a checkpoint eval and predict then
// refused. merge checks the tokenizer it would copy against --model's vocab_size first: exit 2, nothing written.
func TestMergeRefusesATokenizerPastTheVocab(t *testing.T) {
	model, adapter, _, _ := mergeFixture(t) // vocab_size 60
	lines := make([]string, 70)
	for i := range lines {
		lines[i] = fmt.Sprintf("tok%d", i)
	}
	if err := os.WriteFile(filepath.Join(adapter, "vocab.txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "merged")
	code, _, stderr := runTune(t, "merge", "--model", model, "--adapter", adapter, "--output", out, "--force")
	if code != exitUsage || !strings.Contains(stderr, "has 70 tokens") || !strings.Contains(stderr, "vocab_size 60") {
		t.Fatalf("exit %d, want %d naming the tokenizer and vocab_size; stderr %q", code, exitUsage, stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a refused merge left %s (%v)", out, err)
	}
}
