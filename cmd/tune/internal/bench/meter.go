package bench

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tune-ml/tune/internal/hostmem"
	"github.com/tune-ml/tune/tensor"
)

// eventTimer is implemented by a backend that times queued work with device events (cuda.Backend.Time).
type eventTimer interface {
	Time(fn func() error) (ms float64, err error)
}

// gatedTimer is implemented by a backend that can time the device work of queued ops without the host's gaps
// between them (cuda.Backend.TimeGated): the device starts on the work only once it is all queued, and the host
// time of queueing it is returned beside it. timedOut reports an op that made the host wait for the device.
type gatedTimer interface {
	TimeGated(fn func() error) (deviceMS, hostMS float64, timedOut bool, err error)
}

// gatedOn returns b's gated timer, or a stand-in from timer that reports no host time, and how it times.
func gatedOn(b tensor.Backend) (gated func(fn func() error) (float64, float64, bool, error), how string) {
	if gt, ok := b.(gatedTimer); ok {
		return gt.TimeGated, "CUDA events behind a host gate (device time; host time apart)"
	}
	timer, how := timeOn(b)
	return func(fn func() error) (float64, float64, bool, error) {
		ms, err := timer(fn)
		return ms, 0, false, err
	}, how
}

// timeOn returns how b times a region of queued ops: device events when b has them, otherwise the wall clock
// between two Synchronize calls (exact for the CPU backend, whose ops finish before they return).
func timeOn(b tensor.Backend) (timer func(fn func() error) (float64, error), how string) {
	if et, ok := b.(eventTimer); ok {
		return et.Time, "CUDA events"
	}
	return func(fn func() error) (float64, error) {
		if err := b.Synchronize(); err != nil {
			return 0, err
		}
		t0 := time.Now()
		if err := fn(); err != nil {
			return 0, err
		}
		if err := b.Synchronize(); err != nil {
			return 0, err
		}
		return float64(time.Since(t0).Nanoseconds()) / 1e6, nil
	}, "wall clock"
}

// OpStat is the accumulated time of one class of backend ops over the profiled steps.
type OpStat struct {
	Op    string  `json:"op"`    // the Backend method, with the GEMM's role and dtype for Gemm
	Calls int     `json:"calls"` // calls over the profiled steps
	MS    float64 `json:"ms"`    // summed device time (the wall clock on the CPU), milliseconds
	// HostMS is the summed host time of the calls (validation, work lists, launches), measured apart from MS
	// by a gated timer (cuda.Backend.TimeGated); 0 where the backend has none.
	HostMS float64 `json:"host_ms,omitempty"`
	// Waits counts the calls that made the host wait for the device while timed (their MS then includes the
	// host's work after the wait).
	Waits int     `json:"waits,omitempty"`
	FLOPs float64 `json:"flops"` // summed GEMM work (2·M·N·K·batch); 0 for other ops
	Bytes float64 `json:"bytes"` // summed bytes of the op's tensor arguments (see Meter)
}

// Meter is a tensor.Backend that passes every call to an inner backend and measures it:
//   - memory: the bytes of the buffers allocated through it (Alloc minus Free), and their peak since the last
//     ResetPeak. This is what the CPU backend holds for the model; a CUDA backend's caching allocator reports
//     more (it also counts the ops' scratch buffers), and Run prefers it there.
//   - time, while profiling is on (SetProfiling): every op runs alone between two timing points, and its time,
//     GEMM FLOPs and argument bytes are accumulated per op class. On CUDA the points are device events behind a
//     gate (cuda.Backend.TimeGated): the device starts on the op's kernels once the host has queued them all,
//     so the time is the op's device time, launch latency included but not the host's work, which is summed
//     apart (HostMS). On the CPU they are the wall clock around Synchronize. Ops then cannot overlap, so a
//     profiled step is slower than a real one; the breakdown shows where the time goes, not the step time.
//
// Bytes per op are an estimate of the traffic the op cannot avoid: each tensor argument once, an output that is
// also read (a GEMM with beta ≠ 0, AdamW's parameters and moments) twice, only the gathered rows of an embedding
// table. A Meter is safe for use by several goroutines.
type Meter struct {
	tensor.Backend

	// Limit, when positive, is the most bytes the Meter lets be allocated through it: an Alloc beyond it fails
	// before the inner backend allocates (NewMeter sets it on the CPU backend from the host's available memory,
	// so a plan or bench of a model too big for the machine is an error instead of the kernel's OOM killer).
	Limit int64

	mu          sync.Mutex
	live        map[*tensor.Tensor]int64
	bytes, peak int64
	profiling   bool
	timer       func(fn func() error) (deviceMS, hostMS float64, timedOut bool, err error)
	ops         map[string]*OpStat
	gemms       map[string]*OpStat
	hostReads   map[string]int64
	distinct    map[*tensor.Tensor]int // while profiling: distinct values of index tensors uploaded through the Meter
}

var _ tensor.Backend = (*Meter)(nil)

// NewMeter returns a Meter around inner with profiling off.
func NewMeter(inner tensor.Backend) *Meter {
	timer, _ := gatedOn(inner)
	m := &Meter{Backend: inner, live: map[*tensor.Tensor]int64{}, timer: timer,
		ops: map[string]*OpStat{}, gemms: map[string]*OpStat{}, hostReads: map[string]int64{}, distinct: map[*tensor.Tensor]int{}}
	if inner.Name() == "cpu" {
		m.Limit = hostAvailable() / 10 * 9
	}
	return m
}

// Bytes returns the bytes of the live buffers allocated through m.
func (m *Meter) Bytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bytes
}

// Peak returns the most Bytes has been since NewMeter or the last ResetPeak.
func (m *Meter) Peak() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peak
}

// ResetPeak sets Peak to the current Bytes.
func (m *Meter) ResetPeak() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.peak = m.bytes
}

// SetProfiling turns per-op timing on or off; turning it on clears the accumulated statistics.
func (m *Meter) SetProfiling(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.profiling = on
	if on {
		clear(m.ops)
		clear(m.gemms)
	}
}

// Ops returns the accumulated statistics per op class, the most time first.
func (m *Meter) Ops() []OpStat { return m.sorted(m.ops) }

// Gemms returns the accumulated statistics per GEMM shape ("bf16 4096×2304×768 NT" is M×N×K with A not
// transposed and B transposed; "×384" appends a batch count), the most time first.
func (m *Meter) Gemms() []OpStat { return m.sorted(m.gemms) }

func (m *Meter) sorted(src map[string]*OpStat) []OpStat {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]OpStat, 0, len(src))
	for _, s := range src {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b OpStat) int {
		if a.MS != b.MS {
			if a.MS > b.MS {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Op, b.Op)
	})
	return out
}

// run calls fn, timing it under op (and under gemm, when set) while profiling is on.
func (m *Meter) run(op, gemm string, flops, bytes float64, fn func() error) error {
	m.mu.Lock()
	on := m.profiling
	m.mu.Unlock()
	if !on {
		return fn()
	}
	ms, host, waited, err := m.timer(fn)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	acc := func(dst map[string]*OpStat, key string) {
		s := dst[key]
		if s == nil {
			s = &OpStat{Op: key}
			dst[key] = s
		}
		s.Calls++
		s.MS += ms
		s.HostMS += host
		if waited {
			s.Waits++
		}
		s.FLOPs += flops
		s.Bytes += bytes
	}
	acc(m.ops, op)
	if gemm != "" {
		acc(m.gemms, gemm)
	}
	return nil
}

// size returns the summed bytes of ts (nil entries count 0).
func size(ts ...*tensor.Tensor) float64 {
	n := 0
	for _, t := range ts {
		if t != nil {
			n += t.Bytes()
		}
	}
	return float64(n)
}

// Alloc allocates through the inner backend and counts the bytes.
func (m *Meter) Alloc(dt tensor.DType, shape ...int) (*tensor.Tensor, error) {
	if m.Limit > 0 {
		want := int64(dt.Size())
		for _, d := range shape {
			want *= int64(max(d, 0))
		}
		m.mu.Lock()
		have := m.bytes
		m.mu.Unlock()
		if have+want > m.Limit {
			return nil, fmt.Errorf("bench: the model, its gradients, AdamW state and activations need more than the "+
				"%.1f GiB of memory this machine has available (%.1f GiB allocated, %.1f GiB more asked): choose a "+
				"smaller --model, --batch or --seq, or run on the GPU machine", float64(m.Limit)/gib, float64(have)/gib, float64(want)/gib)
		}
	}
	t, err := m.Backend.Alloc(dt, shape...)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := int64(t.Bytes())
	m.live[t] = n
	m.bytes += n
	m.peak = max(m.peak, m.bytes)
	return t, nil
}

// Free releases t through the inner backend and stops counting it (views and foreign tensors count nothing).
func (m *Meter) Free(t *tensor.Tensor) {
	m.mu.Lock()
	if n, ok := m.live[t]; ok {
		m.bytes -= n
		delete(m.live, t)
	}
	delete(m.distinct, t)
	m.mu.Unlock()
	m.Backend.Free(t)
}

// Upload is timed as "Upload" (host to device). While profiling, an index tensor's distinct values are
// counted for the embedding ops' byte counts (rowsTouched).
func (m *Meter) Upload(dst *tensor.Tensor, src any) error {
	m.mu.Lock()
	on := m.profiling
	m.mu.Unlock()
	if on && dst != nil {
		k := -1
		switch v := src.(type) {
		case []int32:
			k = distinctCount(v)
		case []int64:
			k = distinctCount(v)
		}
		m.mu.Lock()
		if k >= 0 {
			m.distinct[dst] = k
		} else {
			delete(m.distinct, dst)
		}
		m.mu.Unlock()
	}
	return m.run("Upload", "", 0, size(dst), func() error { return m.Backend.Upload(dst, src) })
}

// distinctCount returns how many different values v holds.
func distinctCount[T int32 | int64](v []T) int {
	seen := make(map[T]struct{}, min(len(v), 1<<16))
	for _, x := range v {
		seen[x] = struct{}{}
	}
	return len(seen)
}

// rowsTouched is how many table rows an embedding op over ids must read (and, backward, write): the ids'
// distinct values when the Meter saw them uploaded, else at most one row per id and no more than the table
// has.
func (m *Meter) rowsTouched(ids, table *tensor.Tensor) int {
	m.mu.Lock()
	k, ok := m.distinct[ids]
	m.mu.Unlock()
	if ok {
		return k
	}
	n := 0
	if ids != nil {
		n = ids.Numel()
	}
	if table != nil && len(table.Shape) > 0 {
		n = min(n, table.Shape[0])
	}
	return n
}

// rowBytes is the size of one row of an (R, C) table.
func rowBytes(table *tensor.Tensor) float64 {
	if table == nil || len(table.Shape) == 0 || table.Shape[0] == 0 {
		return 0
	}
	return size(table) / float64(table.Shape[0])
}

// Download is timed as "Download" (device to host, which waits for the queued work) and counted in HostReads.
func (m *Meter) Download(dst any, src *tensor.Tensor) error {
	m.hostRead("Download")
	return m.run("Download", "", 0, size(src), func() error { return m.Backend.Download(dst, src) })
}

// Copy is timed as "Copy".
func (m *Meter) Copy(dst, src *tensor.Tensor) error {
	return m.run("Copy", "", 0, size(dst, src), func() error { return m.Backend.Copy(dst, src) })
}

// Gemm is timed per role and dtype: "Gemm attention" (batched: QKᵀ, P·V and their gradients), "Gemm
// weight-grad" (op(A) transposed: dW = dYᵀ·X), "Gemm forward" (op(B) transposed: Y = X·Wᵀ) and "Gemm
// input-grad" (dX = dY·W), which is how package transformer and lora lay their products out.
func (m *Meter) Gemm(a tensor.GemmArgs) error {
	m.mu.Lock()
	on := m.profiling
	m.mu.Unlock()
	if !on { // no names to build for a timed step: its host time is part of what is measured
		return m.Backend.Gemm(a)
	}
	batch := max(a.Batch, 1)
	role := "input-grad"
	switch {
	case batch > 1:
		role = "attention"
	case a.TransA:
		role = "weight-grad"
	case a.TransB:
		role = "forward"
	}
	dt := "?"
	if a.A != nil {
		dt = strings.ToLower(a.A.DType.String())
	}
	t := func(b bool) string {
		if b {
			return "T"
		}
		return "N"
	}
	shape := fmt.Sprintf("%s %d×%d×%d %s%s", dt, a.M, a.N, a.K, t(a.TransA), t(a.TransB))
	if batch > 1 {
		shape += fmt.Sprintf(" ×%d", batch)
	}
	if a.C != nil {
		shape += " →" + strings.ToLower(a.C.DType.String())
	}
	flops := 2 * float64(a.M) * float64(a.N) * float64(a.K) * float64(batch)
	elem := func(t *tensor.Tensor, rows, cols int) float64 {
		if t == nil {
			return 0
		}
		return float64(rows*cols*batch) * float64(t.DType.Size())
	}
	bytes := elem(a.A, a.M, a.K) + elem(a.B, a.K, a.N) + elem(a.C, a.M, a.N) + size(a.Bias)
	if a.Beta != 0 {
		bytes += elem(a.C, a.M, a.N)
	}
	return m.run("Gemm "+role+" ("+dt+")", shape, flops, bytes, func() error { return m.Backend.Gemm(a) })
}

// Fill is timed as "Fill".
func (m *Meter) Fill(x *tensor.Tensor, v float32) error {
	return m.run("Fill", "", 0, size(x), func() error { return m.Backend.Fill(x, v) })
}

// Cast is timed as "Cast".
func (m *Meter) Cast(dst, src *tensor.Tensor) error {
	return m.run("Cast", "", 0, size(dst, src), func() error { return m.Backend.Cast(dst, src) })
}

// Scale is timed as "Scale".
func (m *Meter) Scale(x *tensor.Tensor, alpha float32) error {
	return m.run("Scale", "", 0, 2*size(x), func() error { return m.Backend.Scale(x, alpha) })
}

// Add is timed as "Add".
func (m *Meter) Add(out, a, b *tensor.Tensor) error {
	return m.run("Add", "", 0, size(out, a, b), func() error { return m.Backend.Add(out, a, b) })
}

// Axpy is timed as "Axpy".
func (m *Meter) Axpy(y, x *tensor.Tensor, alpha float32) error {
	return m.run("Axpy", "", 0, 2*size(y)+size(x), func() error { return m.Backend.Axpy(y, x, alpha) })
}

// BiasAdd is timed as "BiasAdd".
func (m *Meter) BiasAdd(y, bias *tensor.Tensor) error {
	return m.run("BiasAdd", "", 0, 2*size(y)+size(bias), func() error { return m.Backend.BiasAdd(y, bias) })
}

// BiasGrad is timed as "BiasGrad".
func (m *Meter) BiasGrad(dbias, dy *tensor.Tensor) error {
	return m.run("BiasGrad", "", 0, 2*size(dbias)+size(dy), func() error { return m.Backend.BiasGrad(dbias, dy) })
}

// GELU is timed as "GELU".
func (m *Meter) GELU(out, x *tensor.Tensor) error {
	return m.run("GELU", "", 0, size(out, x), func() error { return m.Backend.GELU(out, x) })
}

// GELUBackward is timed as "GELUBackward".
func (m *Meter) GELUBackward(dx, dout, x *tensor.Tensor) error {
	return m.run("GELUBackward", "", 0, size(dx, dout, x), func() error { return m.Backend.GELUBackward(dx, dout, x) })
}

// GELUBackwardRecompute is timed as "GELUBackwardRecompute".
func (m *Meter) GELUBackwardRecompute(dx, out, dbias, dout, x *tensor.Tensor) error {
	return m.run("GELUBackwardRecompute", "", 0, size(dx, out, dout, x)+2*size(dbias), func() error {
		return m.Backend.GELUBackwardRecompute(dx, out, dbias, dout, x)
	})
}

// Tanh is timed as "Tanh".
func (m *Meter) Tanh(out, x *tensor.Tensor) error {
	return m.run("Tanh", "", 0, size(out, x), func() error { return m.Backend.Tanh(out, x) })
}

// TanhBackward is timed as "TanhBackward".
func (m *Meter) TanhBackward(dx, dout, y *tensor.Tensor) error {
	return m.run("TanhBackward", "", 0, size(dx, dout, y), func() error { return m.Backend.TanhBackward(dx, dout, y) })
}

// LayerNorm is timed as "LayerNorm".
func (m *Meter) LayerNorm(out, mean, rstd, x, gamma, beta *tensor.Tensor, eps float32) error {
	return m.run("LayerNorm", "", 0, size(out, mean, rstd, x, gamma, beta), func() error {
		return m.Backend.LayerNorm(out, mean, rstd, x, gamma, beta, eps)
	})
}

// LayerNormBackward is timed as "LayerNormBackward".
func (m *Meter) LayerNormBackward(dx, dgamma, dbeta, dout, x, gamma, mean, rstd *tensor.Tensor) error {
	return m.run("LayerNormBackward", "", 0, size(dx, dout, x, gamma, mean, rstd)+2*size(dgamma, dbeta), func() error {
		return m.Backend.LayerNormBackward(dx, dgamma, dbeta, dout, x, gamma, mean, rstd)
	})
}

// ResidualLayerNorm is timed as "ResidualLayerNorm".
func (m *Meter) ResidualLayerNorm(a tensor.ResidualNormArgs) error {
	return m.run("ResidualLayerNorm", "", 0, size(a.Sum, a.Out, a.OutHalf, a.Mean, a.Rstd, a.Y, a.X, a.Gamma, a.Beta), func() error {
		return m.Backend.ResidualLayerNorm(a)
	})
}

// ResidualLayerNormBackward is timed as "ResidualLayerNormBackward".
func (m *Meter) ResidualLayerNormBackward(a tensor.ResidualNormBackwardArgs) error {
	return m.run("ResidualLayerNormBackward", "", 0, size(a.DX, a.DY, a.DOut, a.X, a.Gamma, a.Mean, a.Rstd)+2*size(a.DGamma, a.DBeta, a.DBias), func() error {
		return m.Backend.ResidualLayerNormBackward(a)
	})
}

// RMSNorm is timed as "RMSNorm".
func (m *Meter) RMSNorm(out, rstd, x, weight *tensor.Tensor, eps float32) error {
	return m.run("RMSNorm", "", 0, size(out, rstd, x, weight), func() error {
		return m.Backend.RMSNorm(out, rstd, x, weight, eps)
	})
}

// RMSNormBackward is timed as "RMSNormBackward".
func (m *Meter) RMSNormBackward(dx, dweight, dout, x, weight, rstd *tensor.Tensor) error {
	return m.run("RMSNormBackward", "", 0, size(dx, dout, x, weight, rstd)+2*size(dweight), func() error {
		return m.Backend.RMSNormBackward(dx, dweight, dout, x, weight, rstd)
	})
}

// SwiGLUBackwardRecompute is timed as "SwiGLUBackwardRecompute".
func (m *Meter) SwiGLUBackwardRecompute(dgate, dup, out, dout, gate, up *tensor.Tensor) error {
	return m.run("SwiGLUBackwardRecompute", "", 0, size(dgate, dup, out, dout, gate, up), func() error {
		return m.Backend.SwiGLUBackwardRecompute(dgate, dup, out, dout, gate, up)
	})
}

// ResidualRMSNorm is timed as "ResidualRMSNorm".
func (m *Meter) ResidualRMSNorm(a tensor.ResidualRMSNormArgs) error {
	return m.run("ResidualRMSNorm", "", 0, size(a.Sum, a.Out, a.Rstd, a.X, a.Y, a.Weight), func() error {
		return m.Backend.ResidualRMSNorm(a)
	})
}

// ResidualRMSNormBackward is timed as "ResidualRMSNormBackward" (DX read and written when accumulated).
func (m *Meter) ResidualRMSNormBackward(a tensor.ResidualRMSNormBackwardArgs) error {
	bytes := size(a.DX, a.DXHalf, a.DOut, a.X, a.Weight, a.Rstd) + 2*size(a.DWeight)
	if a.Accumulate {
		bytes += size(a.DX)
	}
	return m.run("ResidualRMSNormBackward", "", 0, bytes, func() error {
		return m.Backend.ResidualRMSNormBackward(a)
	})
}

// RoPE is timed as "RoPE"; it reads and writes the b·h·t·d elements of the operand.
func (m *Meter) RoPE(x tensor.AttnOperand, b, h, t, d int, positions, cos, sin *tensor.Tensor, inverse bool) error {
	bytes := 0.0
	if x.T != nil {
		bytes = float64(2 * b * h * t * d * x.T.DType.Size())
	}
	return m.run("RoPE", "", 0, bytes+size(positions), func() error {
		return m.Backend.RoPE(x, b, h, t, d, positions, cos, sin, inverse)
	})
}

// SwiGLU is timed as "SwiGLU".
func (m *Meter) SwiGLU(out, gate, up *tensor.Tensor) error {
	return m.run("SwiGLU", "", 0, size(out, gate, up), func() error { return m.Backend.SwiGLU(out, gate, up) })
}

// SwiGLUBackward is timed as "SwiGLUBackward".
func (m *Meter) SwiGLUBackward(dgate, dup, dout, gate, up *tensor.Tensor) error {
	return m.run("SwiGLUBackward", "", 0, size(dgate, dup, dout, gate, up), func() error {
		return m.Backend.SwiGLUBackward(dgate, dup, dout, gate, up)
	})
}

// GELUTanh is timed as "GELUTanh".
func (m *Meter) GELUTanh(out, x *tensor.Tensor) error {
	return m.run("GELUTanh", "", 0, size(out, x), func() error { return m.Backend.GELUTanh(out, x) })
}

// GELUTanhBackward is timed as "GELUTanhBackward".
func (m *Meter) GELUTanhBackward(dx, dout, x *tensor.Tensor) error {
	return m.run("GELUTanhBackward", "", 0, size(dx, dout, x), func() error { return m.Backend.GELUTanhBackward(dx, dout, x) })
}

// Softmax is timed as "Softmax".
func (m *Meter) Softmax(out, x, mask *tensor.Tensor) error {
	return m.run("Softmax", "", 0, size(out, x, mask), func() error { return m.Backend.Softmax(out, x, mask) })
}

// SoftmaxBackward is timed as "SoftmaxBackward".
func (m *Meter) SoftmaxBackward(dx, dout, y *tensor.Tensor) error {
	return m.run("SoftmaxBackward", "", 0, size(dx, dout, y), func() error { return m.Backend.SoftmaxBackward(dx, dout, y) })
}

// Dropout is timed as "Dropout".
func (m *Meter) Dropout(out, x *tensor.Tensor, p float32, seed, offset uint64) error {
	return m.run("Dropout", "", 0, size(out, x), func() error { return m.Backend.Dropout(out, x, p, seed, offset) })
}

// DropoutBackward is timed as "DropoutBackward".
func (m *Meter) DropoutBackward(dx, dout *tensor.Tensor, p float32, seed, offset uint64) error {
	return m.run("DropoutBackward", "", 0, size(dx, dout), func() error {
		return m.Backend.DropoutBackward(dx, dout, p, seed, offset)
	})
}

// Transpose12 is timed as "Transpose12".
func (m *Meter) Transpose12(out, x *tensor.Tensor, a, b, c, d int) error {
	return m.run("Transpose12", "", 0, size(out, x), func() error { return m.Backend.Transpose12(out, x, a, b, c, d) })
}

// Attention is timed as "Attention" with 4·B·Hq·Tq·Tk·D flops (the two products; FlashAttention-2's count,
// halved when causal).
func (m *Meter) Attention(a tensor.AttentionArgs) error {
	return m.run("Attention", "", attnFlops(a, 4), attnBytes(a), func() error { return m.Backend.Attention(a) })
}

// AttentionBackward is timed as "AttentionBackward" with 8·B·Hq·Tq·Tk·D flops (the four products of the
// two-pass backward, as CountFLOPs counts them; the kernel's recomputation of S is not counted), halved when
// causal.
func (m *Meter) AttentionBackward(a tensor.AttentionBackwardArgs) error {
	return m.run("AttentionBackward", "", attnFlops(a.AttentionArgs, 8), 2*attnBytes(a.AttentionArgs), func() error {
		return m.Backend.AttentionBackward(a)
	})
}

func attnFlops(a tensor.AttentionArgs, per float64) float64 {
	f := per * float64(a.B) * float64(a.Hq) * float64(a.Tq) * float64(a.Tk) * float64(a.D)
	if a.Causal {
		f /= 2
	}
	return f
}

// attnBytes counts Q, K, V and O once each, and the LSE.
func attnBytes(a tensor.AttentionArgs) float64 {
	el := 2.0
	if a.Q.T != nil && a.Q.T.DType == tensor.F32 {
		el = 4
	}
	return el*float64(a.B*a.D)*float64(2*a.Hq*a.Tq+2*a.Hkv*a.Tk) + 4*float64(a.B*a.Hq*a.Tq)
}

// Embedding is timed as "Embedding" (bytes: the ids, the distinct table rows they gather, read once, and the
// output; a row gathered again comes from cache, so counting it per id would overstate the traffic).
func (m *Meter) Embedding(out, ids, table *tensor.Tensor) error {
	rows := float64(m.rowsTouched(ids, table)) * rowBytes(table)
	return m.run("Embedding", "", 0, size(ids, out)+rows, func() error { return m.Backend.Embedding(out, ids, table) })
}

// EmbeddingBackward is timed as "EmbeddingBackward" (bytes: the ids, dout, and the distinct rows of the
// gradient table read and written once each: the position table's 512 rows at 64×512, not one per token).
func (m *Meter) EmbeddingBackward(dtable, ids, dout *tensor.Tensor) error {
	rows := float64(m.rowsTouched(ids, dtable)) * rowBytes(dtable)
	return m.run("EmbeddingBackward", "", 0, size(ids, dout)+2*rows, func() error {
		return m.Backend.EmbeddingBackward(dtable, ids, dout)
	})
}

// CrossEntropy is timed as "CrossEntropy".
func (m *Meter) CrossEntropy(losses, logits, labels *tensor.Tensor, ignoreIndex int) (count int, err error) {
	err = m.run("CrossEntropy", "", 0, size(losses, logits, labels), func() (e error) {
		count, e = m.Backend.CrossEntropy(losses, logits, labels, ignoreIndex)
		return e
	})
	return count, err
}

// CrossEntropyBackward is timed as "CrossEntropyBackward".
func (m *Meter) CrossEntropyBackward(dlogits, logits, labels *tensor.Tensor, scale float32, ignoreIndex int, scaleBy *tensor.Tensor) error {
	return m.run("CrossEntropyBackward", "", 0, size(dlogits, logits, labels), func() error {
		return m.Backend.CrossEntropyBackward(dlogits, logits, labels, scale, ignoreIndex, scaleBy)
	})
}

// CrossEntropyWithGrad is timed as "CrossEntropyWithGrad"; it reads the logits twice and writes dlogits.
func (m *Meter) CrossEntropyWithGrad(losses, pred, dlogits, logits, labels *tensor.Tensor, scale float32, ignoreIndex int, scaleBy *tensor.Tensor) (int, error) {
	var count int
	err := m.run("CrossEntropyWithGrad", "", 0, size(losses, pred, dlogits, labels)+2*size(logits), func() error {
		var err error
		count, err = m.Backend.CrossEntropyWithGrad(losses, pred, dlogits, logits, labels, scale, ignoreIndex, scaleBy)
		return err
	})
	return count, err
}

// ArgMax is timed as "ArgMax".
func (m *Meter) ArgMax(out, x *tensor.Tensor) error {
	return m.run("ArgMax", "", 0, size(out, x), func() error { return m.Backend.ArgMax(out, x) })
}

// MSELoss is timed as "MSELoss".
func (m *Meter) MSELoss(losses, pred, target *tensor.Tensor) error {
	return m.run("MSELoss", "", 0, size(losses, pred, target), func() error { return m.Backend.MSELoss(losses, pred, target) })
}

// MSELossBackward is timed as "MSELossBackward".
func (m *Meter) MSELossBackward(dpred, pred, target *tensor.Tensor, scale float32, scaleBy *tensor.Tensor) error {
	return m.run("MSELossBackward", "", 0, size(dpred, pred, target), func() error {
		return m.Backend.MSELossBackward(dpred, pred, target, scale, scaleBy)
	})
}

// HostReads returns how many calls through m handed device data to the host, by op: Download, Synchronize,
// GlobalNorm and NonFiniteCheckAndUnscale, each of which waits for the queued work on an asynchronous backend.
func (m *Meter) HostReads() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.hostReads)
}

// hostRead counts one call of op that hands device data to the host.
func (m *Meter) hostRead(op string) {
	m.mu.Lock()
	m.hostReads[op]++
	m.mu.Unlock()
}

// Synchronize is counted in HostReads.
func (m *Meter) Synchronize() error {
	m.hostRead("Synchronize")
	return m.Backend.Synchronize()
}

// GlobalNormTo is timed as "GlobalNormTo" (the norm stays on the device: no wait).
func (m *Meter) GlobalNormTo(norm *tensor.Tensor, ts []*tensor.Tensor) error {
	return m.run("GlobalNormTo", "", 0, size(ts...), func() error { return m.Backend.GlobalNormTo(norm, ts) })
}

// ClipByNorm is timed as "ClipByNorm" (bytes: every gradient read and written).
func (m *Meter) ClipByNorm(ts []*tensor.Tensor, norm *tensor.Tensor, maxNorm float32, nonFinite *tensor.Tensor) error {
	return m.run("ClipByNorm", "", 0, 2*size(ts...), func() error { return m.Backend.ClipByNorm(ts, norm, maxNorm, nonFinite) })
}

// GlobalNorm is timed as "GlobalNorm" and counted in HostReads (it returns a host value, so it waits for the
// queued work).
func (m *Meter) GlobalNorm(ts []*tensor.Tensor) (norm float64, err error) {
	m.hostRead("GlobalNorm")
	err = m.run("GlobalNorm", "", 0, size(ts...), func() (e error) {
		norm, e = m.Backend.GlobalNorm(ts)
		return e
	})
	return norm, err
}

// NonFiniteCheckAndUnscale is timed as "NonFiniteCheckAndUnscale" and counted in HostReads.
func (m *Meter) NonFiniteCheckAndUnscale(ts []*tensor.Tensor, invScale float32) (found bool, err error) {
	m.hostRead("NonFiniteCheckAndUnscale")
	err = m.run("NonFiniteCheckAndUnscale", "", 0, 2*size(ts...), func() (e error) {
		found, e = m.Backend.NonFiniteCheckAndUnscale(ts, invScale)
		return e
	})
	return found, err
}

// NonFiniteCheckAndUnscaleOnDevice is timed as "NonFiniteCheckAndUnscale"; it does not wait.
func (m *Meter) NonFiniteCheckAndUnscaleOnDevice(ts []*tensor.Tensor, scale, found *tensor.Tensor) error {
	return m.run("NonFiniteCheckAndUnscale", "", 0, 2*size(ts...), func() error {
		return m.Backend.NonFiniteCheckAndUnscaleOnDevice(ts, scale, found)
	})
}

// UpdateScale is timed as "UpdateScale".
func (m *Meter) UpdateScale(a tensor.UpdateScaleArgs) error {
	return m.run("UpdateScale", "", 0, 0, func() error { return m.Backend.UpdateScale(a) })
}

// AdamW is timed as "AdamW" (bytes: the gradient read, the parameters and both moments read and written).
func (m *Meter) AdamW(a tensor.AdamWArgs) error {
	return m.run("AdamW", "", 0, size(a.Grads)+2*size(a.Params, a.ExpAvg, a.ExpAvgSq), func() error { return m.Backend.AdamW(a) })
}

// freeAll frees every buffer still allocated through m (the end of a Run: the model, its optimizer state and
// its activations are dropped together).
func (m *Meter) freeAll() {
	m.mu.Lock()
	ts := make([]*tensor.Tensor, 0, len(m.live))
	for t := range m.live {
		ts = append(ts, t)
	}
	m.mu.Unlock()
	for _, t := range ts {
		m.Free(t)
	}
}

// hostAvailable returns the host memory available for new allocations in bytes (hostmem.Available:
// MemAvailable of /proc/meminfo, lowered to the process's cgroup limit), or 0 when it cannot be read (no limit
// then).
func hostAvailable() int64 {
	n, ok := hostmem.Available()
	if !ok || n > math.MaxInt64 {
		return 0
	}
	return int64(n)
}
