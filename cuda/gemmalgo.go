//go:build cuda

package cuda

// #include "tunecuda.h"
import "C"

import (
	"fmt"
	"unsafe"
)

// cuBLASLt algorithm configuration attributes (cublasLtMatmulAlgoConfigAttributes_t, cublasLt.h of CUDA 11.8 and
// 13) and capability attributes (cublasLtMatmulAlgoCapAttributes_t).
const (
	cfgID         = 0 // CUBLASLT_ALGO_CONFIG_ID (int32, read-only: set by cublasLtMatmulAlgoInit)
	cfgTile       = 1 // CUBLASLT_ALGO_CONFIG_TILE_ID (uint32)
	cfgSplitK     = 2 // CUBLASLT_ALGO_CONFIG_SPLITK_NUM (int32)
	cfgReduction  = 3 // CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME (uint32)
	cfgSwizzle    = 4 // CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING (uint32)
	cfgCustom     = 5 // CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION (uint32)
	cfgStages     = 6 // CUBLASLT_ALGO_CONFIG_STAGES_ID (uint32)
	cfgInnerShape = 7 // CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID (uint16)
	cfgCluster    = 8 // CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID (uint16)

	capSplitK    = 0  // CUBLASLT_ALGO_CAP_SPLITK_SUPPORT (int32)
	capReduction = 1  // CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK (uint32)
	capSwizzle   = 2  // CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT (uint32)
	capTiles     = 6  // CUBLASLT_ALGO_CAP_TILE_IDS (uint32 array)
	capCustomMax = 7  // CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX (int32)
	capEpilogue  = 12 // CUBLASLT_ALGO_CAP_EPILOGUE_MASK (uint32)
	capStages    = 13 // CUBLASLT_ALGO_CAP_STAGES_IDS (uint32 array)
	capMinAlignA = 16 // CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_A_BYTES (uint32; B, C, D follow)

	reduceNone = 0 // CUBLASLT_REDUCTION_SCHEME_NONE
)

// cfgAttrs lists the settable attributes in the order build sets them.
var cfgAttrs = []struct {
	attr  int
	field func(*algoConfig) *int
}{
	{cfgTile, func(c *algoConfig) *int { return &c.Tile }},
	{cfgStages, func(c *algoConfig) *int { return &c.Stages }},
	{cfgSplitK, func(c *algoConfig) *int { return &c.SplitK }},
	{cfgReduction, func(c *algoConfig) *int { return &c.Reduction }},
	{cfgSwizzle, func(c *algoConfig) *int { return &c.Swizzle }},
	{cfgCustom, func(c *algoConfig) *int { return &c.Custom }},
	{cfgInnerShape, func(c *algoConfig) *int { return &c.InnerShape }},
	{cfgCluster, func(c *algoConfig) *int { return &c.Cluster }},
}

// cfgSize returns the size in bytes of algo's configuration attribute attr (0 when the library does not know it).
func cfgSize(algo *C.cublasLtMatmulAlgo_t, attr int) int {
	var need C.size_t
	if C.tc_lt_algo_config_get(algo, C.int(attr), nil, 0, &need) != 0 || need > 8 {
		return 0
	}
	return int(need)
}

// readAlgoConfig returns algo's configuration attributes (an attribute the library does not know reads as 0).
func readAlgoConfig(algo *C.cublasLtMatmulAlgo_t) algoConfig {
	var c algoConfig
	get := func(attr int) int {
		size := cfgSize(algo, attr)
		if size == 0 {
			return 0
		}
		var buf [8]byte
		var written C.size_t
		if C.tc_lt_algo_config_get(algo, C.int(attr), unsafe.Pointer(&buf[0]), C.size_t(size), &written) != 0 {
			return 0
		}
		switch size {
		case 1:
			return int(buf[0])
		case 2:
			return int(*(*uint16)(unsafe.Pointer(&buf[0])))
		case 4:
			return int(*(*int32)(unsafe.Pointer(&buf[0])))
		default:
			return int(*(*int64)(unsafe.Pointer(&buf[0])))
		}
	}
	c.ID = get(cfgID)
	for _, a := range cfgAttrs {
		*a.field(&c) = get(a.attr)
	}
	return c
}

// ltTypes are the compute, scale and A/B/C/D data types cublasLtMatmulAlgoInit and cublasLtMatmulAlgoGetIds take.
type ltTypes struct{ compute, scale, ab, cd int }

// typesOf returns key's cuBLASLt types.
func typesOf(key planKey) ltTypes {
	compute := ltCompute32F
	if key.tf32 {
		compute = ltCompute32FTF32
	}
	return ltTypes{compute: compute, scale: cudaR32F, ab: cudaType(key.ab), cd: cudaType(key.cdt)}
}

// build initializes algo as c describes it: cublasLtMatmulAlgoInit(c.ID), then every settable attribute.
func (c algoConfig) build(h C.cublasLtHandle_t, t ltTypes, algo *C.cublasLtMatmulAlgo_t) error {
	if st := C.tc_lt_algo_init(h, C.int(t.compute), C.int(t.scale), C.int(t.ab), C.int(t.ab), C.int(t.cd), C.int(t.cd), C.int(c.ID), algo); st != 0 {
		return cublasErr("cublasLtMatmulAlgoInit", int(st), "algo %d", c.ID)
	}
	for _, a := range cfgAttrs {
		v := *a.field(&c)
		size := cfgSize(algo, a.attr)
		if size == 0 {
			if v == 0 {
				continue
			}
			return fmt.Errorf("cuda: cuBLASLt %d has no algorithm attribute %d (%s)", ltVersion(), a.attr, c)
		}
		var buf [8]byte
		switch size {
		case 1:
			buf[0] = byte(v)
		case 2:
			*(*uint16)(unsafe.Pointer(&buf[0])) = uint16(v)
		case 4:
			*(*int32)(unsafe.Pointer(&buf[0])) = int32(v)
		default:
			*(*int64)(unsafe.Pointer(&buf[0])) = int64(v)
		}
		if st := C.tc_lt_algo_config_set(algo, C.int(a.attr), unsafe.Pointer(&buf[0]), C.size_t(size)); st != 0 {
			return cublasErr("cublasLtMatmulAlgoConfigSetAttribute", int(st), "attribute %d = %d (%s)", a.attr, v, c)
		}
	}
	return nil
}

// check runs cublasLtMatmulAlgoCheck of algo against p's descriptors and returns the workspace it needs.
func (p *plan) check(h C.cublasLtHandle_t, algo *C.cublasLtMatmulAlgo_t) (ws int, waves float32, err error) {
	var w C.size_t
	var wv C.float
	if st := C.tc_lt_algo_check(h, p.desc, p.la, p.lb, p.lc, p.lc, algo, &w, &wv); st != 0 {
		return 0, 0, cublasErr("cublasLtMatmulAlgoCheck", int(st), "")
	}
	return int(w), float32(wv), nil
}

// capInts reads an algorithm capability that is an array of uint32 (tiles, stages) or one int32.
func capInts(algo *C.cublasLtMatmulAlgo_t, attr int) []int {
	var need C.size_t
	if C.tc_lt_algo_cap_get(algo, C.int(attr), nil, 0, &need) != 0 || need == 0 {
		return nil
	}
	buf := make([]uint32, (need+3)/4)
	var written C.size_t
	if C.tc_lt_algo_cap_get(algo, C.int(attr), unsafe.Pointer(&buf[0]), C.size_t(len(buf)*4), &written) != 0 {
		return nil
	}
	out := make([]int, int(written)/4)
	for i := range out {
		out[i] = int(buf[i])
	}
	return out
}

// alignedFor reports whether the pointer alignments algo needs (CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_A..D_BYTES)
// are within key's.
func alignedFor(algo *C.cublasLtMatmulAlgo_t, key planKey) bool {
	for i, have := range []int{key.alignB, key.alignA, key.alignC, key.alignC} { // cuBLASLt's A, B, C, D
		if need := capInts(algo, capMinAlignA+i); len(need) > 0 && need[0] > have {
			return false
		}
	}
	return true
}

// tableAlgo returns the algorithm the GEMM table (gemmtable.go) names for key, built and accepted by
// cublasLtMatmulAlgoCheck for p's descriptors, with its workspace; false when the table has no entry for key
// on this GPU and library, or the library no longer takes it.
func (lt *ltState) tableAlgo(key planKey, p *plan) (C.cublasLtMatmulAlgo_t, int, bool) {
	var algo C.cublasLtMatmulAlgo_t
	if gemmTableOff || key.batch > 1 || key.tf32 || lt.table == nil {
		return algo, 0, false
	}
	major, minor := ltMajorMinor(ltVersion())
	s := gemmShape{sm: lt.sm, ltMajor: major, ltMinor: minor, ab: key.ab, c: key.cdt, bias: key.biasT,
		transA: key.transA, transB: key.transB, m: key.m, n: key.n, k: key.k, lda: key.lda, ldb: key.ldb, ldc: key.ldc}
	cfg, ok := lt.table.lookup(s, lt.gpu)
	if !ok || cfg.build(lt.handle, typesOf(key), &algo) != nil || !alignedFor(&algo, key) {
		return algo, 0, false
	}
	ws, _, err := p.check(lt.handle, &algo)
	if err != nil || ws > lt.wsSize {
		return algo, 0, false
	}
	return algo, ws, true
}
