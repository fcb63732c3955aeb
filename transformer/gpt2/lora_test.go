package gpt2

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/transformer"
)

// TestLoRADefaultsForGPT2: an unset target_modules means PEFT's c_attn for GPT-2, fan_in_fan_out becomes
// true with PEFT's Conv1D warning, training moves only the adapters, a merged model gives the adapted logits,
// and adapter_config.json says fan_in_fan_out true and target_modules ["c_attn"].
func TestLoRADefaultsForGPT2(t *testing.T) {
	b := cpu.New()
	cfg := tinyConfig()
	base := newTestModel(t, b, cfg, 11)
	lc := lora.DefaultConfig()
	lc.TaskType = "CAUSAL_LM"
	m, err := lora.Apply(base, lc, 5)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"transformer.h.0.attn.c_attn", "transformer.h.1.attn.c_attn"}; !slices.Equal(m.Targets(), want) {
		t.Fatalf("targets %v, want %v", m.Targets(), want)
	}
	if !m.Config().FanInFanOut || !slices.Contains(m.Warnings, lora.FanInFanOutConv1DWarning) {
		t.Fatalf("fan_in_fan_out %v, warnings %q", m.Config().FanInFanOut, m.Warnings)
	}
	// Give B non-zero values so the adapter changes the output, then check merge.
	for _, path := range m.Targets() {
		bv := make([]float32, m.Adapter(path).B.Value.Numel())
		for i := range bv {
			bv[i] = 0.05 * float32(math.Sin(float64(i)))
		}
		if err := b.Upload(m.Adapter(path).B.Value, bv); err != nil {
			t.Fatal(err)
		}
	}
	base.WeightsUpdated()
	batch := testBatch(2, 6, cfg.VocabSize, []int{6, 4})
	adapted := logitsOf(t, m, batch)
	out, err := m.Forward(batch, transformer.ForwardOptions{Train: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Backward(1); err != nil {
		t.Fatal(err)
	}
	if math.IsNaN(float64(out.Loss)) {
		t.Fatal("NaN loss")
	}
	for _, np := range m.NamedParameters() {
		want := slices.Contains([]string{"lora_A", "lora_B"}, adapterPart(np.Name))
		if np.Trainable != want {
			t.Errorf("%s trainable %v, want %v", np.Name, np.Trainable, want)
		}
	}
	dir := t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	var ac map[string]any
	data, err := os.ReadFile(filepath.Join(dir, lora.AdapterConfigName))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &ac); err != nil {
		t.Fatal(err)
	}
	if ac["fan_in_fan_out"] != true || ac["task_type"] != "CAUSAL_LM" {
		t.Errorf("adapter_config.json: fan_in_fan_out %v, task_type %v", ac["fan_in_fan_out"], ac["task_type"])
	}
	if tm, _ := json.Marshal(ac["target_modules"]); string(tm) != `["c_attn"]` {
		t.Errorf("adapter_config.json target_modules %s", tm)
	}
	if err := m.Merge(); err != nil {
		t.Fatal(err)
	}
	merged := logitsOf(t, m, batch)
	for i := range merged {
		if math.Abs(float64(merged[i]-adapted[i])) > 1e-5*(1+math.Abs(float64(adapted[i]))) {
			t.Fatalf("merged logit %d = %v, adapted %v", i, merged[i], adapted[i])
		}
	}
	if slices.Equal(adapted, logitsOf(t, newTestModel(t, b, cfg, 11), batch)) {
		t.Fatal("the adapter did not change the logits")
	}
}

// adapterPart returns "lora_A" or "lora_B" for an adapter parameter name, else "".
func adapterPart(name string) string {
	for _, p := range []string{"lora_A", "lora_B"} {
		if slices.Contains(strings.Split(name, "."), p) {
			return p
		}
	}
	return ""
}
