package transformer

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/trainer"
)

func TestForwardBackwardRuns(t *testing.T) {
	b := cpuBackend()
	m := newTestModel(t, b, tinyConfig(), 1)
	batch := testBatch(3, 7, 50, 3, []int{7, 4, 5})
	out := step(t, m, batch, 9)
	if len(out.Logits) != 9 || math.IsNaN(float64(out.Loss)) {
		t.Fatalf("logits %v loss %v", out.Logits, out.Loss)
	}
	t.Logf("logits %v loss %v", out.Logits, out.Loss)
	_, grads, segs := m.Trainable()
	n, err := b.GlobalNorm([]*tensor.Tensor{grads})
	_ = segs
	if err != nil || n == 0 {
		t.Fatalf("grad norm %v err %v", n, err)
	}
	_ = trainer.Output{}
}
