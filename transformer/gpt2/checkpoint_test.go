package gpt2

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/transformer"
)

// logitsOf runs an evaluation Forward and returns the host logits.
func logitsOf(t testing.TB, m transformer.Model, batch *loaders.Batch) []float32 {
	t.Helper()
	out, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	return out.Logits
}

// readTensors returns every tensor of dir's model.safetensors.
func readTensors(t testing.TB, dir string) []loaders.HostTensor {
	t.Helper()
	ck, err := loaders.OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var hs []loaders.HostTensor
	for _, n := range ck.Names() {
		ht, err := ck.Get(n)
		if err != nil {
			t.Fatal(err)
		}
		v, err := ht.Float32()
		if err != nil {
			t.Fatal(err)
		}
		c, err := loaders.NewHostTensor(n, tensor.F32, ht.Shape, v)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, c)
	}
	return hs
}

// writeCheckpoint writes config.json (copied from src) and the tensors into a new directory.
func writeCheckpoint(t testing.TB, src string, hs []loaders.HostTensor, editConfig func(map[string]any)) string {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(src, loaders.ConfigName))
	if err != nil {
		t.Fatal(err)
	}
	if editConfig != nil {
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		editConfig(m)
		if data, err = json.Marshal(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, loaders.ConfigName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := loaders.WriteSafetensors(filepath.Join(dir, loaders.SafetensorsWeightsName), hs, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestSaveLoadRoundTrip(t *testing.T) {
	b := cpu.New()
	cfg := tinyConfig()
	m := newTestModel(t, b, cfg, 7)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, generationConfigName), []byte(`{"bos_token_id": 50256}`), 0o644); err != nil {
		t.Fatal(err)
	}
	m.generation = []byte(`{"bos_token_id": 50256}` + "\n")
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	hs := readTensors(t, dir)
	names := make([]string, len(hs))
	for i, h := range hs {
		names[i] = h.Name
		if h.Name == "transformer.h.0.attn.c_attn.weight" && !slices.Equal(h.Shape, []int{16, 48}) {
			t.Errorf("c_attn.weight saved as %v, want transformers' Conv1D (in, out) = [16 48]", h.Shape)
		}
	}
	if slices.Contains(names, "lm_head.weight") {
		t.Error("a tied lm_head.weight was saved; transformers leaves it out")
	}
	got, err := ReadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.NEmbd != 16 || got.NLayer != 2 || !got.TieWordEmbeddings || got.ActivationFunc != "gelu_new" {
		t.Errorf("config read back: %+v", got)
	}
	batch := testBatch(2, 5, cfg.VocabSize, []int{5, 3})
	want := logitsOf(t, m, batch)
	back, report, err := LoadPretrained(dir, b, transformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if report.Matched != len(hs) || len(report.Renamed) != 0 {
		t.Errorf("report: %d matched of %d, renamed %v", report.Matched, len(hs), report.Renamed)
	}
	if !slices.Equal(logitsOf(t, back, batch), want) {
		t.Error("logits differ after Save and LoadPretrained")
	}
	if string(back.generation) != string(m.generation) {
		t.Errorf("generation_config.json kept as %q", back.generation)
	}
	// Open through the registry, as recipes do.
	opened, _, err := transformer.Open(dir, b, transformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(logitsOf(t, opened, batch), want) {
		t.Error("transformer.Open gave other logits")
	}
	// Load into an existing model.
	other := newTestModel(t, b, cfg, 8)
	if err := other.Load(dir); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(logitsOf(t, other, batch), want) {
		t.Error("Load gave other logits")
	}
}

// TestLoadGPT2ModelLayout: a GPT2Model checkpoint (no "transformer." prefix) with the attn.bias and
// attn.masked_bias buffers of older transformers loads to the same model.
func TestLoadGPT2ModelLayout(t *testing.T) {
	b := cpu.New()
	cfg := tinyConfig()
	m := newTestModel(t, b, cfg, 9)
	src := t.TempDir()
	if err := m.Save(src); err != nil {
		t.Fatal(err)
	}
	var hs []loaders.HostTensor
	for _, h := range readTensors(t, src) {
		h.Name = strings.TrimPrefix(h.Name, "transformer.")
		hs = append(hs, h)
	}
	p := cfg.NPositions
	tril := make([]float32, p*p)
	for i := 0; i < p; i++ {
		for j := 0; j <= i; j++ {
			tril[i*p+j] = 1
		}
	}
	for i := range cfg.NLayer {
		bias, _ := loaders.NewHostTensor("h."+string(rune('0'+i))+".attn.bias", tensor.F32, []int{1, 1, p, p}, tril)
		mb, _ := loaders.NewHostTensor("h."+string(rune('0'+i))+".attn.masked_bias", tensor.F32, []int{}, []float32{-1e4})
		hs = append(hs, bias, mb)
	}
	dir := writeCheckpoint(t, src, hs, nil)
	got, report, err := LoadPretrained(dir, b, transformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Ignored) != 2*cfg.NLayer || len(report.Renamed) != len(hs)-2*cfg.NLayer {
		t.Errorf("ignored %v, renamed %d", report.Ignored, len(report.Renamed))
	}
	batch := testBatch(1, 6, cfg.VocabSize, []int{6})
	if !slices.Equal(logitsOf(t, got, batch), logitsOf(t, m, batch)) {
		t.Error("the GPT2Model-layout checkpoint gives other logits")
	}
}

// TestLoadErrors: missing, unexpected and mis-shaped tensors and unsupported configs are errors naming the
// key, before anything is allocated.
func TestLoadErrors(t *testing.T) {
	b := cpu.New()
	cfg := tinyConfig()
	src := t.TempDir()
	if err := newTestModel(t, b, cfg, 2).Save(src); err != nil {
		t.Fatal(err)
	}
	all := readTensors(t, src)
	without := func(name string) []loaders.HostTensor {
		return slices.DeleteFunc(slices.Clone(all), func(h loaders.HostTensor) bool { return h.Name == name })
	}
	extra, _ := loaders.NewHostTensor("transformer.h.0.attn.q_proj.weight", tensor.F32, []int{16, 16}, make([]float32, 256))
	wrong, _ := loaders.NewHostTensor("transformer.ln_f.bias", tensor.F32, []int{17}, make([]float32, 17))
	for _, c := range []struct {
		name   string
		hs     []loaders.HostTensor
		config func(map[string]any)
		words  []string
	}{
		{"missing tensor", without("transformer.ln_f.bias"), nil, []string{"missing from the checkpoint: transformer.ln_f.bias"}},
		{"unexpected tensor", append(slices.Clone(all), extra), nil, []string{"the model does not have: transformer.h.0.attn.q_proj.weight"}},
		{"mis-shaped tensor", append(without("transformer.ln_f.bias"), wrong), nil, []string{"transformer.ln_f.bias", "[17]"}},
		{"untied head without lm_head.weight", all, func(m map[string]any) { m["tie_word_embeddings"] = false }, []string{"missing from the checkpoint: lm_head.weight"}},
		{"unsupported activation", all, func(m map[string]any) { m["activation_function"] = "relu" }, []string{"activation_function", "relu", "gelu_new"}},
		{"cross-attention", all, func(m map[string]any) { m["add_cross_attention"] = true }, []string{"add_cross_attention"}},
		{"a string where a number belongs", all, func(m map[string]any) { m["n_embd"] = "16" }, []string{"n_embd", "integer"}},
		{"heads not dividing n_embd", all, func(m map[string]any) { m["n_head"] = 3 }, []string{"n_embd = 16 is not a multiple of n_head = 3"}},
		// The layer count is compared before the tensor list is made: 10000000 layers would list 120 million
		// names (an out-of-memory crash of tune generate under 8 GB before).
		{"more layers than the checkpoint holds", all, func(m map[string]any) { m["n_layer"] = 10_000_000 },
			[]string{"n_layer 10000000 but the checkpoint", "holds 2 layers (transformer.h.0 to transformer.h.1)", "config.json does not describe these weights"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := writeCheckpoint(t, src, c.hs, c.config)
			_, _, err := LoadPretrained(dir, b, transformer.LoadOptions{})
			if err == nil {
				t.Fatal("loaded")
			}
			// CheckPretrained (tune inspect's check) finds the same problem from the headers.
			if _, cerr := checkPretrained(t, dir); cerr == nil || cerr.Error() != err.Error() {
				t.Errorf("CheckPretrained: %v\nwant LoadPretrained's error %v", cerr, err)
			}
			for _, w := range c.words {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// checkPretrained is CheckPretrained of the checkpoint in dir.
func checkPretrained(t *testing.T, dir string) (*transformer.LoadReport, error) {
	ck, err := loaders.OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	return CheckPretrained(dir, ck)
}
