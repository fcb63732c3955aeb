package transformer

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/tensor/tensortest"
)

// TestCausalLMHeadChunks: the head's loss, logits and gradients do not depend on the chunking (one chunk of
// all rows vs chunks of 3 rows with a partial last one), and the loss is the host's mean of
// −log softmax(h·Wᵀ)[target] over the supervised targets.
func TestCausalLMHeadChunks(t *testing.T) {
	b := cpu.New()
	const bsz, tt, c, v = 2, 5, 6, 11
	n := bsz * tt
	rng := rand.New(rand.NewPCG(1, 2))
	normal := func(k int) []float32 {
		x := make([]float32, k)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	hv, wv := normal(n*c), normal(v*c)
	labels := make([]int64, n)
	for i := range labels {
		labels[i] = int64(rng.IntN(v))
	}
	labels[3] = -100
	targets, count := ShiftLabels(labels, bsz, tt)
	if count != 2*(tt-1)-1 || targets[tt-1] != -100 || targets[2] != -100 || targets[0] != labels[1] {
		t.Fatalf("ShiftLabels: %v (count %d)", targets, count)
	}
	type result struct {
		sum        float64
		logits, dh []float32
		dw         []float32
	}
	run := func(chunkElems int) result {
		h := tensortest.Upload(t, b, tensor.F32, hv, n, c)
		w := tensortest.Upload(t, b, tensor.F32, wv, v, c)
		g := tensortest.Upload(t, b, tensor.F32, make([]float32, v*c), v, c)
		head := CausalLMHead{Weight: &Param{Value: w, Grad: g, Trainable: true}, V: v, C: c, ChunkElems: chunkElems}
		a := NewArena(b)
		if err := a.Carve(func(a *Arena) error { head.Layout(a, n, tensor.F32); return nil }); err != nil {
			t.Fatal(err)
		}
		p := &Pass{Backend: b, Policy: amp.Policy{}}
		logits := make([]float32, n*v)
		sum, k, err := head.Forward(p, h, targets, logits)
		if err != nil {
			t.Fatal(err)
		}
		if k != count {
			t.Fatalf("count %d, want %d", k, count)
		}
		dh := tensortest.Alloc(t, b, tensor.F32, n, c)
		if err := head.Backward(p, dh, 0.5); err != nil {
			t.Fatal(err)
		}
		return result{sum, logits, tensortest.Download(t, b, dh), tensortest.Download(t, b, g)}
	}
	whole, chunked := run(0), run(3*v)
	var want float64
	for i, tg := range targets {
		if tg == -100 {
			continue
		}
		row := whole.logits[i*v : (i+1)*v]
		var z float64
		for _, x := range row {
			z += math.Exp(float64(x))
		}
		want += math.Log(z) - float64(row[tg])
	}
	if math.Abs(whole.sum-want) > 1e-5*math.Abs(want) {
		t.Fatalf("loss sum %v, host %v", whole.sum, want)
	}
	if math.Abs(chunked.sum-whole.sum) > 1e-6*math.Abs(want) {
		t.Fatalf("chunked loss sum %v, one chunk %v", chunked.sum, whole.sum)
	}
	for _, f := range []struct {
		name string
		a, b []float32
	}{{"logits", whole.logits, chunked.logits}, {"dh", whole.dh, chunked.dh}, {"dW", whole.dw, chunked.dw}} {
		for i := range f.a {
			if math.Abs(float64(f.a[i]-f.b[i])) > 1e-5*(1+math.Abs(float64(f.a[i]))) {
				t.Fatalf("%s[%d]: one chunk %v, chunks of 3 rows %v", f.name, i, f.a[i], f.b[i])
			}
		}
	}
	// A chunk without a supervised target is skipped (no GEMM) yet gives the same loss and zero gradient: rows
	// 0-2 of the chunked run hold the first two targets and the ignored one, so mask them all.
	masked := append([]int64(nil), targets...)
	masked[0], masked[1] = -100, -100
	for _, chunkElems := range []int{0, 3 * v} {
		h := tensortest.Upload(t, b, tensor.F32, hv, n, c)
		w := tensortest.Upload(t, b, tensor.F32, wv, v, c)
		g := tensortest.Upload(t, b, tensor.F32, make([]float32, v*c), v, c)
		head := CausalLMHead{Weight: &Param{Value: w, Grad: g, Trainable: true}, V: v, C: c, ChunkElems: chunkElems}
		a := NewArena(b)
		if err := a.Carve(func(a *Arena) error { head.Layout(a, n, tensor.F32); return nil }); err != nil {
			t.Fatal(err)
		}
		p := &Pass{Backend: b}
		sum, k, err := head.Forward(p, h, masked, nil)
		if err != nil {
			t.Fatal(err)
		}
		var want float64
		for i, tg := range masked {
			if tg != -100 {
				row := whole.logits[i*v : (i+1)*v]
				var z float64
				for _, x := range row {
					z += math.Exp(float64(x))
				}
				want += math.Log(z) - float64(row[tg])
			}
		}
		if k != count-2 || math.Abs(sum-want) > 1e-5*math.Abs(want) {
			t.Fatalf("chunkElems %d, masked: loss sum %v count %d, want %v and %d", chunkElems, sum, k, want, count-2)
		}
		dh := tensortest.Upload(t, b, tensor.F32, normal(n*c), n, c) // garbage: skipped rows must be zeroed
		if err := head.Backward(p, dh, 0.5); err != nil {
			t.Fatal(err)
		}
		for i, x := range tensortest.Download(t, b, dh)[:3*c] {
			if x != 0 {
				t.Fatalf("chunkElems %d: dh[%d] = %v in a row without a target, want 0", chunkElems, i, x)
			}
		}
	}
	// The last position of each row predicts nothing: its gradient is zero.
	for j := 0; j < c; j++ {
		if whole.dh[(tt-1)*c+j] != 0 {
			t.Fatalf("dh at the last position of row 0 = %v, want 0", whole.dh[(tt-1)*c:tt*c])
		}
	}
}

// TestCausalLMHeadCorrect: Correct counts the supervised targets equal to the arg-max of their row's logits
// (the host's count over the logits), in one chunk and in chunks of 3 rows with a chunk of ignored targets.
func TestCausalLMHeadCorrect(t *testing.T) {
	b := cpu.New()
	const n, c, v = 10, 6, 11
	rng := rand.New(rand.NewPCG(3, 4))
	normal := func(k int) []float32 {
		x := make([]float32, k)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	hv, wv := normal(n*c), normal(v*c)
	run := func(chunkElems int, targets []int64) (logits []float32, correct, count int) {
		h := tensortest.Upload(t, b, tensor.F32, hv, n, c)
		w := tensortest.Upload(t, b, tensor.F32, wv, v, c)
		head := CausalLMHead{Weight: &Param{Value: w}, V: v, C: c, ChunkElems: chunkElems}
		a := NewArena(b)
		if err := a.Carve(func(a *Arena) error { head.Layout(a, n, tensor.F32); return nil }); err != nil {
			t.Fatal(err)
		}
		logits = make([]float32, n*v)
		_, count, err := head.Forward(&Pass{Backend: b}, h, targets, logits)
		if err != nil {
			t.Fatal(err)
		}
		return logits, head.Correct(), count
	}
	none := make([]int64, n)
	for i := range none {
		none[i] = -100
	}
	logits, _, _ := run(0, none)
	targets := make([]int64, n)
	want := 0
	for i := range targets {
		row := logits[i*v : (i+1)*v]
		best := 0
		for j := range row {
			if row[j] > row[best] {
				best = j
			}
		}
		switch {
		case i < 3:
			targets[i] = -100 // the first chunk of 3 rows has no target
		case i%3 == 0:
			targets[i] = int64((best + 1) % v)
		default:
			targets[i] = int64(best)
			want++
		}
	}
	for _, chunkElems := range []int{0, 3 * v} {
		_, correct, count := run(chunkElems, targets)
		if correct != want || count != n-3 {
			t.Errorf("chunkElems %d: Correct %d of %d, want %d of %d", chunkElems, correct, count, want, n-3)
		}
	}
}

// TestSupervisedTargetsMatchesShiftLabels: the count without the targets equals ShiftLabels' count, over rows
// with −100 at the first, last and inner positions.
func TestSupervisedTargetsMatchesShiftLabels(t *testing.T) {
	labels := []int64{-100, 4, -100, 7, 3, 9, 2, -100, -100, 1, 5, 6}
	for _, rows := range []int{1, 2, 3, 4} {
		cols := len(labels) / rows
		if _, want := ShiftLabels(labels, rows, cols); SupervisedTargets(labels, cols) != want {
			t.Errorf("%d×%d: SupervisedTargets %d, ShiftLabels %d", rows, cols, SupervisedTargets(labels, cols), want)
		}
	}
}
