package bert

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer/transformertest"
)

// TestFrozenLayerStoredInHalf: full fine-tuning with layer 0 frozen under BF16. StoreFrozenIn(BF16) stores
// layer 0's projections in BF16 (its LayerNorms and the embeddings stay F32); a step's loss and gradients equal
// the FP32-master model's bit for bit; Save writes the stored weights as their BF16-rounded values widened to
// F32 and every other tensor exactly; SetTrainable making layer 0 train again widens those rounded values into
// FP32 masters with gradients.
func TestFrozenLayerStoredInHalf(t *testing.T) {
	b := cpuBackend()
	cfg := tinyConfig()
	batch := testBatch(3, 8, cfg.VocabSize, 3, []int{8, 5, 6})
	frozen := func(name string) bool { return strings.HasPrefix(name, "bert.encoder.layer.0.") }
	build := func() *BertForSequenceClassification {
		m := newTestModel(t, b, cfg, 17)
		if err := m.SetTrainable(func(name string) bool { return !frozen(name) }); err != nil {
			t.Fatal(err)
		}
		m.SetPolicy(amp.BF16)
		return m
	}
	ref, m := build(), build()
	if err := m.StoreFrozenIn(tensor.BF16); err != nil {
		t.Fatal(err)
	}
	original := map[string][]float32{}
	for _, np := range ref.NamedParameters() {
		v := make([]float32, np.Value.Numel())
		if err := b.Download(v, np.Value); err != nil {
			t.Fatal(err)
		}
		original[np.Name] = v
	}
	half := 0
	for _, np := range m.NamedParameters() {
		isProj := frozen(np.Name) && !strings.Contains(np.Name, "LayerNorm")
		if want := map[bool]tensor.DType{true: tensor.BF16, false: tensor.F32}[isProj]; np.Value.DType != want {
			t.Errorf("%s stored in %v, want %v", np.Name, np.Value.DType, want)
		}
		if isProj {
			half++
		}
	}
	if half != 12 { // query, key, value, attention.output.dense, intermediate.dense, output.dense: weight + bias
		t.Errorf("%d tensors stored in BF16, want 12", half)
	}
	lr, lm := transformertest.Step(t, ref, batch, 3), transformertest.Step(t, m, batch, 3)
	if lr.Loss != lm.Loss {
		t.Errorf("loss %v, want %v", lm.Loss, lr.Loss)
	}
	_, gr, _ := ref.Trainable()
	_, gm, _ := m.Trainable()
	hr, hm := make([]float32, gr.Numel()), make([]float32, gm.Numel())
	if err := b.Download(hr, gr); err != nil {
		t.Fatal(err)
	}
	if err := b.Download(hm, gm); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(hr, hm) {
		t.Error("gradients differ from the FP32-master model's")
	}
	dir := t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	ck, err := loaders.OpenCheckpoint(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	for _, np := range m.NamedParameters() {
		ht, err := ck.Get(np.Name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ht.Float32()
		if err != nil {
			t.Fatal(err)
		}
		want := original[np.Name]
		if np.Value.DType == tensor.BF16 {
			h := make([]uint16, len(want))
			tensor.NarrowHalf(h, want, tensor.BF16)
			want = make([]float32, len(h))
			tensor.WidenHalf(want, h, tensor.BF16)
		}
		if ht.DType != tensor.F32 || !slices.Equal(got, want) {
			t.Errorf("%s saved as %v with values ≠ the expected (rounded for stored weights, exact otherwise)", np.Name, ht.DType)
		}
	}
	if err := m.SetTrainable(func(string) bool { return true }); err != nil {
		t.Fatal(err)
	}
	for _, np := range m.NamedParameters() {
		if np.Value.DType != tensor.F32 || np.Grad == nil {
			t.Errorf("%s: %v, grad %v after SetTrainable(all)", np.Name, np.Value.DType, np.Grad != nil)
		}
	}
}
