//go:build cuda

package cuda

// #include "tunecuda.h"
import "C"

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/tune-ml/tune/tensor"
)

// True-FP32 products (F32 A, B and C; CUBLAS_COMPUTE_32F semantics, no TF32) without a fused bias and without
// a batch — the Linear layers' input and weight gradients — run on the legacy cuBLAS API (cublasSgemm), as
// torch.mm runs them; the rest stays on cuBLASLt. On the H200 with CUDA 13.1 (BenchmarkGemmF32, call d1 of
// session 5) cuBLASLt's first heuristic result for the weight gradient dW = dYᵀ·X of BERT-base's FFN at
// 64 × 512 tokens (3072×768×32768) takes 3475 µs where cublasSgemm's kernel (cutlass_80_simt_sgemm_128x256,
// PyTorch's too) takes 2958, and 3146 against 2968 µs for 768×3072×32768; the other shapes are within 2%.
// Both libraries pick their kernel from the shape, the GPU and the library version alone (no timing at run
// time), so a process and its resumed successor run the same kernels and give the same bits.
//
// TUNE_GEMM_F32=lt sends every product to cuBLASLt (the rule before); tests and benchmarks switch through
// export_test.go. Without a loadable libcublas the products stay on cuBLASLt.
var gemmF32Lt = os.Getenv("TUNE_GEMM_F32") == "lt"

// blasState is a backend's legacy cuBLAS handle; it shares the cuBLASLt workspace (both run on the backend's
// one stream, one call after another).
type blasState struct {
	handle C.cublasHandle_t
}

var libCublas = &library{
	name:     "cublas",
	sonames:  []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"},
	override: "TUNE_CUBLAS",
	bind: func(h unsafe.Pointer) error {
		if missing := C.tc_blas_bind(h); missing != nil {
			return fmt.Errorf("symbol %s is missing", C.GoString(missing))
		}
		return nil
	},
}

// useBlas reports whether mm runs on the legacy cuBLAS API.
func (o *op) useBlas(mm matmul) bool {
	return !gemmF32Lt && !o.b.allowTF32 && mm.ab == tensor.F32 && mm.cdt == tensor.F32 && mm.biasT == tensor.Invalid &&
		mm.batch <= 1 && o.b.blasErr == nil
}

// cuBLAS returns the backend's legacy cuBLAS state, loading the library and creating the handle on first use.
// A library that cannot be loaded is remembered in b.blasErr (the products then stay on cuBLASLt).
func (o *op) cuBLAS() (*blasState, error) {
	if o.b.blas != nil {
		return o.b.blas, nil
	}
	lt, err := o.cuBLASLt()
	if err != nil {
		return nil, err
	}
	if _, err := libCublas.load(); err != nil {
		o.b.blasErr = err
		return nil, err
	}
	bs := &blasState{}
	if err := cublasErr("cublasCreate", int(C.tc_blas_create(&bs.handle)), ""); err != nil {
		return nil, err
	}
	if err := cublasErr("cublasSetStream/SetWorkspace/SetMathMode", int(C.tc_blas_setup(bs.handle, streamHandle(o.b.stream),
		C.uintptr_t(lt.ws), C.size_t(lt.wsSize))), "CUBLAS_DEFAULT_MATH, %d MiB workspace", lt.wsSize>>20); err != nil {
		return nil, err
	}
	o.b.blas = bs
	return bs, nil
}

// blasMatmul runs one unbatched FP32 GEMM (no epilogue) through cublasSgemm, in ltMatmul's column-major terms:
// Cᵀ = op(B)ᵀ·op(A)ᵀ. It reports false, queueing nothing, when libcublas cannot be loaded.
func (o *op) blasMatmul(mm matmul) (bool, error) {
	return o.blasQueue(mm, "sgemm", func(bs *blasState, ta, tb C.int) C.cublasStatus_t {
		return C.tc_blas_sgemm(bs.handle, ta, tb, C.int(mm.n), C.int(mm.m), C.int(mm.k), C.float(mm.alpha),
			C.uintptr_t(mm.b), C.int(mm.ldb), C.uintptr_t(mm.a), C.int(mm.lda), C.float(mm.beta), C.uintptr_t(mm.c), C.int(mm.ldc))
	})
}

// blasMatmulPtrs runs a batch of mm.batch FP32 GEMMs through cublasSgemmBatched: mm.a, mm.b and mm.c are the
// device addresses of arrays of mm.batch matrix addresses each (not matrices), the rest as blasMatmul. The FP32
// attention path (attention_f32.go) reaches every (batch member, head) pair of a layout that no stride
// describes this way. It reports false, queueing nothing, when libcublas cannot be loaded.
func (o *op) blasMatmulPtrs(mm matmul) (bool, error) {
	return o.blasQueue(mm, "sgemmBatched", func(bs *blasState, ta, tb C.int) C.cublasStatus_t {
		return C.tc_blas_sgemm_batched(bs.handle, ta, tb, C.int(mm.n), C.int(mm.m), C.int(mm.k), C.float(mm.alpha),
			C.uintptr_t(mm.b), C.int(mm.ldb), C.uintptr_t(mm.a), C.int(mm.lda), C.float(mm.beta), C.uintptr_t(mm.c), C.int(mm.ldc),
			C.int(mm.batch))
	})
}

// blasQueue queues call (one legacy cuBLAS product of mm, named name in errors and graph keys) on the backend's
// stream with the handle and mm's transposes in column-major terms (A's becomes B's). It reports false,
// queueing nothing, when libcublas cannot be loaded.
func (o *op) blasQueue(mm matmul, name string, call func(bs *blasState, ta, tb C.int) C.cublasStatus_t) (bool, error) {
	bs, err := o.cuBLAS()
	if err != nil {
		if o.b.blasErr != nil { // no libcublas: cuBLASLt instead
			return false, nil
		}
		return true, err
	}
	var ta, tb C.int
	if mm.transB {
		ta = 1
	}
	if mm.transA {
		tb = 1
	}
	run := func() error {
		return cublasErr("cublas"+strings.ToUpper(name[:1])+name[1:], int(call(bs, ta, tb)), "M=%d N=%d K=%d batch=%d transA=%v transB=%v ld=(%d,%d,%d)",
			mm.m, mm.n, mm.k, mm.batch, mm.transA, mm.transB, mm.lda, mm.ldb, mm.ldc)
	}
	return true, o.stream(func() []byte {
		return fmt.Appendf(nil, "%s %d %d %d %d %v %v %d %d %d %x %x %x %v %v", name, mm.m, mm.n, mm.k, mm.batch,
			mm.transA, mm.transB, mm.lda, mm.ldb, mm.ldc, mm.a, mm.b, mm.c, mm.alpha, mm.beta)
	}, run)
}
