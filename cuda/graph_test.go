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
	scal, row                            *tensor.Tensor // AdamW's scalars on the device (F32 (1, 3)) and their row (I32 (1), 0)
	n                                    int
	variant                              bool // the second GEMM overwrites instead of accumulating
	base                                 bool // dropout relative to the Philox base, AdamW from scal (a step that needs no patching)
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
	s.scal = mustAlloc(t, b, tensor.F32, 1, 3)
	s.row = mustAlloc(t, b, tensor.I32, 1)
	if err := b.Upload(s.row, []int32{0}); err != nil {
		t.Fatal(err)
	}
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
	if err := b.Dropout(yv, yv, 0.1, 7, uint64(s.n)<<20+5); err != nil {
		return err
	}
	gv, _ := s.g.View(0, 32, 64)
	beta := float32(1)
	if s.variant {
		beta = 0
	}
	if err := b.Gemm(tensor.GemmArgs{M: 32, N: 64, K: 32, A: yv, B: s.emb, C: gv, TransA: true, Alpha: 1, Beta: beta}); err != nil {
		return err
	}
	if err := b.GlobalNormTo(s.norm, []*tensor.Tensor{s.g}); err != nil {
		return err
	}
	if err := b.ClipByNorm([]*tensor.Tensor{s.g}, s.norm, 1, s.flag); err != nil {
		return err
	}
	a := tensor.AdamWArgs{Params: s.w, Grads: s.g, ExpAvg: s.m, ExpAvgSq: s.v, LR: 1e-2, Beta1: 0.9,
		Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: s.n, Skip: s.flag}
	if s.base { // the scalars were uploaded before the step (prepare)
		a.Table, a.Row = s.scal, s.row
	}
	if err := b.AdamW(a); err != nil {
		return err
	}
	return b.Fill(s.g, 0)
}

// prepare is what a training loop does before a step that a graph replays unpatched: the Philox base (the
// step's dropout offset, less the in-step delta) and AdamW's scalars of step n+1 on the device.
func (s *graphState) prepare(t *testing.T, b *cuda.Backend) {
	if err := b.SetPhiloxBase(uint64(s.n+1) << 20); err != nil {
		t.Fatal(err)
	}
	r := tensor.AdamWScalars(1e-2, 0.9, 0.999, 0.01, s.n+1)
	if err := b.Upload(s.scal, r[:]); err != nil {
		t.Fatal(err)
	}
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
// updated in the graph's kernel nodes) leaves the weights and moments bit for bit where eager steps leave
// them; a step with another batch replays too (its upload goes through the graph's slot); a step with another
// GEMM runs eagerly (and still equal), and the graph is captured again; a step that waits for the device turns
// graphs off with the reason.
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
	const steps = 14
	for i := range steps {
		ids := batch
		if i == 8 {
			ids = other
		}
		eager.variant, graphed.variant = i == 10, i == 10
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
	// steps 1-2 warm-up, 3 probe, 4 capture, 5-10 replays (9: another batch), 11 another GEMM (eager),
	// 12 capture, 13-14 replays; the dropout's offset and AdamW's step patched in every replay
	if st.Off != "" || st.Captures != 2 || st.Replays != 8 || st.Eager != 4 || !strings.Contains(st.Mismatch, "differs") ||
		st.Patched < 16 {
		t.Errorf("stats %+v; want 2 captures, 8 replays, 4 eager steps, the GEMM's mismatch and two patched kernels a replay", st)
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

// TestStepGraphReplaysUnpatched: with the Philox base and AdamW's scalars set on the device before each step,
// every replay launches the captured graph without updating one node, and the weights and moments stay bit
// for bit those of eager steps given absolute offsets and host scalars (base 0), batch changes included. With
// Verify 1 the later replays launch first and compare after: a step that differs from its capture then fails
// and turns graphs off.
func TestStepGraphReplaysUnpatched(t *testing.T) {
	b := openOrSkip(t)
	b.SetKeepIDs(true)
	defer b.SetKeepIDs(false)
	defer b.SetPhiloxBase(0)
	batch := make([]int32, 32)
	for i := range batch {
		batch[i] = int32(i % 16)
	}
	for _, verify := range []int{-1, 1} {
		eager, graphed := newGraphState(t, b), newGraphState(t, b)
		graphed.base = true
		g := b.NewStepGraph(2)
		g.Verify = verify
		const steps = 12
		for i := range steps {
			ids := batch
			if verify < 0 {
				ids = append([]int32(nil), batch...)
				ids[i%32] = int32(i%16) ^ 1 // another batch every step
			}
			if err := b.SetPhiloxBase(0); err != nil {
				t.Fatal(err)
			}
			if err := eager.step(b, ids); err != nil {
				t.Fatal(err)
			}
			graphed.prepare(t, b)
			if err := g.Run(func() error { return graphed.step(b, ids) }); err != nil {
				t.Fatalf("verify %d, step %d: %v (%+v)", verify, i+1, err, g.Stats())
			}
			ew, gw := eager.weights(t, b), graphed.weights(t, b)
			for k := range ew {
				if math.Float32bits(ew[k]) != math.Float32bits(gw[k]) {
					t.Fatalf("verify %d, step %d (%+v): value %d = %v in the graph, %v eager", verify, i+1, g.Stats(), k, gw[k], ew[k])
				}
			}
		}
		st := g.Stats()
		t.Logf("verify %d: %+v", verify, st)
		if st.Off != "" || st.Captures != 1 || st.Replays != steps-4 || st.Patched != 0 || st.Mismatch != "" {
			t.Errorf("verify %d: stats %+v; want 1 capture, %d replays and no node patched", verify, st, steps-4)
		}
		if verify > 0 { // a trusted replay of another batch: the graph ran the captured bytes, an error
			other := append([]int32(nil), batch...)
			other[3] = 9
			graphed.prepare(t, b)
			err := g.Run(func() error { return graphed.step(b, other) })
			if err == nil || !strings.Contains(err.Error(), "differed") || !strings.Contains(g.Stats().Off, "differed") {
				t.Errorf("a trusted replay of another batch: %v (%+v); want an error and graphs off", err, g.Stats())
			}
		}
		g.Close()
	}
}
