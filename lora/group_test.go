package lora

import (
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/tensor/tensortest"
)

// TestDecoderAdapterGroups: PEFT's all-linear adapters (non-zero lora_B) on the golden Llama train to the
// same loss and gradients with q/k/v and gate/up run as groups (stacked lora_A: one GEMM each for x·Aᵀ, dA
// and the input gradient) as with every adapter on its own, in FP32 (1e-5) and BF16 autocast (BF16's
// tolerance), and the groups are in use.
func TestDecoderAdapterGroups(t *testing.T) {
	for _, pol := range []amp.Policy{amp.FP32, amp.BF16} {
		var losses []float32
		var grads [][][]float32
		var names []string
		for _, off := range []bool{true, false} {
			groupingOff = off
			b := cpu.New()
			base, batch := decoderBase(t, b)
			batch.Labels = make([]int64, len(batch.InputIDs))
			for i, id := range batch.InputIDs {
				batch.Labels[i] = int64(id)
			}
			m, err := LoadAdapter(base, testutil.Testdata(t, "decoder", "peft", "all"))
			if err != nil {
				t.Fatal(err)
			}
			m.SetPolicy(pol)
			losses = append(losses, step(t, m, batch, 11))
			grouped := 0
			for _, l := range base.Layers {
				if l.GroupedAdapters() {
					grouped++
				}
			}
			if want := len(base.Layers); !off && grouped != want {
				t.Fatalf("%d of %d layers ran their adapters grouped", grouped, want)
			}
			var g [][]float32
			names = names[:0]
			for _, np := range m.NamedParameters() {
				if np.Trainable {
					names, g = append(names, np.Name), append(g, download(t, m, np))
				}
			}
			grads = append(grads, g)
		}
		groupingOff = false
		tol := 1e-5
		if pol != amp.FP32 {
			tol = tensortest.Tolerance(pol.GemmDType())
		}
		if e, _ := tensortest.RelErr([]float32{losses[1]}, []float32{losses[0]}); e > tol {
			t.Errorf("%v: loss %v grouped, %v per adapter", pol, losses[1], losses[0])
		}
		if len(names) == 0 {
			t.Fatal("no trainable parameters")
		}
		for i, name := range names {
			if e, j := tensortest.RelErr(grads[1][i], grads[0][i]); e > tol {
				t.Errorf("%v %s: gradient relative error %.3g > %.3g at %d", pol, name, e, tol, j)
			}
		}
	}
}
