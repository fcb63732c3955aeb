package lora

import (
	"encoding/json"
	"errors"
	"github.com/tune-ml/tune/transformer/bert"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
)

// loadTinyBert loads shared/data/tiny-bert-random (hidden 64, 2 layers, 2 labels) on the CPU.
func loadTinyBert(t testing.TB) *bert.BertForSequenceClassification {
	t.Helper()
	dir := testutil.SharedData(t, "tiny-bert-random")
	m, _, err := bert.LoadPretrained(dir, cpuBackend(), transformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSaveLoadB24 checks the classifier saved with the adapter (modules_to_save in peft/utils/save_and_load.py): on tiny-bert-random with r 4, alpha 8, [query, value], SEQ_CLS, a non-zero B
// and a changed head, the adapter file holds exactly the 10 tensors PEFT writes (the classifier included, no
// adapter name in the keys), adapter_config.json has PEFT's fields, and the adapter reloaded onto a freshly
// loaded base gives the pre-save logits exactly in FP32.
func TestSaveLoadB24(t *testing.T) {
	m, err := Apply(loadTinyBert(t), seqCls(), 1)
	if err != nil {
		t.Fatal(err)
	}
	setParams(t, m, 24, trained)
	batch := testBatch(3, 9, 30522, []int{9, 5, 7})
	want := forward(t, m, batch)
	baseLogits := forward(t, loadTinyBert(t), batch)
	d, _ := tensortest.MaxAbsDiff(want, baseLogits)
	if d < 1e-2 {
		t.Fatalf("the adapter changes the logits by only %g: the test would not see a lost head", d)
	}
	dir := t.TempDir()
	must(t, m.Save(dir))

	ck, err := loaders.OpenCheckpoint(filepath.Join(dir, AdapterWeightsName))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	wantShapes := map[string][]int{
		"base_model.model.classifier.weight": {2, 64},
		"base_model.model.classifier.bias":   {2},
	}
	for _, l := range []string{"0", "1"} {
		for _, p := range []string{"query", "value"} {
			pre := "base_model.model.bert.encoder.layer." + l + ".attention.self." + p
			wantShapes[pre+".lora_A.weight"] = []int{4, 64}
			wantShapes[pre+".lora_B.weight"] = []int{64, 4}
		}
	}
	if ck.Len() != 10 {
		t.Errorf("%d tensors %v, want 10", ck.Len(), ck.Names())
	}
	for _, info := range ck.Infos() {
		if w, ok := wantShapes[info.Name]; !ok || !slices.Equal(info.Shape, w) || info.DType != "F32" {
			t.Errorf("tensor %s %s %v; want one of PEFT's keys in F32 (shape %v)", info.Name, info.DType, info.Shape, w)
		}
		if strings.Contains(info.Name, "default") {
			t.Errorf("key %s carries the adapter name", info.Name)
		}
	}
	if md := ck.Metadata(); len(md) != 1 || md["format"] != "pt" {
		t.Errorf("__metadata__ %v, want {format: pt}", md)
	}

	raw, err := os.ReadFile(filepath.Join(dir, AdapterConfigName))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	must(t, json.Unmarshal(raw, &cfg))
	for key, w := range map[string]any{
		"peft_type": "LORA", "task_type": "SEQ_CLS", "r": 4.0, "lora_alpha": 8.0, "bias": "none",
		"fan_in_fan_out": false, "use_rslora": false,
		"modules_to_save": []any{"classifier", "score"}, "target_modules": []any{"query", "value"},
	} {
		if got, _ := json.Marshal(cfg[key]); string(got) != mustJSON(t, w) {
			t.Errorf("adapter_config.json %s = %s, want %s", key, got, mustJSON(t, w))
		}
	}

	re, err := LoadAdapter(loadTinyBert(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := forward(t, re, batch); !slices.Equal(got, want) {
		d, _ := tensortest.MaxAbsDiff(got, want)
		t.Errorf("reloaded logits differ from the pre-save logits by %g, want exactly equal", d)
	}
}

// TestSaveKeysPerBias checks which keys Save writes for each bias setting (peft/utils/save_and_load.py): "all" adds every bias
// (LayerNorm's and the adapted modules' base_layer.bias included), "lora_only" the adapted modules' base biases.
func TestSaveKeysPerBias(t *testing.T) {
	for _, c := range []struct {
		bias  string
		extra func(key string) bool // keys beyond the adapters and the classifier
		count int                   // number of extra keys on the 2-layer model
	}{
		{BiasNone, func(string) bool { return false }, 0},
		{BiasLoRAOnly, func(k string) bool { return strings.HasSuffix(k, "base_layer.bias") }, 4},
		{BiasAll, func(k string) bool { return strings.HasSuffix(k, "bias") }, 1 + 2*8 + 1},
	} {
		t.Run(c.bias, func(t *testing.T) {
			cfg := seqCls()
			cfg.Bias = c.bias
			m, err := Apply(newBase(t, cpuBackend(), tinyConfig(), 1), cfg, 1)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			must(t, m.Save(dir))
			ck, err := loaders.OpenCheckpoint(filepath.Join(dir, AdapterWeightsName))
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			extra := 0
			for _, k := range ck.Names() {
				base := strings.Contains(k, ".lora_") || strings.HasPrefix(k, "base_model.model.classifier.")
				switch {
				case base:
				case c.extra(k):
					extra++
				default:
					t.Errorf("unexpected key %s", k)
				}
			}
			if extra != c.count {
				t.Errorf("%d bias keys, want %d (keys %v)", extra, c.count, ck.Names())
			}
			re, err := LoadAdapter(newBase(t, cpuBackend(), tinyConfig(), 1), dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(re.Warnings) != 0 {
				t.Errorf("warnings on reload: %v", re.Warnings)
			}
		})
	}
}

// TestLoadRejectsMismatches writes adapter files that do not fit the model and checks each is refused with an
// error naming the problem, while a file lacking only a trained bias loads with a warning (PEFT keeps the
// base's value too).
func TestLoadRejectsMismatches(t *testing.T) {
	cfg := seqCls()
	cfg.Bias = BiasLoRAOnly
	src, err := Apply(newBase(t, cpuBackend(), tinyConfig(), 1), cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	good := t.TempDir()
	must(t, src.Save(good))
	const qA = "base_model.model.bert.encoder.layer.0.attention.self.query.lora_A.weight"
	const qBias = "base_model.model.bert.encoder.layer.0.attention.self.query.base_layer.bias"
	for _, c := range []struct {
		name string
		edit func(ts []loaders.HostTensor) []loaders.HostTensor
		want string // error substring; "" means it loads with a warning
	}{
		{"a missing lora_A", func(ts []loaders.HostTensor) []loaders.HostTensor { return drop(ts, qA) }, "missing tensors: " + qA},
		{"a key of another model", func(ts []loaders.HostTensor) []loaders.HostTensor {
			return append(ts, f32Tensor(t, "base_model.model.bert.encoder.layer.7.attention.self.query.lora_A.weight", 4, 64))
		}, "does not train: base_model.model.bert.encoder.layer.7"},
		{"another rank", func(ts []loaders.HostTensor) []loaders.HostTensor {
			return append(drop(ts, qA), f32Tensor(t, qA, 8, 64))
		}, qA + " has shape [8 64]"},
		{"a key without PEFT's prefix", func(ts []loaders.HostTensor) []loaders.HostTensor {
			return append(ts, f32Tensor(t, "classifier.weight", 2, 64))
		}, "does not train: classifier.weight"},
		{"a missing trained bias", func(ts []loaders.HostTensor) []loaders.HostTensor { return drop(ts, qBias) }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			copyFile(t, filepath.Join(good, AdapterConfigName), filepath.Join(dir, AdapterConfigName))
			must(t, loaders.WriteSafetensors(filepath.Join(dir, AdapterWeightsName), c.edit(readAll(t, good)), nil))
			m, err := LoadAdapter(newBase(t, cpuBackend(), tinyConfig(), 1), dir)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want == "":
				if len(m.Warnings) != 1 || !strings.Contains(m.Warnings[0], "query.base_layer.bias") {
					t.Errorf("warnings %v, want one naming the missing bias", m.Warnings)
				}
			case err == nil || !strings.Contains(err.Error(), c.want):
				t.Fatalf("error %v, want one containing %q", err, c.want)
			default:
				t.Logf("refused: %v", err)
			}
		})
	}
}

// TestLoadNamesAWrongRank: an adapter_config.json whose r disagrees with the rank of every lora_A/lora_B in
// adapter_model.safetensors is reported as that, naming two tensors and the count, not as another base model.
func TestLoadNamesAWrongRank(t *testing.T) {
	cfg := seqCls()
	cfg.R = 8
	src, err := Apply(newBase(t, cpuBackend(), tinyConfig(), 1), cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	must(t, src.Save(dir))
	cfg.R = 4
	must(t, WriteAdapterConfig(dir, cfg, ""))
	_, err = LoadAdapter(newBase(t, cpuBackend(), tinyConfig(), 1), dir)
	if err == nil {
		t.Fatal("loaded rank-8 weights under r = 4")
	}
	msg := err.Error()
	for _, want := range []string{
		filepath.Join(dir, AdapterConfigName) + " says r = 4 but " + filepath.Join(dir, AdapterWeightsName) + " holds rank-8 lora_A/lora_B weights (",
		" and 6 more (8 in all)", "the config's r disagrees with the weights' rank", `set "r": 8`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "another base model") {
		t.Errorf("error %q blames the base model", msg)
	}
}

// TestLoadResumes is the trainer.Loader path: Load puts back what Save wrote, bit for bit, into a model whose
// adapter weights changed since; a checkpoint of another adapter config is refused naming the difference.
func TestLoadResumes(t *testing.T) {
	m, err := Apply(newBase(t, cpuBackend(), tinyConfig(), 1), seqCls(), 1)
	if err != nil {
		t.Fatal(err)
	}
	setParams(t, m, 3, trained)
	batch := testBatch(2, 6, 96, []int{6, 4})
	want := forward(t, m, batch)
	dir := t.TempDir()
	must(t, m.Save(dir))
	setParams(t, m, 4, trained)
	must(t, m.Load(dir))
	if got := forward(t, m, batch); !slices.Equal(got, want) {
		t.Errorf("logits after Load differ from those at Save")
	}
	other := seqCls()
	other.R = 8
	o, err := Apply(newBase(t, cpuBackend(), tinyConfig(), 1), other, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Load(dir); err == nil || !strings.Contains(err.Error(), "r 4") {
		t.Errorf("loading an r 4 adapter into r 8 adapters: %v", err)
	}
}

// readAll returns every tensor of dir's adapter file.
func readAll(t testing.TB, dir string) []loaders.HostTensor {
	t.Helper()
	ck, err := loaders.OpenCheckpoint(filepath.Join(dir, AdapterWeightsName))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var out []loaders.HostTensor
	for _, n := range ck.Names() {
		ht, err := ck.Get(n)
		if err != nil {
			t.Fatal(err)
		}
		ht.Data = slices.Clone(ht.Data)
		out = append(out, ht)
	}
	return out
}

func drop(ts []loaders.HostTensor, name string) []loaders.HostTensor {
	return slices.DeleteFunc(ts, func(h loaders.HostTensor) bool { return h.Name == name })
}

func f32Tensor(t testing.TB, name string, shape ...int) loaders.HostTensor {
	t.Helper()
	ht, err := loaders.NewHostTensor(name, tensor.F32, shape, make([]float32, tensor.Shape(shape).Numel()))
	must(t, err)
	return ht
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	must(t, err)
	must(t, os.WriteFile(to, b, 0o644))
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	must(t, err)
	return string(b)
}

// TestSavedNumLabels reads num_labels from the saved head: 3 for a 3-label SEQ_CLS adapter, 0 for an adapter
// without modules_to_save (task_type unset, so PEFT adds no head).
func TestSavedNumLabels(t *testing.T) {
	for _, c := range []struct {
		name string
		task string
		want int
	}{
		{"SEQ_CLS saves the 3-label head", TaskSeqCls, 3},
		{"no task type saves no head", "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := tinyConfig()
			cfg.ID2Label = bert.DefaultLabels(3)
			lc := seqCls()
			lc.TaskType = c.task
			m, err := Apply(newBase(t, cpuBackend(), cfg, 1), lc, 1)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			must(t, m.Save(dir))
			if got, err := SavedNumLabels(dir); err != nil || got != c.want {
				t.Errorf("SavedNumLabels = %d, %v; want %d", got, err, c.want)
			}
		})
	}
	if _, err := SavedNumLabels(t.TempDir()); err == nil {
		t.Errorf("a directory without an adapter gave no error")
	}
}

// TestLoadNamesTargetsThatMatchNothing: an adapter_config.json whose target_modules match no Linear of the base
// failed as an internal error (tune eval exit 1) without naming the file (tester7 F9), while every other bad
// value in it is bad input naming it. It is bad input too now, naming adapter_config.json.
func TestLoadNamesTargetsThatMatchNothing(t *testing.T) {
	src, err := Apply(newBase(t, cpuBackend(), tinyConfig(), 1), seqCls(), 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	must(t, src.Save(dir))
	cfg := seqCls()
	cfg.TargetModules = TargetModules{Names: []string{"nothing"}}
	must(t, WriteAdapterConfig(dir, cfg, ""))
	_, err = LoadAdapter(newBase(t, cpuBackend(), tinyConfig(), 1), dir)
	if !errors.Is(err, ErrNoTargets) || !badinput.Is(err) ||
		!strings.Contains(err.Error(), "(file "+filepath.Join(dir, AdapterConfigName)+")") {
		t.Errorf("got %v; want bad input matching ErrNoTargets, naming %s", err, AdapterConfigName)
	}
}
