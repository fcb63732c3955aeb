//go:build cuda

package cuda

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tune-ml/tune/internal/opcheck"
	"github.com/tune-ml/tune/tensor"
)

// Hooks for the external tests in package cuda_test.

// KernelFiles lists the embedded kernel files.
func KernelFiles() []string { return kernelFiles() }

// CompileKernelForTest compiles one embedded kernel file for compute capability sm and returns the image size,
// whether it is a CUBIN, NVRTC's log and the loaded NVRTC's path and version.
func CompileKernelForTest(file string, sm int) (size int, cubin bool, log, nvrtc string, err error) {
	img, err := compileKernel(file, sm)
	if err != nil {
		return 0, false, "", "", err
	}
	nv, _ := loadNVRTC()
	return len(img.data), img.cubin, img.log, nv.path, nil
}

// KernelImageForTest compiles the embedded kernel file for compute capability sm and returns NVRTC's image
// (PTX text or a cubin).
func KernelImageForTest(file string, sm int) ([]byte, bool, error) {
	img, err := compileKernel(file, sm)
	if err != nil {
		return nil, false, err
	}
	return img.data, img.cubin, nil
}

// NVRTCVersion returns the loaded NVRTC's version, or an error if none can be opened.
func NVRTCVersion() (major, minor int, path string, err error) {
	nv, err := loadNVRTC()
	return nv.major, nv.minor, nv.path, err
}

// StagedGemmReasons returns how many GEMMs took the staged path, by reason.
func StagedGemmReasons(b *Backend) map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	for k, v := range b.stagedGemms {
		out[k] = v
	}
	return out
}

// SetAttnBwdOnly makes AttentionBackward launch only its "dq" or "dkdv" kernel (for the benchmark's
// breakdown; the results are then incomplete) and returns a function restoring both kernels.
func SetAttnBwdOnly(which string) (restore func()) {
	old := attnBwdOnly
	attnBwdOnly = which
	return func() { attnBwdOnly = old }
}

// SetAttnBwdRedraw makes every backward attention kernel draw its own dropout keep bits (instead of the dQ
// kernel storing them for the dK/dV kernel), for the bit-identity test, and returns a function restoring the
// default.
func SetAttnBwdRedraw(on bool) (restore func()) {
	old := attnBwdRedraw
	attnBwdRedraw = on
	return func() { attnBwdRedraw = old }
}

// SetAttnChunkBytes sets the ordered backward's operand bytes per block-order chunk (16 MiB by default) and
// returns a function restoring it.
func SetAttnChunkBytes(n int) (restore func()) {
	old := attnChunkBytes
	attnChunkBytes = n
	return func() { attnChunkBytes = old }
}

// AttnModuleKernels returns, for every attention kernel module (attnModules and attnRefModule), the kernel
// names the Go code launches from it, composed as the launch code composes them.
func AttnModuleKernels() map[string][]string {
	out := map[string][]string{}
	var g opcheck.Attention
	plans := []attnPlan{{d: 64}}
	for _, f := range attnFamilies {
		d := 64
		if strings.HasSuffix(f, "_d128") {
			d = 128
		}
		plans = append(plans, attnPlan{tc: true, suffix: f, d: d})
	}
	for _, pl := range plans {
		ks := pl.bwdKernels(g, false)
		for _, k := range []attnKernel{pl.fwdKernel(g), ks[0], ks[1]} {
			out[k.mod] = append(out[k.mod], k.name)
		}
		if pl.tc && pl.d == 64 {
			old := attnBwdWGVariant
			for _, v := range attnBwdWGVariants {
				attnBwdWGVariant = v
				wk := pl.bwdKernels(g, true)
				out[wk[0].mod] = append(out[wk[0].mod], wk[0].name, wk[1].name)
			}
			attnBwdWGVariant = old
		}
		if pl.tc {
			out[pl.fwdKernel(g).mod] = append(out[pl.fwdKernel(g).mod], "attn_keep_bits")
			wk := pl.fwdWgKernel(g)
			out[wk.mod] = append(out[wk.mod], wk.name)
		}
	}
	for _, names := range out {
		sort.Strings(names)
	}
	return out
}

// SetRMSNormBwdOnePass switches ResidualRMSNormBackward's one-pass kernel (the default; TUNE_RMSNORM_BWD=twopass
// is off) on or off and returns the previous setting.
func SetRMSNormBwdOnePass(on bool) bool {
	old := rmsNormBwdOnePass
	rmsNormBwdOnePass = on
	return old
}

// KernelRegistersForTest compiles the kernel file for compute capability sm with ptxas's verbose output and
// returns NVRTC's log: per kernel "Compiling entry function", its stack frame and spill bytes and "Used N
// registers".
func KernelRegistersForTest(file string, sm int) (string, error) {
	old := nvrtcExtraOptions
	nvrtcExtraOptions = []string{"--ptxas-options=-v"}
	defer func() { nvrtcExtraOptions = old }()
	img, err := compileKernel(file, sm)
	if err != nil {
		return "", err
	}
	return img.log, nil
}

// SetColsumNarrow makes BiasGrad's partial pass take colsum_partial (on) instead of colsum_partial4 where that
// applies, and returns a function restoring the previous choice.
func SetColsumNarrow(on bool) (restore func()) {
	old := colsumNarrow
	colsumNarrow = on
	return func() { colsumNarrow = old }
}

// SetLNBwdPath forces the LayerNorm backward's two passes ("split") or its ring kernel ("ring"), or lets it
// choose (""), and returns a function restoring the previous choice.
func SetLNBwdPath(p string) (restore func()) {
	old := lnBwdPath
	lnBwdPath = p
	return func() { lnBwdPath = old }
}

// SetEmbeddingHostPlan makes EmbeddingBackward plan on the host (on) or as it chooses (off), and returns a
// function restoring the previous choice.
func SetEmbeddingHostPlan(on bool) (restore func()) {
	old := embHostPlan
	embHostPlan = on
	return func() { embHostPlan = old }
}

// SetColsumFinishLaunch makes the column sums end with a colsum_finish launch (on) or in their last blocks
// (off), and returns a function restoring the previous choice.
func SetColsumFinishLaunch(on bool) (restore func()) {
	old := colsumFinishLaunch
	colsumFinishLaunch = on
	return func() { colsumFinishLaunch = old }
}

// SetGemmF32Lt sends every true-FP32 GEMM to cuBLASLt when on (as TUNE_GEMM_F32=lt), else the unbatched
// ones without a bias to cublasSgemm (gemmf32.go); it returns a function restoring the previous choice.
func SetGemmF32Lt(on bool) (restore func()) {
	old := gemmF32Lt
	gemmF32Lt = on
	return func() { gemmF32Lt = old }
}

// SetGemmTable applies the GEMM table (gemmtable.go) when on, or ignores it (as TUNE_GEMM_TABLE=off), for plans
// made from now on; it returns a function restoring the previous setting.
func SetGemmTable(on bool) (restore func()) {
	old := gemmTableOff
	gemmTableOff = !on
	return func() { gemmTableOff = old }
}

// ForgetGemmPlans destroys b's cached GEMM plans, so that the next GEMM of each shape chooses its algorithm anew.
func ForgetGemmPlans(b *Backend) {
	if b.lt == nil {
		return
	}
	for k, e := range b.lt.plans {
		if e.p != nil {
			e.p.destroy()
		}
		delete(b.lt.plans, k)
	}
}

// GemmPlansFromTable returns how many of b's GEMM plans so far took their algorithm from the table.
func GemmPlansFromTable(b *Backend) int {
	if b.lt == nil {
		return 0
	}
	return b.lt.fromTable
}

// GemmTableShape is one GEMM table row for this device and cuBLASLt, in tensor.GemmArgs terms.
type GemmTableShape struct {
	AB, C, Bias    tensor.DType // Bias Invalid: no bias
	TransA, TransB bool
	M, N, K        int
	LDA, LDB, LDC  int
	Config         string
}

// GemmTableShapes lists the table's rows for b's GPU and the loaded cuBLASLt (load it first: run a GEMM).
func GemmTableShapes(b *Backend) ([]GemmTableShape, error) {
	t, err := parseGemmTable(gemmTableJSON)
	if err != nil {
		return nil, err
	}
	major, minor := ltMajorMinor(ltVersion())
	var out []GemmTableShape
	for s := range t {
		if s.sm != b.sm || s.ltMajor != major || s.ltMinor != minor {
			continue
		}
		if cfg, ok := t.lookup(s, b.info.Name); ok {
			out = append(out, GemmTableShape{AB: s.ab, C: s.c, Bias: s.bias, TransA: s.transA, TransB: s.transB,
				M: s.m, N: s.n, K: s.k, LDA: s.lda, LDB: s.ldb, LDC: s.ldc, Config: cfg.String()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i]) < fmt.Sprint(out[j]) })
	return out, nil
}

// FillPatternForTest fills x on the device with a seeded pseudo-random block repeated over it (element e is
// block[e mod len(block)]) and returns the block rounded to x's dtype.
func FillPatternForTest(b *Backend, x *tensor.Tensor, seed uint64) ([]float32, error) {
	v, err := b.fillPattern(x, seed)
	for i := range v {
		v[i] = tensor.RoundTo(x.DType, v[i])
	}
	return v, err
}

// DiffForTest compares x with y (same dtype and size) on the device: elements whose bits differ, max |x − y|
// and max |y|.
func DiffForTest(b *Backend, x, y *tensor.Tensor) (differ int, dmax, ymax float32, err error) {
	d, err := b.diff(x, y, x.Numel(), x.DType)
	return d.differ, d.dmax, d.ymax, err
}

// SetAttnBwdMMA makes AttentionBackward use the mma.sync kernels (as TUNE_ATTN_BWD=mma) where the
// warpgroup-MMA kernels would run, or not, and returns a function restoring the setting.
func SetAttnBwdMMA(on bool) (restore func()) {
	old := attnBwdMMA
	attnBwdMMA = on
	return func() { attnBwdMMA = old }
}

// AttnBwdWG reports whether AttentionBackward of BF16 or F16 (dt) with D = 64 runs the warpgroup-MMA kernels
// (kernels/attention_bwd_wg.cu) on be.
func AttnBwdWG(be *Backend, dt tensor.DType) (bool, error) {
	return be.bwdWG(attnPlanFor(be.sm, true, dt, 64))
}

// SetAttnBwdWGVariant makes AttentionBackward launch the warpgroup-MMA variant with kernel-name suffix v ("",
// "_o2" or "_p", as TUNE_ATTN_BWD_WG) and returns a function restoring the setting.
func SetAttnBwdWGVariant(v string) (restore func()) {
	old := attnBwdWGVariant
	attnBwdWGVariant = v
	return func() { attnBwdWGVariant = old }
}

// SetAttnBwdEWGeneral makes the warpgroup backward run every tile through its general elementwise code when on
// (TUNE_ATTN_BWD_EW=general), instead of the short form on tiles without masks or visibility tests.
func SetAttnBwdEWGeneral(on bool) (restore func()) {
	old := attnBwdEWGeneral
	attnBwdEWGeneral = on
	return func() { attnBwdEWGeneral = old }
}
