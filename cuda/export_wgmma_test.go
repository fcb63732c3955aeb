//go:build cuda

package cuda

import (
	"errors"

	"github.com/tune-ml/tune/internal/opcheck"
	"github.com/tune-ml/tune/tensor"
)

// NoSM90a reports whether err says that a module using wgmma (kernels/wgmma.cuh) cannot be compiled here: the
// device is not sm_90 or the NVRTC is older than 12.0.
func NoSM90a(err error) bool { return errors.Is(err, errNoSM90a) }

// DeviceSM returns the backend's compute capability as 10·major + minor.
func DeviceSM(tb tensor.Backend) int { return tb.(*Backend).sm }

// WgmmaProbe runs the one-block kernel name of kernels/wgmma_probe.cu on A (64×k BF16 bits, row-major) and B
// (bits, row-major: n×k for the K-major kernels, k×n for the MN-major ones) with the descriptor overrides lbo
// and sbo (0: the kernel's own), and returns C (64×n, row-major).
func WgmmaProbe(tb tensor.Backend, name string, n, k int, a, bm []uint16, lbo, sbo int) (c []float32, err error) {
	b := tb.(*Backend)
	ta, err := b.Alloc(tensor.BF16, 64, k)
	if err != nil {
		return nil, err
	}
	defer b.Free(ta)
	tb2, err := b.Alloc(tensor.BF16, n, k)
	if err != nil {
		return nil, err
	}
	defer b.Free(tb2)
	tc, err := b.Alloc(tensor.F32, 64, n)
	if err != nil {
		return nil, err
	}
	defer b.Free(tc)
	if err := b.Upload(ta, a); err != nil {
		return nil, err
	}
	if err := b.Upload(tb2, bm); err != nil {
		return nil, err
	}
	if err := b.wgmmaProbeLaunch(name, n, k, ta, tb2, tc, lbo, sbo); err != nil {
		return nil, err
	}
	c = make([]float32, 64*n)
	if err := b.Download(c, tc); err != nil {
		return nil, err
	}
	return c, b.Synchronize()
}

func (b *Backend) wgmmaProbeLaunch(name string, n, k int, ta, tb, tc *tensor.Tensor, lbo, sbo int) (err error) {
	o := b.begin("WgmmaProbe", ta, tb, tc)
	defer o.end(&err)
	o.launchShared("wgmma_probe.cu", name, 1, 1, 128, 1, 64*k*2+n*k*2+1024, addr(ta), addr(tb), addr(tc), uint64(lbo), uint64(sbo))
	return o.err
}

// SetAttnFwdMMA makes the attention forward keep the mma.sync kernel where the wgmma kernel would run (as
// TUNE_ATTN_FWD=mma) when on, and returns a function restoring the previous choice.
func SetAttnFwdMMA(on bool) (restore func()) {
	old := attnFwdMMA
	attnFwdMMA = on
	return func() { attnFwdMMA = old }
}

// AttnFwdWgmma reports whether the backend's attention forward takes the wgmma kernel for a BF16 D = 64 call
// without dropout (an sm_90 device whose NVRTC compiled sm_90a, as far as the calls so far found out).
func AttnFwdWgmma(tb tensor.Backend) bool {
	b := tb.(*Backend)
	return attnPlan{tc: true, suffix: "bf16_d64", d: 64}.fwdWgmma(b, opcheck.Attention{})
}
