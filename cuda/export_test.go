//go:build cuda

package cuda

import (
	"sort"
	"strings"
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

// SetAttnFwdVariant selects a forward variant of the BF16 tensor-core attention kernel ("_m2", "_bc128",
// "_db", "_sb", "_m1", "_m1o4", "_m1s3", "_s3", "_h3", "_h3s3"; kernels/attention.cu; overrides TUNE_ATTN_FWD) for the microbenchmark and tests, and returns a function restoring the default.
func SetAttnFwdVariant(v string) (restore func()) {
	old := attnFwdVariant
	attnFwdVariant = v
	return func() { attnFwdVariant = old }
}

// SetAttnBwdOnly makes AttentionBackward launch only its "dq" or "dkdv" kernel (for the benchmark's
// breakdown; the results are then incomplete) and returns a function restoring both kernels.
func SetAttnBwdOnly(which string) (restore func()) {
	old := attnBwdOnly
	attnBwdOnly = which
	return func() { attnBwdOnly = old }
}

// SetAttnBwdRedraw makes every backward attention kernel draw its own dropout keep bits (the design before
// the dQ kernel stored them for the others), for the microbenchmark and the bit-identity test, and returns a
// function restoring the default.
func SetAttnBwdRedraw(on bool) (restore func()) {
	old := attnBwdRedraw
	attnBwdRedraw = on
	return func() { attnBwdRedraw = old }
}

// SetAttnDQVariant picks another dQ kernel of the attention backward ("dq2": the two-sweep kernel; "smq": the
// BF16 D = 64 one-sweep kernel reading Q and dO fragments from shared memory; "" the default) for the
// microbenchmark and tests, and returns a function restoring the default.
func SetAttnDQVariant(v string) (restore func()) {
	old := attnDQVariant
	attnDQVariant = v
	return func() { attnDQVariant = old }
}

// SetAttnNoKeepBits makes the attention kernels ignore AttentionArgs.KeepBits (the backward draws its own
// dropout bits) for the microbenchmark and the bit-identity test, and returns a function restoring the default.
func SetAttnNoKeepBits(on bool) (restore func()) {
	old := attnNoKeepBits
	attnNoKeepBits = on
	return func() { attnNoKeepBits = old }
}

// SetAttnBwdVariant overrides TUNE_ATTN_BWD ("" or "v2" the kernels on their 3-D grids, "v3", "v4", "v5",
// "v6" to "v12") for the microbenchmark and tests, and returns a function restoring the previous value.
func SetAttnBwdVariant(v string) (restore func()) {
	old := attnBwdVariant
	attnBwdVariant = v
	return func() { attnBwdVariant = old }
}

// SetAttnV3ChunkBytes sets the v3 backward's operand bytes per block-order chunk (16 MiB by default) and
// returns a function restoring it.
func SetAttnV3ChunkBytes(n int) (restore func()) {
	old := attnV3ChunkBytes
	attnV3ChunkBytes = n
	return func() { attnV3ChunkBytes = old }
}

// AttnBwdVariant is the backward variant in force (TUNE_ATTN_BWD unless a test overrode it).
func AttnBwdVariant() string { return attnBwdVariant }

// AttnModuleKernels returns, for every attention kernel module (kernels/attention.cu's modules, attnModules),
// the kernel names the Go code launches from it, composed as the launch code composes them.
func AttnModuleKernels() map[string][]string {
	out := map[string][]string{attnRefModule: {"attn_fwd_ref", "attn_bwd_dq_ref", "attn_bwd_dkdv_ref"}}
	for _, f := range attnFamilies {
		d, dt := 64, f[:strings.IndexByte(f, '_')]
		if strings.HasSuffix(f, "d128") {
			d = 128
		}
		v2 := []string{"attn_bwd_dq_" + f, "attn_bwd_dkdv_" + f}
		out[attnModule("", f)] = []string{"attn_fwd_" + f}
		if d == 64 {
			out[attnModule("v2", f)] = v2
		} else {
			out[attnModule("", f)] = append(out[attnModule("", f)], v2...)
		}
		bench := []string{"attn_bwd_dq2_" + f}
		if dt == "bf16" {
			for v, shapes := range fwdShapes {
				if _, ok := shapes[d]; ok && v != "" {
					bench = append(bench, "attn_fwd_"+f+v)
				}
			}
			if d == 64 {
				bench = append(bench, "attn_bwd_dq_"+f+"_smq")
			}
		}
		out[attnModule("bench", f)] = bench
		sum := "attn_bwd_gqa_sum_" + dt
		for _, v := range []string{"v3", "v4", "v6", "v7", "v8", "v9", "v10", "v11", "v12"} {
			k := v3KernelsOf(v, f, d)
			out[k.mod] = append(out[k.mod], k.dq, k.dkdv, k.split)
		}
		out[attnModule("v3", f)] = append(out[attnModule("v3", f)], sum)
		if d == 64 {
			out[attnModule("", f)] = append(out[attnModule("", f)], sum)
			out[attnModule("v5", f)] = append(out[attnModule("v5", f)], sum, "attn_bwd_dq_"+f+"_o3", "attn_bwd_dkdv_"+f+"_o3")
		}
	}
	for m, names := range out { // v3's kernels appear once per variant that shares them
		seen := map[string]bool{}
		var u []string
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				u = append(u, n)
			}
		}
		sort.Strings(u)
		out[m] = u
	}
	return out
}

// AttnBwdDefault is the backward variant used when TUNE_ATTN_BWD is unset.
const AttnBwdDefault = attnBwdDefault

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

// SetOpsVariant selects TUNE_CUDA_OPS's kernels ("v1" or "v2", see opsVariant) for the tests and
// benchmarks, and returns a function restoring the previous choice.
func SetOpsVariant(v string) (restore func()) {
	old := opsVariant
	opsVariant = v
	return func() { opsVariant = old }
}
