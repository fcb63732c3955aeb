//go:build cuda

package cuda_test

import (
	"errors"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
)

// TestDeviceStepScalars: GlobalNormTo, ClipByNorm and AdamWArgs.Skip on the GPU, bit for bit the host path
// (the op suite's check, run alone), and without a host wait.
func TestDeviceStepScalars(t *testing.T) {
	b := openOrSkip(t)
	tensortest.CheckDeviceStep(t, b)
	g := mustAlloc(t, b, tensor.F32, 1000)
	norm := mustAlloc(t, b, tensor.I64, 1)
	flag := mustAlloc(t, b, tensor.I32, 1)
	if err := b.Synchronize(); err != nil {
		t.Fatal(err)
	}
	w := waits(b)
	if err := b.GlobalNormTo(norm, []*tensor.Tensor{g}); err != nil {
		t.Fatal(err)
	}
	if err := b.ClipByNorm([]*tensor.Tensor{g}, norm, 1, flag); err != nil {
		t.Fatal(err)
	}
	if got := waits(b) - w; got != 0 {
		t.Errorf("GlobalNormTo + ClipByNorm: %d host waits, want 0", got)
	}
}

// TestClippedAdamW: AdamW clipping the gradients as it reads them (AdamWArgs.GradNorm) on the GPU, bit for bit
// ClipByNorm then AdamW (tensortest.CheckClippedAdamW: the scalar, float4 and head/tail paths, a table row,
// non-finite norms), and a step of GlobalNormTo, the flag and the clipping AdamW makes no host wait.
func TestClippedAdamW(t *testing.T) {
	b := openOrSkip(t)
	tensortest.CheckClippedAdamW(t, b)
	g, p, m, v := mustAlloc(t, b, tensor.F32, 1000), mustAlloc(t, b, tensor.F32, 1000), mustAlloc(t, b, tensor.F32, 1000), mustAlloc(t, b, tensor.F32, 1000)
	norm, flag := mustAlloc(t, b, tensor.I64, 1), mustAlloc(t, b, tensor.I32, 1)
	if err := b.Synchronize(); err != nil {
		t.Fatal(err)
	}
	w := waits(b)
	if err := b.GlobalNormTo(norm, []*tensor.Tensor{g}); err != nil {
		t.Fatal(err)
	}
	if err := b.ClipByNorm(nil, norm, 0, flag); err != nil {
		t.Fatal(err)
	}
	if err := b.AdamW(tensor.AdamWArgs{Params: p, Grads: g, ExpAvg: m, ExpAvgSq: v, LR: 1e-3, Beta1: 0.9, Beta2: 0.999,
		Eps: 1e-8, Step: 1, Skip: flag, GradNorm: norm, MaxGradNorm: 1}); err != nil {
		t.Fatal(err)
	}
	if got := waits(b) - w; got != 0 {
		t.Errorf("GlobalNormTo + flag + clipping AdamW: %d host waits, want 0", got)
	}
}

// TestDeviceScalerOps: FP16 loss scaling's ops on the device (tensortest.CheckDeviceScaler) match the host
// arithmetic bit for bit, and a step of them — the unscale with its flag, AdamW from a table row, the scale
// update — makes no host wait.
func TestDeviceScalerOps(t *testing.T) {
	b := openOrSkip(t)
	tensortest.CheckDeviceScaler(t, b)
	g, p, m, v := mustAlloc(t, b, tensor.F32, 1000), mustAlloc(t, b, tensor.F32, 1000), mustAlloc(t, b, tensor.F32, 1000), mustAlloc(t, b, tensor.F32, 1000)
	scale, found, tracker, steps := mustAlloc(t, b, tensor.F32, 1), mustAlloc(t, b, tensor.I32, 1), mustAlloc(t, b, tensor.I32, 1), mustAlloc(t, b, tensor.I32, 1)
	table := mustAlloc(t, b, tensor.F32, 4, 3)
	if err := b.Fill(scale, 65536); err != nil {
		t.Fatal(err)
	}
	if err := b.Synchronize(); err != nil {
		t.Fatal(err)
	}
	w := waits(b)
	if err := b.NonFiniteCheckAndUnscaleOnDevice([]*tensor.Tensor{g}, scale, found); err != nil {
		t.Fatal(err)
	}
	if err := b.AdamW(tensor.AdamWArgs{Params: p, Grads: g, ExpAvg: m, ExpAvgSq: v, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8,
		Skip: found, Table: table, Row: steps}); err != nil {
		t.Fatal(err)
	}
	if err := b.UpdateScale(tensor.UpdateScaleArgs{Scale: scale, GrowthTracker: tracker, FoundInf: found, Steps: steps,
		GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 2000}); err != nil {
		t.Fatal(err)
	}
	if got := waits(b) - w; got != 0 {
		t.Errorf("an FP16 optimizer step on the device: %d host waits, want 0", got)
	}
}

// mustAlloc allocates a zero-filled tensor on b, failing the test on error.
func mustAlloc(t *testing.T, b *cuda.Backend, dt tensor.DType, shape ...int) *tensor.Tensor {
	t.Helper()
	x, err := b.Alloc(dt, shape...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Free(x) })
	return x
}

// waits is the total of b.HostWaits.
func waits(b *cuda.Backend) int64 {
	var n int64
	for _, v := range b.HostWaits() {
		n += v
	}
	return n
}

// TestUploadedIDsNeedNoHostWait: the id-taking ops check ids that Upload wrote from its host copy (no wait),
// still refuse a bad id before writing anything, and read the device again once something else wrote the ids.
func TestUploadedIDsNeedNoHostWait(t *testing.T) {
	b := openOrSkip(t)
	b.SetKeepIDs(true)
	defer b.SetKeepIDs(false)
	const v, c, n = 7, 8, 5
	table := mustAlloc(t, b, tensor.F32, v, c)
	host := make([]float32, v*c)
	for i := range host {
		host[i] = float32(i)
	}
	if err := b.Upload(table, host); err != nil {
		t.Fatal(err)
	}
	ids := mustAlloc(t, b, tensor.I32, n)
	out := mustAlloc(t, b, tensor.F32, n, c)
	dtable := mustAlloc(t, b, tensor.F32, v, c)
	logits := mustAlloc(t, b, tensor.F32, n, v)
	losses := mustAlloc(t, b, tensor.F32, n)
	labels := mustAlloc(t, b, tensor.I64, n)
	if err := b.Synchronize(); err != nil {
		t.Fatal(err)
	}
	before := waits(b)
	if err := b.Upload(ids, []int32{3, 0, 6, 3, 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.Upload(labels, []int64{1, -100, 6, 0, 2}); err != nil {
		t.Fatal(err)
	}
	if err := b.Embedding(out, ids, table); err != nil {
		t.Fatal(err)
	}
	if err := b.EmbeddingBackward(dtable, ids, out); err != nil {
		t.Fatal(err)
	}
	count, err := b.CrossEntropy(losses, logits, labels, -100)
	if err != nil || count != 4 {
		t.Fatalf("CrossEntropy count %d, %v; want 4", count, err)
	}
	if err := b.CrossEntropyBackward(logits, logits, labels, 1, -100, nil); err != nil {
		t.Fatal(err)
	}
	if got := waits(b) - before; got != 0 {
		t.Errorf("uploaded ids: %d host waits, want 0 (%v)", got, b.HostWaits())
	}
	got := make([]float32, n*c)
	if err := b.Download(got, out); err != nil {
		t.Fatal(err)
	}
	for i, id := range []int{3, 0, 6, 3, 1} {
		if got[i*c] != float32(id*c) {
			t.Fatalf("row %d = %v, want table row %d", i, got[i*c:i*c+c], id)
		}
	}
	if got := waits(b) - before; got != 1 {
		t.Errorf("after one Download: %d host waits, want 1", got)
	}

	// A bad id is refused from the host copy, before anything is written.
	if err := b.Upload(ids, []int32{3, 0, 7, 3, 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.Embedding(out, ids, table); !errors.Is(err, tensor.ErrArgument) {
		t.Errorf("Embedding with id 7 of 7: %v, want ErrArgument", err)
	}

	// Written by a device op (Fill): the host copy is gone, the op downloads the device values.
	if err := b.Fill(ids, 2); err != nil {
		t.Fatal(err)
	}
	w := waits(b)
	if err := b.Embedding(out, ids, table); err != nil {
		t.Fatal(err)
	}
	if got := waits(b) - w; got != 1 {
		t.Errorf("ids written by Fill: %d host waits, want 1 (the download)", got)
	}
	if err := b.Download(got, out); err != nil {
		t.Fatal(err)
	}
	if got[0] != float32(2*c) || got[(n-1)*c] != float32(2*c) {
		t.Errorf("after Fill(ids, 2): rows start %v, %v; want %v", got[0], got[(n-1)*c], 2*c)
	}

	// A view inside an upload is not the upload: downloaded, and checked all the same.
	if err := b.Upload(ids, []int32{1, 2, 3, 4, 5}); err != nil {
		t.Fatal(err)
	}
	part, err := ids.View(1, 3)
	if err != nil {
		t.Fatal(err)
	}
	out3, err := out.View(0, 3, c)
	if err != nil {
		t.Fatal(err)
	}
	w = waits(b)
	if err := b.Embedding(out3, part, table); err != nil {
		t.Fatal(err)
	}
	if got := waits(b) - w; got != 1 {
		t.Errorf("a view of an upload: %d host waits, want 1", got)
	}

	// Freed and allocated again: nothing of the old copy survives.
	b.Free(ids)
	ids2 := mustAlloc(t, b, tensor.I32, n)
	w = waits(b)
	if err := b.Embedding(out, ids2, table); err != nil { // zero-filled: every id 0
		t.Fatal(err)
	}
	if got := waits(b) - w; got != 1 {
		t.Errorf("a fresh allocation: %d host waits, want 1", got)
	}
}

// TestIDsWithoutHostCopies: with the copies off (TUNE_SYNC_FREE=0) every id op downloads.
func TestIDsWithoutHostCopies(t *testing.T) {
	b := openOrSkip(t)
	b.SetKeepIDs(false)
	table := mustAlloc(t, b, tensor.F32, 4, 4)
	ids := mustAlloc(t, b, tensor.I32, 3)
	out := mustAlloc(t, b, tensor.F32, 3, 4)
	if err := b.Upload(ids, []int32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	w := waits(b)
	if err := b.Embedding(out, ids, table); err != nil {
		t.Fatal(err)
	}
	if got := waits(b) - w; got != 1 {
		t.Errorf("%d host waits, want 1", got)
	}
}
