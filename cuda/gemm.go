//go:build cuda

package cuda

// #include "tunecuda.h"
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/tune-ml/tune/tensor"
)

// cuBLASLt enum values used here (cublasLt.h / library_types.h; identical in CUDA 11.8 and 13).
const (
	ltCompute32F     = 68 // CUBLAS_COMPUTE_32F
	ltCompute32FTF32 = 77 // CUBLAS_COMPUTE_32F_FAST_TF32
	cudaR32F         = 0  // CUDA_R_32F
	cudaR16F         = 2  // CUDA_R_16F
	cudaR16BF        = 14 // CUDA_R_16BF

	descTransA       = 3  // CUBLASLT_MATMUL_DESC_TRANSA (int32 cublasOperation_t)
	descTransB       = 4  // CUBLASLT_MATMUL_DESC_TRANSB
	descEpilogue     = 7  // CUBLASLT_MATMUL_DESC_EPILOGUE (uint32)
	descBiasPointer  = 8  // CUBLASLT_MATMUL_DESC_BIAS_POINTER (device pointer)
	descBiasDataType = 26 // CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE (int32 cudaDataType)
	epilogueBias     = 4  // CUBLASLT_EPILOGUE_BIAS

	layoutBatchCount  = 5 // CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT (int32)
	layoutBatchStride = 6 // CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET (int64, elements)

	prefMaxWorkspace = 1 // CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES (uint64)
	prefReduction    = 3 // CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK (uint32)
	prefMinAlignA    = 5 // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES .. _D_BYTES = 8 (uint32)

	// workspaceBytes is the cuBLASLt workspace (PyTorch uses 32 MiB on Hopper).
	workspaceBytes = 32 << 20
)

// ltState is a backend's cuBLASLt handle, workspace and plan cache.
type ltState struct {
	handle    C.cublasLtHandle_t
	ws        cu.DevicePtr
	wsSize    int
	plans     map[planKey]planEntry
	sm        int       // the device's compute capability, 10·major + minor
	gpu       string    // the device's name
	table     gemmTable // the parsed gemmtable.json
	fromTable int       // plans whose algorithm came from the table
}

// ltVersion returns cublasLtGetVersion() (e.g. 130100), or 0 before the library is loaded.
func ltVersion() int {
	if libCublasLt.path == "" {
		return 0
	}
	return int(C.tc_lt_version())
}

// cuBLASLt returns the backend's cuBLASLt state, loading the library and creating the handle and workspace
// on first use.
func (o *op) cuBLASLt() (*ltState, error) {
	if o.b.lt != nil {
		return o.b.lt, nil
	}
	if _, err := libCublasLt.load(); err != nil {
		return nil, err
	}
	table, err := parseGemmTable(gemmTableJSON)
	if err != nil {
		return nil, err
	}
	lt := &ltState{plans: map[planKey]planEntry{}, wsSize: workspaceBytes, sm: o.b.sm, gpu: o.b.info.Name, table: table}
	if err := cublasErr("cublasLtCreate", int(C.tc_lt_create(&lt.handle)), ""); err != nil {
		return nil, err
	}
	ws, _, err := o.b.alloc.get(workspaceBytes)
	if err != nil {
		return nil, driverErr("cuMemAlloc", err, "the %d MiB cuBLASLt workspace (%s)", workspaceBytes>>20, o.b.memSummary())
	}
	lt.ws = ws
	o.b.lt = lt
	return lt, nil
}

// matmul is one cuBLASLt call in the row-major terms of tensor.GemmArgs (addresses and element strides).
type matmul struct {
	transA, transB bool
	m, n, k, batch int
	a, b, c, bias  uint64
	lda, ldb, ldc  int
	sa, sb, sc     int
	ab, cdt, biasT tensor.DType // biasT is Invalid without the BIAS epilogue
	alpha, beta    float32
}

// planKey identifies a cached descriptor set and algorithm: the geometry, dtypes, epilogue, pointer
// alignments (cuBLASLt picks vectorized kernels from them) and the TF32 setting.
type planKey struct {
	transA, transB bool
	m, n, k, batch int
	lda, ldb, ldc  int
	sa, sb, sc     int
	ab, cdt, biasT tensor.DType
	alignA, alignB int
	alignC         int
	tf32           bool
}

type planEntry struct {
	p    *plan
	err  error // cached failure (no algorithm)
	beta bool  // some call had beta ≠ 0 (C is read): the survey (gemmsurvey.go) times that case
}

// plan holds the descriptors of one GEMM shape and its algorithm, chosen once: the GEMM table's
// (gemmtable.go) when it has the shape, else cuBLASLt's first heuristic result.
type plan struct {
	desc       C.cublasLtMatmulDesc_t
	la, lb, lc C.cublasLtMatrixLayout_t // cuBLASLt's A (our B), B (our A), and C = D
	algo       C.cublasLtMatmulAlgo_t
	ws         C.size_t
	fromTable  bool
}

// align returns the largest power of two dividing address p, at most 256.
func align(p uint64) int {
	a := 1
	for a < 256 && p%uint64(2*a) == 0 {
		a *= 2
	}
	return a
}

func cudaType(d tensor.DType) int {
	switch d {
	case tensor.F16:
		return cudaR16F
	case tensor.BF16:
		return cudaR16BF
	}
	return cudaR32F
}

// directTypes reports whether cuBLASLt multiplies A/B of type ab into C of type c with CUBLAS_COMPUTE_32F.
func directTypes(ab, c tensor.DType) bool {
	return c == tensor.F32 || c == ab
}

func setAttr(call string, st C.cublasStatus_t, what string) error {
	return cublasErr(call, int(st), "%s", what)
}

// newPlan creates the descriptors for key and takes the GEMM table's algorithm for it (gemmtable.go) or asks
// the heuristic for the best one. When cuBLASLt has none, the error wraps errNotSupported and names the GEMM.
func (lt *ltState) newPlan(key planKey, mm matmul) (*plan, error) {
	p := &plan{}
	ok := false
	defer func() {
		if !ok {
			p.destroy()
		}
	}()
	compute := ltCompute32F
	if key.tf32 {
		compute = ltCompute32FTF32
	}
	if err := setAttr("cublasLtMatmulDescCreate", C.tc_lt_desc_create(&p.desc, C.int(compute), cudaR32F), "compute 32F"); err != nil {
		return nil, err
	}
	opA, opB := C.int32_t(0), C.int32_t(0) // CUBLAS_OP_N
	if key.transB {
		opA = 1 // CUBLAS_OP_T
	}
	if key.transA {
		opB = 1
	}
	if err := setAttr("cublasLtMatmulDescSetAttribute", C.tc_lt_desc_set(p.desc, descTransA, unsafe.Pointer(&opA), 4), "TRANSA"); err != nil {
		return nil, err
	}
	if err := setAttr("cublasLtMatmulDescSetAttribute", C.tc_lt_desc_set(p.desc, descTransB, unsafe.Pointer(&opB), 4), "TRANSB"); err != nil {
		return nil, err
	}
	if key.biasT != tensor.Invalid {
		epi := C.uint32_t(epilogueBias)
		if err := setAttr("cublasLtMatmulDescSetAttribute", C.tc_lt_desc_set(p.desc, descEpilogue, unsafe.Pointer(&epi), 4), "EPILOGUE=BIAS"); err != nil {
			return nil, err
		}
		if key.biasT != key.cdt {
			bt := C.int32_t(cudaType(key.biasT))
			if st := C.tc_lt_desc_set(p.desc, descBiasDataType, unsafe.Pointer(&bt), 4); st != 0 {
				return nil, fmt.Errorf("%w: %w", cublasErr("cublasLtMatmulDescSetAttribute", int(st), "BIAS_DATA_TYPE=%v", key.biasT), errNotSupported)
			}
		}
		bp := C.uint64_t(mm.bias)
		if err := setAttr("cublasLtMatmulDescSetAttribute", C.tc_lt_desc_set(p.desc, descBiasPointer, unsafe.Pointer(&bp), 8), "BIAS_POINTER"); err != nil {
			return nil, err
		}
	}
	// Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: cuBLASLt's A is our B, its B our A.
	var aRows, aCols, bRows, bCols int
	if key.transB {
		aRows, aCols = key.k, key.n
	} else {
		aRows, aCols = key.n, key.k
	}
	if key.transA {
		bRows, bCols = key.m, key.k
	} else {
		bRows, bCols = key.k, key.m
	}
	layouts := []struct {
		l          *C.cublasLtMatrixLayout_t
		dt         tensor.DType
		rows, cols int
		ld, stride int
		name       string
	}{
		{&p.la, key.ab, aRows, aCols, key.ldb, key.sb, "B"},
		{&p.lb, key.ab, bRows, bCols, key.lda, key.sa, "A"},
		{&p.lc, key.cdt, key.n, key.m, key.ldc, key.sc, "C"},
	}
	for _, l := range layouts {
		if err := setAttr("cublasLtMatrixLayoutCreate", C.tc_lt_layout_create(l.l, C.int(cudaType(l.dt)), C.uint64_t(l.rows), C.uint64_t(l.cols), C.int64_t(l.ld)),
			fmt.Sprintf("%s: %v %d×%d ld %d", l.name, l.dt, l.rows, l.cols, l.ld)); err != nil {
			return nil, err
		}
		if key.batch > 1 {
			bc, bs := C.int32_t(key.batch), C.int64_t(l.stride)
			if err := setAttr("cublasLtMatrixLayoutSetAttribute", C.tc_lt_layout_set(*l.l, layoutBatchCount, unsafe.Pointer(&bc), 4), "BATCH_COUNT"); err != nil {
				return nil, err
			}
			if err := setAttr("cublasLtMatrixLayoutSetAttribute", C.tc_lt_layout_set(*l.l, layoutBatchStride, unsafe.Pointer(&bs), 8), "STRIDED_BATCH_OFFSET"); err != nil {
				return nil, err
			}
		}
	}
	if algo, ws, found := lt.tableAlgo(key, p); found { // gemmtable.go
		p.algo, p.ws, p.fromTable = algo, C.size_t(ws), true
		lt.fromTable++
		ok = true
		return p, nil
	}
	pref, err := lt.preference(key)
	if err != nil {
		return nil, err
	}
	defer C.tc_lt_pref_destroy(pref)
	var returned C.int
	st := C.tc_lt_heuristic(lt.handle, p.desc, p.la, p.lb, p.lc, p.lc, pref, &p.algo, &p.ws, &returned)
	if st != 0 || returned == 0 {
		if st == 0 {
			st = 15 // CUBLAS_STATUS_NOT_SUPPORTED: the heuristic returned no algorithm
		}
		return nil, fmt.Errorf("%w: %w", cublasErr("cublasLtMatmulAlgoGetHeuristic", int(st),
			"no algorithm for %s", key), errNotSupported)
	}
	ok = true
	return p, nil
}

// preference creates the cuBLASLt preference every plan's heuristic query uses: the workspace size, split-K
// reduced in the compute type only, and key's pointer alignments. The caller destroys it.
func (lt *ltState) preference(key planKey) (C.cublasLtMatmulPreference_t, error) {
	var pref C.cublasLtMatmulPreference_t
	if err := setAttr("cublasLtMatmulPreferenceCreate", C.tc_lt_pref_create(&pref), ""); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			C.tc_lt_pref_destroy(pref)
		}
	}()
	wsb := C.uint64_t(lt.wsSize)
	if err := setAttr("cublasLtMatmulPreferenceSetAttribute", C.tc_lt_pref_set(pref, prefMaxWorkspace, unsafe.Pointer(&wsb), 8), "MAX_WORKSPACE_BYTES"); err != nil {
		return nil, err
	}
	// Split-K partial sums are reduced in the compute type (FP32) in the workspace, never in C's half type or
	// in place with atomics: C is rounded once and results are reproducible.
	red := C.uint32_t(reduceComputeType)
	if err := setAttr("cublasLtMatmulPreferenceSetAttribute", C.tc_lt_pref_set(pref, prefReduction, unsafe.Pointer(&red), 4), "REDUCTION_SCHEME_MASK"); err != nil {
		return nil, err
	}
	for i, al := range []int{key.alignB, key.alignA, key.alignC, key.alignC} { // cuBLASLt's A, B, C, D
		v := C.uint32_t(al)
		if err := setAttr("cublasLtMatmulPreferenceSetAttribute", C.tc_lt_pref_set(pref, C.int(prefMinAlignA+i), unsafe.Pointer(&v), 4), "MIN_ALIGNMENT"); err != nil {
			return nil, err
		}
	}
	ok = true
	return pref, nil
}

func (p *plan) destroy() {
	for _, l := range []C.cublasLtMatrixLayout_t{p.la, p.lb, p.lc} {
		if l != nil {
			C.tc_lt_layout_destroy(l)
		}
	}
	if p.desc != nil {
		C.tc_lt_desc_destroy(p.desc)
	}
}

// String describes a GEMM plan key for error messages.
func (k planKey) String() string {
	epi := "none"
	if k.biasT != tensor.Invalid {
		epi = "BIAS(" + k.biasT.String() + ")"
	}
	return fmt.Sprintf("M=%d N=%d K=%d batch=%d transA=%v transB=%v A/B=%v C=%v ld=(%d,%d,%d) strides=(%d,%d,%d) align=(%d,%d,%d) epilogue=%s tf32=%v",
		k.m, k.n, k.k, k.batch, k.transA, k.transB, k.ab, k.cdt, k.lda, k.ldb, k.ldc, k.sa, k.sb, k.sc, k.alignA, k.alignB, k.alignC, epi, k.tf32)
}

// ltMatmul runs one GEMM through cuBLASLt, choosing (once per plan key) and caching the algorithm, or an
// unbatched true-FP32 product without a bias through cublasSgemm (gemmf32.go). The error wraps
// errNotSupported when cuBLASLt has no algorithm, so the caller can fall back.
func (o *op) ltMatmul(mm matmul) error {
	if o.useBlas(mm) { // gemmf32.go
		if ok, err := o.blasMatmul(mm); ok {
			return err
		}
	}
	lt, err := o.cuBLASLt()
	if err != nil {
		return err
	}
	key := planKey{transA: mm.transA, transB: mm.transB, m: mm.m, n: mm.n, k: mm.k, batch: mm.batch,
		lda: mm.lda, ldb: mm.ldb, ldc: mm.ldc, ab: mm.ab, cdt: mm.cdt, biasT: mm.biasT,
		alignA: align(mm.a), alignB: align(mm.b), alignC: align(mm.c), tf32: mm.ab == tensor.F32 && o.b.allowTF32}
	if mm.batch > 1 {
		key.sa, key.sb, key.sc = mm.sa, mm.sb, mm.sc
	}
	e, ok := lt.plans[key]
	if !ok {
		p, err := lt.newPlan(key, mm)
		e = planEntry{p: p, err: err}
		lt.plans[key] = e
	}
	if e.err != nil {
		return e.err
	}
	if mm.beta != 0 && !e.beta {
		e.beta = true
		lt.plans[key] = e
	}
	p := e.p
	run := func() error {
		if mm.biasT != tensor.Invalid {
			bp := C.uint64_t(mm.bias)
			if err := setAttr("cublasLtMatmulDescSetAttribute", C.tc_lt_desc_set(p.desc, descBiasPointer, unsafe.Pointer(&bp), 8), "BIAS_POINTER"); err != nil {
				return err
			}
		}
		st := C.tc_lt_matmul(lt.handle, p.desc, C.float(mm.alpha), C.uintptr_t(mm.b), p.la, C.uintptr_t(mm.a), p.lb,
			C.float(mm.beta), C.uintptr_t(mm.c), p.lc, p.lc, &p.algo, C.uintptr_t(lt.ws), p.ws, streamHandle(o.b.stream))
		return cublasErr("cublasLtMatmul", int(st), "%s", key)
	}
	return o.stream(func() []byte {
		return fmt.Appendf(nil, "gemm %v %p %x %x %x %x %v %v %x", key, p, mm.a, mm.b, mm.c, mm.bias, mm.alpha, mm.beta, lt.ws)
	}, run)
}

// streamHandle returns the CUstream inside a gorgonia.org/cu Stream (a struct holding only that pointer).
func streamHandle(s cu.Stream) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&s)) }

// errNoAlgorithm reports whether err says cuBLASLt has no algorithm for a GEMM.
func errNoAlgorithm(err error) bool { return errors.Is(err, errNotSupported) }
