// tunecuda.h declares the C glue of package cuda (tunecuda.c): the cuInit interposer, dlopen helpers, and
// function-pointer tables for cuBLASLt, cuBLAS and NVRTC, which are opened at run time by soname so that one binary runs
// with CUDA 11.8, 12.x or 13.x libraries. The 11.8 headers supply the types; the argument and enum layouts used
// here are the same in 11.8 and 13 (see cublasLt.h of CUDA 11.8 and 13).
#ifndef TUNECUDA_H
#define TUNECUDA_H

#include <stddef.h>
#include <stdint.h>
#include <cuda.h>
#include <cublasLt.h>
#include <nvrtc.h>

// tc_cu_init_status returns what the real cuInit returned the first time it was called (gorgonia.org/cu calls it
// from its package init and would exit the process on failure; see tunecuda.c).
int tc_cu_init_status(void);
// tc_cu_error_name returns the CUresult's name (CUDA_ERROR_OUT_OF_MEMORY ...), or NULL for an unknown code.
const char *tc_cu_error_name(int code);

// dlopen helpers. tc_dlopen returns NULL and copies dlerror() into err (errlen bytes) on failure.
void *tc_dlopen(const char *path, char *err, size_t errlen);
// tc_dlpath returns the absolute path of the file a handle was loaded from (from its link map).
const char *tc_dlpath(void *handle);

// --- cuBLASLt ---
// tc_lt_bind resolves every cuBLASLt entry point from handle; it returns NULL, or the name of the first
// symbol that is missing.
const char *tc_lt_bind(void *handle);
size_t tc_lt_version(void);
cublasStatus_t tc_lt_create(cublasLtHandle_t *h);
cublasStatus_t tc_lt_destroy(cublasLtHandle_t h);
cublasStatus_t tc_lt_desc_create(cublasLtMatmulDesc_t *d, int computeType, int scaleType);
cublasStatus_t tc_lt_desc_destroy(cublasLtMatmulDesc_t d);
cublasStatus_t tc_lt_desc_set(cublasLtMatmulDesc_t d, int attr, const void *buf, size_t size);
cublasStatus_t tc_lt_layout_create(cublasLtMatrixLayout_t *l, int dtype, uint64_t rows, uint64_t cols, int64_t ld);
cublasStatus_t tc_lt_layout_destroy(cublasLtMatrixLayout_t l);
cublasStatus_t tc_lt_layout_set(cublasLtMatrixLayout_t l, int attr, const void *buf, size_t size);
cublasStatus_t tc_lt_pref_create(cublasLtMatmulPreference_t *p);
cublasStatus_t tc_lt_pref_destroy(cublasLtMatmulPreference_t p);
cublasStatus_t tc_lt_pref_set(cublasLtMatmulPreference_t p, int attr, const void *buf, size_t size);
// tc_lt_heuristic asks for the best algorithm; it writes it to algo (64 bytes) and its workspace size, and
// returns the number of results through returned.
cublasStatus_t tc_lt_heuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                               cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                               cublasLtMatmulPreference_t pref, cublasLtMatmulAlgo_t *algo, size_t *workspace,
                               int *returned);
cublasStatus_t tc_lt_matmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, float alpha, uintptr_t a,
                            cublasLtMatrixLayout_t al, uintptr_t b, cublasLtMatrixLayout_t bl, float beta,
                            uintptr_t c, cublasLtMatrixLayout_t cl, cublasLtMatrixLayout_t dl,
                            const cublasLtMatmulAlgo_t *algo, uintptr_t ws, size_t wsSize, void *stream);

// tc_lt_heuristic_n asks for up to n algorithms; for each returned one it writes the algo (64 bytes), its
// workspace size, its state and its wavesCount, and returns the number of results through returned.
cublasStatus_t tc_lt_heuristic_n(cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                                 cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                 cublasLtMatmulPreference_t pref, int n, cublasLtMatmulAlgo_t *algos,
                                 size_t *workspace, int *state, float *waves, int *returned);
cublasStatus_t tc_lt_algo_ids(cublasLtHandle_t h, int compute, int scale, int at, int bt, int ct, int dt, int n,
                              int *ids, int *returned);
cublasStatus_t tc_lt_algo_init(cublasLtHandle_t h, int compute, int scale, int at, int bt, int ct, int dt, int id,
                               cublasLtMatmulAlgo_t *algo);
// tc_lt_algo_check is cublasLtMatmulAlgoCheck; it writes the result's workspace size and wavesCount.
cublasStatus_t tc_lt_algo_check(cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                                cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                const cublasLtMatmulAlgo_t *algo, size_t *workspace, float *waves);
cublasStatus_t tc_lt_algo_cap_get(const cublasLtMatmulAlgo_t *algo, int attr, void *buf, size_t size,
                                  size_t *written);
cublasStatus_t tc_lt_algo_config_get(const cublasLtMatmulAlgo_t *algo, int attr, void *buf, size_t size,
                                     size_t *written);
cublasStatus_t tc_lt_algo_config_set(cublasLtMatmulAlgo_t *algo, int attr, const void *buf, size_t size);

// --- cuBLAS (the legacy API, for unbatched FP32 products: see gemmf32.go) ---
const char *tc_blas_bind(void *handle);
cublasStatus_t tc_blas_create(cublasHandle_t *h);
cublasStatus_t tc_blas_version(cublasHandle_t h, int *version);
// tc_blas_setup sets the handle's stream and workspace and the default (FP32, no TF32) math mode.
cublasStatus_t tc_blas_setup(cublasHandle_t h, void *stream, uintptr_t ws, size_t wsSize);
// tc_blas_sgemm is cublasSgemm in column-major terms (transa/transb 0 = N, 1 = T).
cublasStatus_t tc_blas_sgemm(cublasHandle_t h, int transa, int transb, int m, int n, int k, float alpha, uintptr_t a,
                             int lda, uintptr_t b, int ldb, float beta, uintptr_t c, int ldc);
// tc_blas_sgemm_batched is cublasSgemmBatched: a, b and c are device arrays of batch matrix addresses.
cublasStatus_t tc_blas_sgemm_batched(cublasHandle_t h, int transa, int transb, int m, int n, int k, float alpha,
                                     uintptr_t a, int lda, uintptr_t b, int ldb, float beta, uintptr_t c, int ldc,
                                     int batch);

// --- NVRTC ---
const char *tc_nvrtc_bind(void *handle);
const char *tc_nvrtc_error(int code);
int tc_nvrtc_version(int *major, int *minor);
// tc_nvrtc_archs fills archs (cap entries) with the supported SM versions (e.g. 90) and returns how many, or
// -1 when this NVRTC cannot list them (before 11.2).
int tc_nvrtc_archs(int *archs, int cap);
// tc_nvrtc_compile compiles src (named name) with the headers and options. On success *out holds the CUBIN
// (cubin != 0) or PTX image and *outlen its size; *log holds the compile log either way. Free both with free().
int tc_nvrtc_compile(const char *src, const char *name, int nheaders, const char **headers, const char **hnames,
                     int nopts, const char **opts, int cubin, char **out, size_t *outlen, char **log);

// --- NCCL ---
// There is no nccl.h at build time, so the few types used are declared here with NCCL's layout (nccl.h of
// NCCL 2.x: `typedef struct { char internal[NCCL_UNIQUE_ID_BYTES]; } ncclUniqueId;` with
// NCCL_UNIQUE_ID_BYTES 128, `typedef struct ncclComm* ncclComm_t;`, and ncclResult_t, ncclDataType_t and
// ncclRedOp_t as C enums, i.e. ints).
typedef struct {
	char internal[128];
} tc_nccl_unique_id;
typedef void *tc_nccl_comm;

const char *tc_nccl_bind(void *handle);
int tc_nccl_version(int *version);
const char *tc_nccl_error(int code);
// tc_nccl_last_error returns ncclGetLastError(comm) (NCCL 2.13+), or "" when this NCCL lacks it.
const char *tc_nccl_last_error(tc_nccl_comm comm);
int tc_nccl_get_unique_id(tc_nccl_unique_id *id);
// tc_nccl_comm_init_rank calls ncclCommInitRank, passing *id by value as NCCL expects.
int tc_nccl_comm_init_rank(tc_nccl_comm *comm, int nranks, const tc_nccl_unique_id *id, int rank);
int tc_nccl_all_reduce(uintptr_t send, uintptr_t recv, size_t count, int dtype, int op, tc_nccl_comm comm,
                       void *stream);
int tc_nccl_group_start(void);
int tc_nccl_group_end(void);
int tc_nccl_comm_get_async_error(tc_nccl_comm comm, int *async_err);
int tc_nccl_comm_abort(tc_nccl_comm comm);
int tc_nccl_comm_destroy(tc_nccl_comm comm);

#endif
