package bert

import (
	"slices"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/detweights"
)

// editedNames are the weights the staleness tests change from outside a training step.
var editedNames = []string{"bert.encoder.layer.0.attention.self.query.weight", "classifier.weight", "classifier.bias"}

// editWeights writes detweights(seed) into editedNames through the public Parameter API, without WeightsUpdated.
func editWeights(t *testing.T, m *BertForSequenceClassification, seed uint64) {
	t.Helper()
	for _, name := range editedNames {
		p, ok := m.Parameter(name)
		if !ok {
			t.Fatalf("no parameter %s", name)
		}
		if err := m.Backend().Upload(p.Value, detweights.Values(seed, name, p.Value.Shape)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAutocastSeesEditedWeights changes master weights from outside a step (Parameter().Value, then Load) with
// no WeightsUpdated call: the next autocast Forward must compute with the new values, bit for bit what a model
// built with them from the start gives. ReuseWeightCasts, the trainer's promise that nothing changed, keeps the
// old copies, which proves the test can tell the two apart.
func TestAutocastSeesEditedWeights(t *testing.T) {
	cfg := tinyConfig()
	batch := testBatch(3, 8, cfg.VocabSize, cfg.NumLabels(), []int{8, 5, 2})
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		for _, p := range []amp.Policy{amp.FP16, amp.BF16} {
			t.Run(p.String(), func(t *testing.T) {
				forward := func(m *BertForSequenceClassification, reuse bool) []float32 {
					t.Helper()
					out, err := m.Forward(batch, transformer.ForwardOptions{ReuseWeightCasts: reuse, HostLogits: true})
					if err != nil {
						t.Fatal(err)
					}
					return out.Logits
				}
				m := newTestModel(t, b, cfg, 5)
				m.SetPolicy(p)
				before := forward(m, false)

				want := newTestModel(t, b, cfg, 5)
				editWeights(t, want, 9)
				want.SetPolicy(p)
				wantLogits := forward(want, false)
				if slices.Equal(before, wantLogits) {
					t.Fatal("the edit does not change the logits; the test cannot tell stale from fresh")
				}

				editWeights(t, m, 9)
				if got := forward(m, true); !slices.Equal(got, before) {
					t.Errorf("ReuseWeightCasts after an edit: logits changed; the flag should keep the old casts")
				}
				if got := forward(m, false); !slices.Equal(got, wantLogits) {
					t.Errorf("after editing %v through Parameter().Value: logits %v, want %v (a stale half copy?)", editedNames, got, wantLogits)
				}

				// Load: the saved model of seed 5 replaces the edited weights.
				dir := t.TempDir()
				if err := newTestModel(t, b, cfg, 5).Save(dir); err != nil {
					t.Fatal(err)
				}
				forward(m, false) // cache the edited weights' copies once more
				if err := m.Load(dir); err != nil {
					t.Fatal(err)
				}
				if got := forward(m, false); !slices.Equal(got, before) {
					t.Errorf("after Load: logits %v, want the saved model's %v", got, before)
				}
			})
		}
	})
}
