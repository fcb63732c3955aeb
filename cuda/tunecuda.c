//go:build cuda

// tunecuda.c: the C side of package cuda. See tunecuda.h for what each function does.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include "tunecuda.h"

// ---------------------------------------------------------------------------------------------------------
// cuInit interposer.
//
// gorgonia.org/cu calls cuInit from its package init and calls os.Exit(1) when it fails, so a CUDA build would
// die at start on a machine without a GPU (CI) before any test could skip. A definition of cuInit in the
// executable takes precedence over libcuda.so.1's for every caller (ELF symbol interposition), so this one
// forwards to the real cuInit (dlsym RTLD_NEXT), records the result, and reports success for the first call
// only: Open and Probe turn the recorded status into an error wrapping tensor.ErrNoDevice. Later calls return
// the real status.
static int tc_init_calls = 0;
static CUresult tc_init_status = CUDA_ERROR_NOT_INITIALIZED;

CUresult cuInit(unsigned int flags) {
	CUresult (*real)(unsigned int) = (CUresult(*)(unsigned int))dlsym(RTLD_NEXT, "cuInit");
	CUresult r = real ? real(flags) : CUDA_ERROR_NOT_FOUND;
	if (tc_init_calls++ == 0) {
		tc_init_status = r;
		return CUDA_SUCCESS;
	}
	if (r == CUDA_SUCCESS) tc_init_status = r;
	return r;
}

int tc_cu_init_status(void) { return (int)tc_init_status; }

const char *tc_cu_error_name(int code) {
	const char *s = NULL;
	if (cuGetErrorName((CUresult)code, &s) != CUDA_SUCCESS) return NULL;
	return s;
}

// ---------------------------------------------------------------------------------------------------------
// dlopen helpers.
void *tc_dlopen(const char *path, char *err, size_t errlen) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h && err && errlen) {
		const char *e = dlerror();
		strncpy(err, e ? e : "dlopen failed", errlen - 1);
		err[errlen - 1] = 0;
	}
	return h;
}

const char *tc_dlpath(void *handle) {
	struct link_map *lm = NULL;
	if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || lm == NULL) return "";
	return lm->l_name;
}

#define BIND(tab, h, field, sym)                                                                           \
	do {                                                                                               \
		*(void **)(&tab.field) = dlsym(h, sym);                                                    \
		if (!tab.field) return sym;                                                                \
	} while (0)

// ---------------------------------------------------------------------------------------------------------
// cuBLASLt function-pointer table.
static struct {
	size_t (*version)(void);
	cublasStatus_t (*create)(cublasLtHandle_t *);
	cublasStatus_t (*destroy)(cublasLtHandle_t);
	cublasStatus_t (*desc_create)(cublasLtMatmulDesc_t *, cublasComputeType_t, cudaDataType_t);
	cublasStatus_t (*desc_destroy)(cublasLtMatmulDesc_t);
	cublasStatus_t (*desc_set)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void *, size_t);
	cublasStatus_t (*layout_create)(cublasLtMatrixLayout_t *, cudaDataType, uint64_t, uint64_t, int64_t);
	cublasStatus_t (*layout_destroy)(cublasLtMatrixLayout_t);
	cublasStatus_t (*layout_set)(cublasLtMatrixLayout_t, cublasLtMatrixLayoutAttribute_t, const void *, size_t);
	cublasStatus_t (*pref_create)(cublasLtMatmulPreference_t *);
	cublasStatus_t (*pref_destroy)(cublasLtMatmulPreference_t);
	cublasStatus_t (*pref_set)(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t, const void *,
	                           size_t);
	cublasStatus_t (*heuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
	                            cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
	                            cublasLtMatmulPreference_t, int, cublasLtMatmulHeuristicResult_t[], int *);
	cublasStatus_t (*matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *, const void *,
	                         cublasLtMatrixLayout_t, const void *, cublasLtMatrixLayout_t, const void *,
	                         const void *, cublasLtMatrixLayout_t, void *, cublasLtMatrixLayout_t,
	                         const cublasLtMatmulAlgo_t *, void *, size_t, cudaStream_t);
	cublasStatus_t (*algo_ids)(cublasLtHandle_t, cublasComputeType_t, cudaDataType_t, cudaDataType_t,
	                           cudaDataType_t, cudaDataType_t, cudaDataType_t, int, int[], int *);
	cublasStatus_t (*algo_init)(cublasLtHandle_t, cublasComputeType_t, cudaDataType_t, cudaDataType_t,
	                            cudaDataType_t, cudaDataType_t, cudaDataType_t, int, cublasLtMatmulAlgo_t *);
	cublasStatus_t (*algo_check)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
	                             cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
	                             const cublasLtMatmulAlgo_t *, cublasLtMatmulHeuristicResult_t *);
	cublasStatus_t (*cap_get)(const cublasLtMatmulAlgo_t *, cublasLtMatmulAlgoCapAttributes_t, void *, size_t,
	                          size_t *);
	cublasStatus_t (*config_get)(const cublasLtMatmulAlgo_t *, cublasLtMatmulAlgoConfigAttributes_t, void *,
	                             size_t, size_t *);
	cublasStatus_t (*config_set)(cublasLtMatmulAlgo_t *, cublasLtMatmulAlgoConfigAttributes_t, const void *,
	                             size_t);
} lt;

const char *tc_lt_bind(void *h) {
	BIND(lt, h, version, "cublasLtGetVersion");
	BIND(lt, h, create, "cublasLtCreate");
	BIND(lt, h, destroy, "cublasLtDestroy");
	BIND(lt, h, desc_create, "cublasLtMatmulDescCreate");
	BIND(lt, h, desc_destroy, "cublasLtMatmulDescDestroy");
	BIND(lt, h, desc_set, "cublasLtMatmulDescSetAttribute");
	BIND(lt, h, layout_create, "cublasLtMatrixLayoutCreate");
	BIND(lt, h, layout_destroy, "cublasLtMatrixLayoutDestroy");
	BIND(lt, h, layout_set, "cublasLtMatrixLayoutSetAttribute");
	BIND(lt, h, pref_create, "cublasLtMatmulPreferenceCreate");
	BIND(lt, h, pref_destroy, "cublasLtMatmulPreferenceDestroy");
	BIND(lt, h, pref_set, "cublasLtMatmulPreferenceSetAttribute");
	BIND(lt, h, heuristic, "cublasLtMatmulAlgoGetHeuristic");
	BIND(lt, h, matmul, "cublasLtMatmul");
	BIND(lt, h, algo_ids, "cublasLtMatmulAlgoGetIds");
	BIND(lt, h, algo_init, "cublasLtMatmulAlgoInit");
	BIND(lt, h, algo_check, "cublasLtMatmulAlgoCheck");
	BIND(lt, h, cap_get, "cublasLtMatmulAlgoCapGetAttribute");
	BIND(lt, h, config_get, "cublasLtMatmulAlgoConfigGetAttribute");
	BIND(lt, h, config_set, "cublasLtMatmulAlgoConfigSetAttribute");
	return NULL;
}

size_t tc_lt_version(void) { return lt.version(); }
cublasStatus_t tc_lt_create(cublasLtHandle_t *h) { return lt.create(h); }
cublasStatus_t tc_lt_destroy(cublasLtHandle_t h) { return lt.destroy(h); }
cublasStatus_t tc_lt_desc_create(cublasLtMatmulDesc_t *d, int computeType, int scaleType) {
	return lt.desc_create(d, (cublasComputeType_t)computeType, (cudaDataType_t)scaleType);
}
cublasStatus_t tc_lt_desc_destroy(cublasLtMatmulDesc_t d) { return lt.desc_destroy(d); }
cublasStatus_t tc_lt_desc_set(cublasLtMatmulDesc_t d, int attr, const void *buf, size_t size) {
	return lt.desc_set(d, (cublasLtMatmulDescAttributes_t)attr, buf, size);
}
cublasStatus_t tc_lt_layout_create(cublasLtMatrixLayout_t *l, int dtype, uint64_t rows, uint64_t cols, int64_t ld) {
	return lt.layout_create(l, (cudaDataType)dtype, rows, cols, ld);
}
cublasStatus_t tc_lt_layout_destroy(cublasLtMatrixLayout_t l) { return lt.layout_destroy(l); }
cublasStatus_t tc_lt_layout_set(cublasLtMatrixLayout_t l, int attr, const void *buf, size_t size) {
	return lt.layout_set(l, (cublasLtMatrixLayoutAttribute_t)attr, buf, size);
}
cublasStatus_t tc_lt_pref_create(cublasLtMatmulPreference_t *p) { return lt.pref_create(p); }
cublasStatus_t tc_lt_pref_destroy(cublasLtMatmulPreference_t p) { return lt.pref_destroy(p); }
cublasStatus_t tc_lt_pref_set(cublasLtMatmulPreference_t p, int attr, const void *buf, size_t size) {
	return lt.pref_set(p, (cublasLtMatmulPreferenceAttributes_t)attr, buf, size);
}

cublasStatus_t tc_lt_heuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                               cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                               cublasLtMatmulPreference_t pref, cublasLtMatmulAlgo_t *algo, size_t *workspace,
                               int *returned) {
	cublasLtMatmulHeuristicResult_t res[1];
	memset(res, 0, sizeof res);
	*returned = 0;
	cublasStatus_t st = lt.heuristic(h, op, a, b, c, d, pref, 1, res, returned);
	if (st == CUBLAS_STATUS_SUCCESS && *returned > 0) {
		*algo = res[0].algo;
		*workspace = res[0].workspaceSize;
		if (res[0].state != CUBLAS_STATUS_SUCCESS) {
			*returned = 0;
			return res[0].state;
		}
	}
	return st;
}

cublasStatus_t tc_lt_matmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, float alpha, uintptr_t a,
                            cublasLtMatrixLayout_t al, uintptr_t b, cublasLtMatrixLayout_t bl, float beta,
                            uintptr_t c, cublasLtMatrixLayout_t cl, cublasLtMatrixLayout_t dl,
                            const cublasLtMatmulAlgo_t *algo, uintptr_t ws, size_t wsSize, void *stream) {
	return lt.matmul(h, op, &alpha, (const void *)a, al, (const void *)b, bl, &beta, (const void *)c, cl,
	                 (void *)c, dl, algo, (void *)ws, wsSize, (cudaStream_t)stream);
}

cublasStatus_t tc_lt_heuristic_n(cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                                 cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                 cublasLtMatmulPreference_t pref, int n, cublasLtMatmulAlgo_t *algos,
                                 size_t *workspace, int *state, float *waves, int *returned) {
	cublasLtMatmulHeuristicResult_t res[64];
	if (n > 64) n = 64;
	memset(res, 0, sizeof res);
	*returned = 0;
	cublasStatus_t st = lt.heuristic(h, op, a, b, c, d, pref, n, res, returned);
	if (st != CUBLAS_STATUS_SUCCESS) return st;
	for (int i = 0; i < *returned; i++) {
		algos[i] = res[i].algo;
		workspace[i] = res[i].workspaceSize;
		state[i] = (int)res[i].state;
		waves[i] = res[i].wavesCount;
	}
	return st;
}

cublasStatus_t tc_lt_algo_ids(cublasLtHandle_t h, int compute, int scale, int at, int bt, int ct, int dt, int n,
                              int *ids, int *returned) {
	return lt.algo_ids(h, (cublasComputeType_t)compute, (cudaDataType_t)scale, (cudaDataType_t)at,
	                   (cudaDataType_t)bt, (cudaDataType_t)ct, (cudaDataType_t)dt, n, ids, returned);
}

cublasStatus_t tc_lt_algo_init(cublasLtHandle_t h, int compute, int scale, int at, int bt, int ct, int dt, int id,
                               cublasLtMatmulAlgo_t *algo) {
	return lt.algo_init(h, (cublasComputeType_t)compute, (cudaDataType_t)scale, (cudaDataType_t)at,
	                    (cudaDataType_t)bt, (cudaDataType_t)ct, (cudaDataType_t)dt, id, algo);
}

cublasStatus_t tc_lt_algo_check(cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                                cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                const cublasLtMatmulAlgo_t *algo, size_t *workspace, float *waves) {
	cublasLtMatmulHeuristicResult_t res;
	memset(&res, 0, sizeof res);
	cublasStatus_t st = lt.algo_check(h, op, a, b, c, d, algo, &res);
	*workspace = res.workspaceSize;
	*waves = res.wavesCount;
	return st;
}

cublasStatus_t tc_lt_algo_cap_get(const cublasLtMatmulAlgo_t *algo, int attr, void *buf, size_t size,
                                  size_t *written) {
	return lt.cap_get(algo, (cublasLtMatmulAlgoCapAttributes_t)attr, buf, size, written);
}

cublasStatus_t tc_lt_algo_config_get(const cublasLtMatmulAlgo_t *algo, int attr, void *buf, size_t size,
                                     size_t *written) {
	return lt.config_get(algo, (cublasLtMatmulAlgoConfigAttributes_t)attr, buf, size, written);
}

cublasStatus_t tc_lt_algo_config_set(cublasLtMatmulAlgo_t *algo, int attr, const void *buf, size_t size) {
	return lt.config_set(algo, (cublasLtMatmulAlgoConfigAttributes_t)attr, buf, size);
}

// ---------------------------------------------------------------------------------------------------------
// cuBLAS (legacy API) function-pointer table.
static struct {
	cublasStatus_t (*create)(cublasHandle_t *);
	cublasStatus_t (*version)(cublasHandle_t, int *);
	cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
	cublasStatus_t (*set_workspace)(cublasHandle_t, void *, size_t);
	cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t);
	cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float *,
	                        const float *, int, const float *, int, const float *, float *, int);
	cublasStatus_t (*sgemm_batched)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
	                                const float *, const float *const *, int, const float *const *, int,
	                                const float *, float *const *, int, int);
} blas;

const char *tc_blas_bind(void *h) {
	BIND(blas, h, create, "cublasCreate_v2");
	BIND(blas, h, version, "cublasGetVersion_v2");
	BIND(blas, h, set_stream, "cublasSetStream_v2");
	BIND(blas, h, set_workspace, "cublasSetWorkspace_v2");
	BIND(blas, h, set_math_mode, "cublasSetMathMode");
	BIND(blas, h, sgemm, "cublasSgemm_v2");
	BIND(blas, h, sgemm_batched, "cublasSgemmBatched");
	return NULL;
}

cublasStatus_t tc_blas_create(cublasHandle_t *h) { return blas.create(h); }
cublasStatus_t tc_blas_version(cublasHandle_t h, int *version) { return blas.version(h, version); }

cublasStatus_t tc_blas_setup(cublasHandle_t h, void *stream, uintptr_t ws, size_t wsSize) {
	cublasStatus_t st = blas.set_stream(h, (cudaStream_t)stream);
	if (st != CUBLAS_STATUS_SUCCESS) return st;
	st = blas.set_workspace(h, (void *)ws, wsSize);
	if (st != CUBLAS_STATUS_SUCCESS) return st;
	return blas.set_math_mode(h, CUBLAS_DEFAULT_MATH);
}

cublasStatus_t tc_blas_sgemm(cublasHandle_t h, int transa, int transb, int m, int n, int k, float alpha, uintptr_t a,
                             int lda, uintptr_t b, int ldb, float beta, uintptr_t c, int ldc) {
	return blas.sgemm(h, transa ? CUBLAS_OP_T : CUBLAS_OP_N, transb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha,
	                  (const float *)a, lda, (const float *)b, ldb, &beta, (float *)c, ldc);
}

cublasStatus_t tc_blas_sgemm_batched(cublasHandle_t h, int transa, int transb, int m, int n, int k, float alpha,
                                     uintptr_t a, int lda, uintptr_t b, int ldb, float beta, uintptr_t c, int ldc,
                                     int batch) {
	return blas.sgemm_batched(h, transa ? CUBLAS_OP_T : CUBLAS_OP_N, transb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k,
	                          &alpha, (const float *const *)a, lda, (const float *const *)b, ldb, &beta,
	                          (float *const *)c, ldc, batch);
}

// ---------------------------------------------------------------------------------------------------------
// NVRTC function-pointer table.
static struct {
	nvrtcResult (*version)(int *, int *);
	const char *(*error)(nvrtcResult);
	nvrtcResult (*create)(nvrtcProgram *, const char *, const char *, int, const char *const *,
	                      const char *const *);
	nvrtcResult (*destroy)(nvrtcProgram *);
	nvrtcResult (*compile)(nvrtcProgram, int, const char *const *);
	nvrtcResult (*log_size)(nvrtcProgram, size_t *);
	nvrtcResult (*log)(nvrtcProgram, char *);
	nvrtcResult (*ptx_size)(nvrtcProgram, size_t *);
	nvrtcResult (*ptx)(nvrtcProgram, char *);
	nvrtcResult (*cubin_size)(nvrtcProgram, size_t *); // 11.1+
	nvrtcResult (*cubin)(nvrtcProgram, char *);         // 11.1+
	nvrtcResult (*num_archs)(int *);                    // 11.2+
	nvrtcResult (*archs)(int *);                        // 11.2+
} rt;

const char *tc_nvrtc_bind(void *h) {
	BIND(rt, h, version, "nvrtcVersion");
	BIND(rt, h, error, "nvrtcGetErrorString");
	BIND(rt, h, create, "nvrtcCreateProgram");
	BIND(rt, h, destroy, "nvrtcDestroyProgram");
	BIND(rt, h, compile, "nvrtcCompileProgram");
	BIND(rt, h, log_size, "nvrtcGetProgramLogSize");
	BIND(rt, h, log, "nvrtcGetProgramLog");
	BIND(rt, h, ptx_size, "nvrtcGetPTXSize");
	BIND(rt, h, ptx, "nvrtcGetPTX");
	// Optional entry points (older NVRTC): left NULL when absent.
	*(void **)(&rt.cubin_size) = dlsym(h, "nvrtcGetCUBINSize");
	*(void **)(&rt.cubin) = dlsym(h, "nvrtcGetCUBIN");
	*(void **)(&rt.num_archs) = dlsym(h, "nvrtcGetNumSupportedArchs");
	*(void **)(&rt.archs) = dlsym(h, "nvrtcGetSupportedArchs");
	return NULL;
}

const char *tc_nvrtc_error(int code) { return rt.error((nvrtcResult)code); }

int tc_nvrtc_version(int *major, int *minor) { return (int)rt.version(major, minor); }

int tc_nvrtc_archs(int *archs, int cap) {
	int n = 0;
	if (!rt.num_archs || !rt.archs) return -1;
	if (rt.num_archs(&n) != NVRTC_SUCCESS || n <= 0) return -1;
	int *all = (int *)malloc(sizeof(int) * (size_t)n);
	if (!all) return -1;
	if (rt.archs(all) != NVRTC_SUCCESS) {
		free(all);
		return -1;
	}
	int k = n < cap ? n : cap;
	memcpy(archs, all, sizeof(int) * (size_t)k);
	free(all);
	return k;
}

int tc_nvrtc_compile(const char *src, const char *name, int nheaders, const char **headers, const char **hnames,
                     int nopts, const char **opts, int cubin, char **out, size_t *outlen, char **log) {
	nvrtcProgram prog;
	*out = NULL;
	*outlen = 0;
	*log = NULL;
	nvrtcResult r = rt.create(&prog, src, name, nheaders, headers, hnames);
	if (r != NVRTC_SUCCESS) return (int)r;
	nvrtcResult cr = rt.compile(prog, nopts, opts);
	size_t ls = 0;
	if (rt.log_size(prog, &ls) == NVRTC_SUCCESS && ls > 0) {
		*log = (char *)malloc(ls + 1);
		if (*log) {
			rt.log(prog, *log);
			(*log)[ls] = 0;
		}
	}
	if (cr != NVRTC_SUCCESS) {
		rt.destroy(&prog);
		return (int)cr;
	}
	size_t n = 0;
	if (cubin) {
		if (!rt.cubin_size || !rt.cubin) {
			rt.destroy(&prog);
			return (int)NVRTC_ERROR_INVALID_OPTION;
		}
		r = rt.cubin_size(prog, &n);
	} else {
		r = rt.ptx_size(prog, &n);
	}
	if (r == NVRTC_SUCCESS) {
		*out = (char *)malloc(n ? n : 1);
		if (!*out) r = NVRTC_ERROR_OUT_OF_MEMORY;
		else r = cubin ? rt.cubin(prog, *out) : rt.ptx(prog, *out);
		*outlen = n;
	}
	rt.destroy(&prog);
	return (int)r;
}

// ---------------------------------------------------------------------------------------------------------
// NCCL function-pointer table (prototypes as in nccl.h of NCCL 2.x, with the types of tunecuda.h).
static struct {
	int (*version)(int *);
	const char *(*error)(int);
	const char *(*last_error)(tc_nccl_comm); // 2.13+
	int (*get_unique_id)(tc_nccl_unique_id *);
	int (*comm_init_rank)(tc_nccl_comm *, int, tc_nccl_unique_id, int);
	int (*all_reduce)(const void *, void *, size_t, int, int, tc_nccl_comm, void *);
	int (*group_start)(void);
	int (*group_end)(void);
	int (*comm_get_async_error)(tc_nccl_comm, int *);
	int (*comm_abort)(tc_nccl_comm);
	int (*comm_destroy)(tc_nccl_comm);
} nc;

const char *tc_nccl_bind(void *h) {
	BIND(nc, h, version, "ncclGetVersion");
	BIND(nc, h, error, "ncclGetErrorString");
	BIND(nc, h, get_unique_id, "ncclGetUniqueId");
	BIND(nc, h, comm_init_rank, "ncclCommInitRank");
	BIND(nc, h, all_reduce, "ncclAllReduce");
	BIND(nc, h, group_start, "ncclGroupStart");
	BIND(nc, h, group_end, "ncclGroupEnd");
	BIND(nc, h, comm_get_async_error, "ncclCommGetAsyncError");
	BIND(nc, h, comm_abort, "ncclCommAbort");
	BIND(nc, h, comm_destroy, "ncclCommDestroy");
	*(void **)(&nc.last_error) = dlsym(h, "ncclGetLastError");
	return NULL;
}

int tc_nccl_version(int *v) { return nc.version(v); }
const char *tc_nccl_error(int code) { return nc.error(code); }
const char *tc_nccl_last_error(tc_nccl_comm comm) {
	const char *s = nc.last_error ? nc.last_error(comm) : NULL;
	return s ? s : "";
}
int tc_nccl_get_unique_id(tc_nccl_unique_id *id) { return nc.get_unique_id(id); }
int tc_nccl_comm_init_rank(tc_nccl_comm *comm, int nranks, const tc_nccl_unique_id *id, int rank) {
	return nc.comm_init_rank(comm, nranks, *id, rank);
}
int tc_nccl_all_reduce(uintptr_t send, uintptr_t recv, size_t count, int dtype, int op, tc_nccl_comm comm,
                       void *stream) {
	return nc.all_reduce((const void *)send, (void *)recv, count, dtype, op, comm, stream);
}
int tc_nccl_group_start(void) { return nc.group_start(); }
int tc_nccl_group_end(void) { return nc.group_end(); }
int tc_nccl_comm_get_async_error(tc_nccl_comm comm, int *async_err) {
	return nc.comm_get_async_error(comm, async_err);
}
int tc_nccl_comm_abort(tc_nccl_comm comm) { return nc.comm_abort(comm); }
int tc_nccl_comm_destroy(tc_nccl_comm comm) { return nc.comm_destroy(comm); }
