package lora

import (
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
)

// TestAutocastSeesEditedAdapters: under FP16 and BF16 autocast, lora_B written through NamedParameters with
// no WeightsUpdated call, and then Merge, are what the next Forward computes with: the logits equal those of
// an adapter given the same values before its first Forward, and merged logits equal the unmerged ones within
// the autocast dtype's rounding (a stale cast of the pre-merge base would add the adapters twice).
func TestAutocastSeesEditedAdapters(t *testing.T) {
	cfg := tinyConfig()
	batch := testBatch(3, 10, cfg.VocabSize, []int{10, 6, 8})
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		for _, p := range []amp.Policy{amp.FP16, amp.BF16} {
			t.Run(p.String(), func(t *testing.T) {
				build := func() *Model {
					m, err := Apply(newBase(t, b, cfg, 28), seqCls(), 28)
					if err != nil {
						t.Fatal(err)
					}
					m.SetPolicy(p)
					return m
				}
				editB := func(m *Model) {
					for _, np := range m.NamedParameters() {
						if strings.Contains(np.Name, "lora_B") {
							v := make([]float32, np.Value.Numel())
							for i := range v {
								v[i] = 0.05 * float32(i%7-3)
							}
							must(t, m.Backend().Upload(np.Value, v))
						}
					}
				}
				want := build()
				editB(want)
				wantLogits := forward(t, want, batch)

				m := build()
				before := forward(t, m, batch) // casts lora_B = 0
				editB(m)
				got := forward(t, m, batch)
				if slices.Equal(before, wantLogits) {
					t.Fatal("the edit does not change the logits")
				}
				if !slices.Equal(got, wantLogits) {
					t.Errorf("after editing lora_B: logits %v, want %v (a stale half copy?)", got, wantLogits)
				}
				must(t, m.Merge())
				merged := forward(t, m, batch)
				if d, _ := tensortest.MaxAbsDiff(merged, got); d > 2e-2 {
					t.Errorf("merged vs unmerged logits differ by %g", d)
				}
			})
		}
	})
}
