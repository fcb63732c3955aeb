//go:build cuda

package cuda_test

import (
	"math"
	"strings"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor"
)

// graphState is the tensors of the synthetic training step of the graph tests.
type graphState struct {
	w, g, m, v, x, y, h, ids, norm, flag *tensor.Tensor
	table, emb                           *tensor.Tensor
	n                                    int
}

func newGraphState(t *testing.T, b *cuda.Backend) *graphState {
	s := &graphState{}
	s.w = mustAlloc(t, b, tensor.F32, 64, 64)
	s.g = mustAlloc(t, b, tensor.F32, 64, 64)
	s.m = mustAlloc(t, b, tensor.F32, 64, 64)
	s.v = mustAlloc(t, b, tensor.F32, 64, 64)
	s.x = mustAlloc(t, b, tensor.BF16, 32, 64)
	s.y = mustAlloc(t, b, tensor.F32, 32, 64)
	s.h = mustAlloc(t, b, tensor.BF16, 32, 64)
	s.ids = mustAlloc(t, b, tensor.I32, 32)
	s.norm = mustAlloc(t, b, tensor.I64, 1)
	s.flag = mustAlloc(t, b, tensor.I32, 1)
	s.table = mustAlloc(t, b, tensor.F32, 16, 64)
	s.emb = mustAlloc(t, b, tensor.F32, 32, 64)
	w := make([]float32, 64*64)
	for i := range w {
		w[i] = float32(math.Sin(float64(i))) * 0.1
	}
	if err := b.Upload(s.w, w); err != nil {
		t.Fatal(err)
	}
	for i := range w[:16*64] {
		w[i] = float32(i%7) - 3
	}
	if err := b.Upload(s.table, w[:16*64]); err != nil {
		t.Fatal(err)
	}
	return s
}

// step is a small training step: uploaded ids (the batch), an embedding, a cast, a GEMM, dropout at a
// per-step Philox offset, a weight gradient, the norm and clip on the device, AdamW at a per-step t, a fill.
func (s *graphState) step(b *cuda.Backend, ids []int32) error {
	s.n++
	if err := b.Upload(s.ids, ids); err != nil {
		return err
	}
	if err := b.Embedding(s.emb, s.ids, s.table); err != nil {
		return err
	}
	if err := b.Cast(s.x, s.emb); err != nil {
		return err
	}
	wh := s.h // reuse as the half weight rows: cast the first 32 rows of w
	wv, _ := s.w.View(0, 32, 64)
	if err := b.Cast(wh, wv); err != nil {
		return err
	}
	if err := b.Gemm(tensor.GemmArgs{M: 32, N: 32, K: 64, A: s.x, B: wh, C: s.y, TransB: true, Alpha: 1}); err != nil {
		return err
	}
	yv, _ := s.y.View(0, 32, 32)
	if err := b.Dropout(yv, yv, 0.1, 7, uint64(s.n)<<20); err != nil {
		return err
	}
	gv, _ := s.g.View(0, 32, 64)
	if err := b.Gemm(tensor.GemmArgs{M: 32, N: 64, K: 32, A: yv, B: s.emb, C: gv, TransA: true, Alpha: 1, Beta: 1}); err != nil {
		return err
	}
	if err := b.GlobalNormTo(s.norm, []*tensor.Tensor{s.g}); err != nil {
		return err
	}
	if err := b.ClipByNorm([]*tensor.Tensor{s.g}, s.norm, 1, s.flag); err != nil {
		return err
	}
	if err := b.AdamW(tensor.AdamWArgs{Params: s.w, Grads: s.g, ExpAvg: s.m, ExpAvgSq: s.v, LR: 1e-2, Beta1: 0.9,
		Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: s.n, Skip: s.flag}); err != nil {
		return err
	}
	return b.Fill(s.g, 0)
}

func (s *graphState) weights(t *testing.T, b *cuda.Backend) []float32 {
	out := make([]float32, 3*64*64)
	for i, x := range []*tensor.Tensor{s.w, s.m, s.v} {
		if err := b.Download(out[i*64*64:(i+1)*64*64], x); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestStepGraphIsEager: a step captured as a CUDA graph and replayed (with the dropout offset and AdamW's t
// updated in the graph) leaves the weights and moments bit for bit where eager steps leave them; a step with
// another batch runs eagerly (and still equal), and the graph is captured again; a step that waits for the
// device turns graphs off with the reason.
func TestStepGraphIsEager(t *testing.T) {
	b := openOrSkip(t)
	b.SetKeepIDs(true)
	defer b.SetKeepIDs(false)
	batch := make([]int32, 32)
	for i := range batch {
		batch[i] = int32(i % 16)
	}
	other := append([]int32(nil), batch...)
	other[3] = 9
	eager, graphed := newGraphState(t, b), newGraphState(t, b)
	g := b.NewStepGraph(2)
	defer g.Close()
	const steps = 12
	for i := range steps {
		ids := batch
		if i == 8 {
			ids = other
		}
		if err := eager.step(b, ids); err != nil {
			t.Fatal(err)
		}
		if err := g.Run(func() error { return graphed.step(b, ids) }); err != nil {
			t.Fatalf("step %d: %v (%+v)", i+1, err, g.Stats())
		}
		ew, gw := eager.weights(t, b), graphed.weights(t, b)
		for k := range ew {
			if math.Float32bits(ew[k]) != math.Float32bits(gw[k]) {
				t.Fatalf("step %d (%+v): value %d = %v in the graph, %v eager", i+1, g.Stats(), k, gw[k], ew[k])
			}
		}
	}
	st := g.Stats()
	t.Logf("%+v", st)
	// steps 1-2 warm-up, 3 probe, 4 capture, 5-8 replays, 9 other batch (eager), 10 capture, 11-12 replays
	if st.Off != "" || st.Captures != 2 || st.Replays != 6 || st.Eager != 4 || !strings.Contains(st.Mismatch, "differs") {
		t.Errorf("stats %+v; want 2 captures, 6 replays, 4 eager steps and the batch's mismatch", st)
	}

	w := b.NewStepGraph(0)
	defer w.Close()
	read := make([]float32, 64*64)
	for range 3 {
		if err := w.Run(func() error { return b.Download(read, eager.w) }); err != nil {
			t.Fatal(err)
		}
	}
	if st := w.Stats(); !strings.Contains(st.Off, "waits for the device") || st.Eager != 3 {
		t.Errorf("a step with a Download: %+v; want graphs off, every step eager", st)
	}
}
