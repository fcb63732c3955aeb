//go:build cuda

package cuda

// #include "tunecuda.h"
import "C"

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/tune-ml/tune/tensor"
)

// SurveyGemms times, for every GEMM shape b has planned so far (run a training step first), the algorithms
// cuBLASLt offers: up to Heuristics heuristic results under the plans' preference (workspace, split-K reduced
// in FP32 only, the pointers' alignments) and, with Enumerate, the configurations cublasLtMatmulAlgoGetIds,
// the capabilities and cublasLtMatmulAlgoCheck admit (no split-K reduction other than in the compute type).
// Each candidate runs on random operands (beta as the step used it), timed with CUDA events (median of 7
// groups of calls of at least 0.2 ms), is run twice more to check that it gives identical bits, and is compared
// with heuristic #0's result (max |Δ| / max |C₀|). It writes a table per shape and one "TABLE {json}" line per
// shape with the fastest deterministic candidate within tolerance (the input of cuda/gemmtable.json). It
// returns an error only when b is not a CUDA backend or the device fails.
func SurveyGemms(tb tensor.Backend, w io.Writer, opt GemmSurveyOptions) error {
	b, ok := tb.(*Backend)
	if !ok {
		return fmt.Errorf("cuda: SurveyGemms needs a CUDA backend, not %s", tb.Name())
	}
	if opt.Heuristics <= 0 {
		opt.Heuristics = 32
	}
	if opt.Budget <= 0 {
		opt.Budget = 800 * time.Millisecond
	}
	if opt.MinDim <= 0 {
		opt.MinDim = 64
	}
	if opt.Top <= 0 {
		opt.Top = 6
	}
	if b.lt == nil {
		return fmt.Errorf("cuda: SurveyGemms: no GEMM has run on this backend yet")
	}
	if b.graph != nil {
		return fmt.Errorf("cuda: SurveyGemms runs eagerly, not while a step graph is capturing or replaying")
	}
	if err := b.Synchronize(); err != nil {
		return err
	}
	var keys []planKey
	for k, e := range b.lt.plans {
		if e.err != nil || k.batch > 1 || min(k.m, k.n, k.k) <= opt.MinDim {
			continue
		}
		keys = append(keys, k)
	}
	// BF16 first, then the largest products first (a survey cut short has the ones that matter most).
	sort.Slice(keys, func(i, j int) bool {
		a, c := keys[i], keys[j]
		if (a.ab == tensor.BF16) != (c.ab == tensor.BF16) {
			return a.ab == tensor.BF16
		}
		if fa, fc := a.m*a.n*a.k, c.m*c.n*c.k; fa != fc {
			return fa > fc
		}
		return a.String() < c.String()
	})
	fmt.Fprintf(w, "GEMM algorithm survey: %s (sm_%d), cuBLASLt %d, %d shapes; times are medians of CUDA-event groups, µs per GEMM\n",
		b.info.Name, b.sm, ltVersion(), len(keys))
	for _, k := range keys {
		if err := b.surveyOne(w, k, b.lt.plans[k].beta, opt); err != nil {
			return err
		}
	}
	return nil
}

// candidate is one algorithm the survey times.
type candidate struct {
	from    string // "h3": heuristic result 3; "n": a neighbour of the heuristic results; "e": enumerated
	algo    C.cublasLtMatmulAlgo_t
	ws      int
	waves   float32
	cfg     algoConfig
	us      float64
	det     bool    // two runs gave identical bits
	rel     float64 // max |C − C₀| / max |C₀|
	bad     int     // non-finite elements
	err     string
	rebuilt string // for the chosen one: whether algoConfig.build reproduces it
}

// surveyTensors are one survey shape's operands on the device.
type surveyTensors struct {
	a, b, c, c0, r1, ref, bias *tensor.Tensor
}

func (b *Backend) surveyOne(w io.Writer, key planKey, beta bool, opt GemmSurveyOptions) (err error) {
	lt := b.lt
	p := lt.plans[key].p
	ar, ac := key.m, key.k
	if key.transA {
		ar, ac = key.k, key.m
	}
	br, bc := key.k, key.n
	if key.transB {
		br, bc = key.n, key.k
	}
	elems := func(rows, cols, ld int) int { return (rows-1)*ld + cols }
	var t surveyTensors
	var all []*tensor.Tensor
	defer func() {
		for _, x := range all {
			b.Free(x)
		}
	}()
	alloc := func(d tensor.DType, n int) (*tensor.Tensor, error) {
		x, err := b.Alloc(d, n)
		if err == nil {
			all = append(all, x)
		}
		return x, err
	}
	nc := elems(key.m, key.n, key.ldc)
	for _, s := range []struct {
		p *(*tensor.Tensor)
		d tensor.DType
		n int
	}{
		{&t.a, key.ab, elems(ar, ac, key.lda)}, {&t.b, key.ab, elems(br, bc, key.ldb)},
		{&t.c, key.cdt, nc}, {&t.c0, key.cdt, nc}, {&t.r1, key.cdt, nc}, {&t.ref, key.cdt, nc},
	} {
		if *s.p, err = alloc(s.d, s.n); err != nil {
			return err
		}
	}
	if key.biasT != tensor.Invalid {
		if t.bias, err = alloc(key.biasT, key.n); err != nil {
			return err
		}
	}
	for i, x := range []*tensor.Tensor{t.a, t.b, t.c0, t.bias} {
		if x != nil {
			if _, err := b.fillPattern(x, uint64(11+i)); err != nil {
				return err
			}
		}
	}
	alpha, betaV := float32(1), float32(0)
	if beta {
		betaV = 1
	}
	if key.biasT != tensor.Invalid {
		bp := C.uint64_t(addr(t.bias))
		if err := setAttr("cublasLtMatmulDescSetAttribute", C.tc_lt_desc_set(p.desc, descBiasPointer, unsafe.Pointer(&bp), 8), "BIAS_POINTER"); err != nil {
			return err
		}
	}
	// The heuristic, cublasLtMatmulAlgoInit and cublasLtMatmulAlgoCheck below run on this locked thread with
	// the backend's context current, as the matmuls do (Backend.raw).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := b.raw(func() error { return nil }); err != nil {
		return err
	}
	matmul := func(algo *C.cublasLtMatmulAlgo_t, ws int) error {
		return b.raw(func() error {
			st := C.tc_lt_matmul(lt.handle, p.desc, C.float(alpha), C.uintptr_t(addr(t.b)), p.la, C.uintptr_t(addr(t.a)), p.lb,
				C.float(betaV), C.uintptr_t(addr(t.c)), p.lc, p.lc, algo, C.uintptr_t(lt.ws), C.size_t(ws), streamHandle(b.stream))
			return cublasErr("cublasLtMatmul", int(st), "%s", key)
		})
	}
	copyC := func(dst, src *tensor.Tensor) error {
		return b.raw(func() error {
			return driverErr("cuMemcpyDtoDAsync", cu.MemcpyDtoDAsync(cu.DevicePtr(addr(dst)), cu.DevicePtr(addr(src)), int64(nc*key.cdt.Size()), b.stream), "survey C")
		})
	}
	// runOnce computes C from C₀ with algo into dst.
	runOnce := func(algo *C.cublasLtMatmulAlgo_t, ws int, dst *tensor.Tensor) error {
		if err := copyC(t.c, t.c0); err != nil {
			return err
		}
		if err := matmul(algo, ws); err != nil {
			return err
		}
		if dst != t.c {
			return copyC(dst, t.c)
		}
		return nil
	}
	timeIt := func(algo *C.cublasLtMatmulAlgo_t, ws int, groups int) (float64, error) {
		for range 2 {
			if err := matmul(algo, ws); err != nil {
				return 0, err
			}
		}
		ms, err := b.Time(func() error { return matmul(algo, ws) })
		if err != nil {
			return 0, err
		}
		inner := max(1, int(math.Ceil(0.2/max(ms, 1e-3))))
		var s []float64
		for range groups {
			ms, err := b.Time(func() error {
				for range inner {
					if err := matmul(algo, ws); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return 0, err
			}
			s = append(s, ms*1e3/float64(inner))
		}
		slices.Sort(s)
		return s[len(s)/2], nil
	}
	// verify runs c twice (checking identical bits) and compares with the reference.
	verify := func(c *candidate) error {
		if err := runOnce(&c.algo, c.ws, t.r1); err != nil {
			return err
		}
		if err := runOnce(&c.algo, c.ws, t.c); err != nil {
			return err
		}
		d1, err := b.diff(t.c, t.r1, nc, key.cdt)
		if err != nil {
			return err
		}
		d2, err := b.diff(t.c, t.ref, nc, key.cdt)
		if err != nil {
			return err
		}
		c.det = d1.differ == 0
		c.bad = d2.bad
		if d2.ymax > 0 {
			c.rel = float64(d2.dmax / d2.ymax)
		}
		return nil
	}

	// Heuristic results.
	pref, err := lt.preference(key)
	if err != nil {
		return err
	}
	n := opt.Heuristics
	algos := make([]C.cublasLtMatmulAlgo_t, n)
	wss := make([]C.size_t, n)
	states := make([]C.int, n)
	waves := make([]C.float, n)
	var returned C.int
	st := C.tc_lt_heuristic_n(lt.handle, p.desc, p.la, p.lb, p.lc, p.lc, pref, C.int(n), &algos[0], &wss[0], &states[0], &waves[0], &returned)
	C.tc_lt_pref_destroy(pref)
	if st != 0 || returned == 0 {
		fmt.Fprintf(w, "\n%s: heuristic: status %d, %d results\n", key, int(st), int(returned))
		return nil
	}
	var cands []*candidate
	seen := map[[8]uint64]bool{}
	for i := range int(returned) {
		if states[i] != 0 {
			continue
		}
		c := &candidate{from: fmt.Sprintf("h%d", i), algo: algos[i], ws: int(wss[i]), waves: float32(waves[i])}
		c.cfg = readAlgoConfig(&c.algo)
		seen[*(*[8]uint64)(unsafe.Pointer(&c.algo))] = true
		cands = append(cands, c)
	}
	if len(cands) == 0 || cands[0].from != "h0" {
		fmt.Fprintf(w, "\n%s: heuristic #0 not usable\n", key)
		return nil
	}
	// The reference: heuristic #0's C.
	if err := runOnce(&cands[0].algo, cands[0].ws, t.ref); err != nil {
		return err
	}
	for _, c := range cands {
		if c.us, err = timeIt(&c.algo, c.ws, 7); err != nil {
			c.err, c.us = err.Error(), math.Inf(1)
			continue
		}
		if err := verify(c); err != nil {
			return err
		}
	}
	heur := len(cands)

	// Enumerated configurations that cublasLtMatmulAlgoCheck admits: the heuristic results' neighbours (their
	// IDs with every tile × custom option × cluster shape, "n"), then every ID × tile × stages × swizzle (×
	// split-K for GEMMs of under two waves of 128×128 tiles, "e"); timed briefly in that order (the second list
	// one ID after another in turn) until the budget is spent; the 8 fastest re-timed and verified.
	tried, checked, nIDs, admitted := 0, 0, 0, 0
	// admit checks a built candidate against the plan and the workspace limit, fills in its workspace size and
	// waves, and reports whether it is usable and its algorithm bytes are new (it marks them seen).
	admit := func(c *candidate) bool {
		checked++
		ws, wv, err := p.check(lt.handle, &c.algo)
		if err != nil || ws > lt.wsSize {
			return false
		}
		c.ws, c.waves = ws, wv
		bytes := *(*[8]uint64)(unsafe.Pointer(&c.algo))
		if seen[bytes] {
			return false
		}
		seen[bytes] = true
		return true
	}
	if opt.Enumerate {
		ty := typesOf(key)
		ids := make([]C.int, 256)
		var nids C.int
		if C.tc_lt_algo_ids(lt.handle, C.int(ty.compute), C.int(ty.scale), C.int(ty.ab), C.int(ty.ab), C.int(ty.cd), C.int(ty.cd), 256, &ids[0], &nids) == 0 {
			fewTiles := (key.m/128+1)*(key.n/128+1) < 2*b.sms
			// Neighbours of the heuristic results first: for each of their IDs, every tile × custom option ×
			// cluster shape (the heuristic's own tiles and clusters first) with the stages and swizzles they use.
			var hot []*candidate
			hotEnd := time.Now().Add(opt.Budget / 2)
			hotIDs := map[int]bool{}
		hotLoop:
			for _, h := range cands {
				id := h.cfg.ID
				if hotIDs[id] {
					continue
				}
				hotIDs[id] = true
				var base C.cublasLtMatmulAlgo_t
				if C.tc_lt_algo_init(lt.handle, C.int(ty.compute), C.int(ty.scale), C.int(ty.ab), C.int(ty.ab), C.int(ty.cd), C.int(ty.cd), C.int(id), &base) != 0 {
					continue
				}
				var tiles, clusters, stages, swz []int
				add := func(l []int, v int) []int {
					if !slices.Contains(l, v) {
						l = append(l, v)
					}
					return l
				}
				for _, c := range cands {
					if c.cfg.ID == id {
						tiles, clusters = add(tiles, c.cfg.Tile), add(clusters, c.cfg.Cluster)
						stages, swz = add(stages, c.cfg.Stages), add(swz, c.cfg.Swizzle)
					}
				}
				for _, tl := range capInts(&base, capTiles) {
					tiles = add(tiles, tl)
				}
				for cl := range 21 {
					clusters = add(clusters, cl)
				}
				customMax := 0
				if m := capInts(&base, capCustomMax); len(m) > 0 {
					customMax = m[0]
				}
				for _, tile := range tiles {
					for _, cl := range clusters {
						for custom := 0; custom <= customMax; custom++ {
							for _, stg := range stages {
								for _, sw := range swz {
									if time.Now().After(hotEnd) {
										break hotLoop
									}
									c := &candidate{from: "n", cfg: algoConfig{ID: id, Tile: tile, Stages: stg, SplitK: 1, Swizzle: sw, Custom: custom, Cluster: cl}}
									if c.cfg.build(lt.handle, ty, &c.algo) != nil || !alignedFor(&c.algo, key) {
										continue
									}
									if admit(c) {
										hot = append(hot, c)
									}
								}
							}
						}
					}
				}
			}
			collectEnd := time.Now().Add(opt.Budget / 4)
			var perID [][]*candidate
		ids:
			for _, id := range ids[:nids] {
				var base C.cublasLtMatmulAlgo_t
				if C.tc_lt_algo_init(lt.handle, C.int(ty.compute), C.int(ty.scale), C.int(ty.ab), C.int(ty.ab), C.int(ty.cd), C.int(ty.cd), id, &base) != 0 {
					continue
				}
				if key.biasT != tensor.Invalid {
					if m := capInts(&base, capEpilogue); len(m) == 0 || m[0]&epilogueBias == 0 {
						continue
					}
				}
				if !alignedFor(&base, key) {
					continue
				}
				tiles := capInts(&base, capTiles)
				if len(tiles) == 0 {
					tiles = []int{0}
				}
				stages := capInts(&base, capStages)
				if len(stages) == 0 {
					stages = []int{0}
				}
				swz := []int{0}
				if s := capInts(&base, capSwizzle); len(s) > 0 && s[0] != 0 {
					swz = append(swz, 1)
				}
				splits := []int{1}
				if s := capInts(&base, capSplitK); fewTiles && len(s) > 0 && s[0] != 0 {
					if r := capInts(&base, capReduction); len(r) > 0 && r[0]&reduceComputeType != 0 {
						for _, s := range []int{2, 3, 4, 6} {
							if key.k/s >= 256 {
								splits = append(splits, s)
							}
						}
					}
				}
				var mine []*candidate
				for _, tile := range tiles {
					for _, stg := range stages {
						for _, sw := range swz {
							for _, sk := range splits {
								if time.Now().After(collectEnd) {
									perID = append(perID, mine)
									break ids
								}
								cfg := algoConfig{ID: int(id), Tile: tile, Stages: stg, SplitK: sk, Swizzle: sw}
								if sk > 1 {
									cfg.Reduction = reduceComputeType
								}
								c := &candidate{from: "e", cfg: cfg}
								if cfg.build(lt.handle, ty, &c.algo) != nil {
									continue
								}
								if admit(c) {
									mine = append(mine, c)
								}
							}
						}
					}
				}
				perID = append(perID, mine)
			}
			order := hot // then round robin over the IDs
			for r := 0; ; r++ {
				added := false
				for _, l := range perID {
					if r < len(l) {
						order, added = append(order, l[r]), true
					}
				}
				if !added {
					break
				}
			}
			deadline := time.Now().Add(opt.Budget)
			var enum []*candidate
			for _, c := range order {
				if time.Now().After(deadline) {
					break
				}
				tried++
				if c.us, err = timeIt(&c.algo, c.ws, 3); err != nil {
					continue
				}
				c.cfg = readAlgoConfig(&c.algo)
				enum = append(enum, c)
			}
			nIDs, admitted = int(nids), len(order)
			sort.Slice(enum, func(i, j int) bool { return enum[i].us < enum[j].us })
			for _, c := range enum[:min(len(enum), 8)] {
				if c.us, err = timeIt(&c.algo, c.ws, 7); err != nil {
					continue
				}
				if err := verify(c); err != nil {
					return err
				}
				cands = append(cands, c)
			}
		}
	}

	tol := 2e-2 // half C: a few units of bf16 rounding, relative to the largest |C|
	if key.cdt == tensor.F32 {
		tol = 1e-4
	}
	h0 := cands[0]
	var best *candidate
	for _, c := range cands {
		if c.err == "" && c.det && c.bad == 0 && c.rel <= tol && (c.cfg.SplitK <= 1 || c.cfg.Reduction == reduceComputeType) &&
			(best == nil || c.us < best.us) {
			best = c
		}
	}
	flops := 2 * float64(key.m) * float64(key.n) * float64(key.k)
	fmt.Fprintf(w, "\n%s  [%s beta=%v]\n  %d heuristic results; enumeration: %d IDs, %d configs checked, %d admitted, %d timed\n",
		shortKey(key), key, beta, heur, nIDs, checked, admitted, tried)
	ranked := slices.Clone(cands)
	sort.SliceStable(ranked, func(i, j int) bool { return ranked[i].us < ranked[j].us })
	show := ranked[:min(len(ranked), opt.Top)]
	if !slices.Contains(show, h0) {
		show = append(show, h0)
	}
	for _, c := range show {
		fmt.Fprintf(w, "  %-4s %8.2f µs %6.1f TF  det=%-5v rel=%.1e ws=%-8d waves=%.2f  %s %s\n",
			c.from, c.us, flops/(c.us*1e-6)/1e12, c.det, c.rel, c.ws, c.waves, c.cfg, c.err)
	}
	if best == nil {
		fmt.Fprintf(w, "  no deterministic candidate within tolerance\n")
		return nil
	}
	// Does the configuration alone rebuild the chosen algorithm (what the table stores)?
	var re C.cublasLtMatmulAlgo_t
	best.rebuilt = "build failed"
	if err := best.cfg.build(lt.handle, typesOf(key), &re); err == nil {
		if *(*[8]uint64)(unsafe.Pointer(&re)) == *(*[8]uint64)(unsafe.Pointer(&best.algo)) {
			best.rebuilt = "same bytes"
		} else if _, _, err := p.check(lt.handle, &re); err != nil {
			best.rebuilt = "differs, check: " + err.Error()
		} else {
			best.rebuilt = "differs"
			if err := runOnce(&best.algo, best.ws, t.r1); err != nil {
				return err
			}
			if err := runOnce(&re, best.ws, t.c); err != nil {
				return err
			}
			d, err := b.diff(t.c, t.r1, nc, key.cdt)
			if err != nil {
				return err
			}
			if d.differ == 0 {
				best.rebuilt = "differs in bytes, same bits"
			}
			if us, err := timeIt(&re, best.ws, 7); err == nil {
				best.rebuilt += fmt.Sprintf(", %.2f µs", us)
			}
		}
	}
	fmt.Fprintf(w, "  best %s: %.2f µs vs h0 %.2f µs (%.2fx), rebuild from config: %s\n", best.from, best.us, h0.us, h0.us/best.us, best.rebuilt)
	row := map[string]any{"sm": b.sm, "gpu": b.info.Name, "cublaslt": ltVersion(), "ab": key.ab.String(), "c": key.cdt.String(),
		"transA": key.transA, "transB": key.transB, "m": key.m, "n": key.n, "k": key.k, "lda": key.lda, "ldb": key.ldb, "ldc": key.ldc,
		"align": []int{key.alignA, key.alignB, key.alignC}, "bias": key.biasT.String(), "beta": beta,
		"config": best.cfg, "from": best.from, "ws": best.ws, "us": round2(best.us), "h0_us": round2(h0.us), "h0": h0.cfg,
		"rel": best.rel, "rebuilt": best.rebuilt, "raw": fmt.Sprintf("%016x", *(*[8]uint64)(unsafe.Pointer(&best.algo)))}
	js, _ := json.Marshal(row)
	fmt.Fprintf(w, "TABLE %s\n", js)
	return nil
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

// shortKey is "bf16 4096×768×768 NT →bf16 +bias(bf16)" (as the bench breakdown names GEMMs).
func shortKey(k planKey) string {
	t := func(b bool) string {
		if b {
			return "T"
		}
		return "N"
	}
	low := func(d tensor.DType) string { return strings.ToLower(d.String()) }
	s := fmt.Sprintf("%s %d×%d×%d %s%s →%s", low(k.ab), k.m, k.n, k.k, t(k.transA), t(k.transB), low(k.cdt))
	if k.biasT != tensor.Invalid {
		s += " +bias(" + low(k.biasT) + ")"
	}
	return s
}

// surveyDiff is mat_diff's result.
type surveyDiff struct {
	dmax, ymax  float32
	differ, bad int
}

// diff compares x with y (n elements of dtype d) on the device.
func (b *Backend) diff(x, y *tensor.Tensor, n int, d tensor.DType) (r surveyDiff, err error) {
	res, err := b.Alloc(tensor.I32, 4)
	if err != nil {
		return r, err
	}
	defer b.Free(res)
	if err := func() (err error) {
		o := b.begin("GemmSurvey")
		defer o.end(&err)
		o.fail(driverErr("cuMemsetD32Async", cu.MemsetD32Async(cu.DevicePtr(addr(res)), 0, 4, b.stream), "mat_diff"))
		o.launch("elementwise.cu", "mat_diff", o.gridFor(n), 1, 256, 1, addr(res), addr(x), addr(y), uint64(d), i64(n))
		return
	}(); err != nil {
		return r, err
	}
	v := make([]int32, 4)
	if err := b.Download(v, res); err != nil {
		return r, err
	}
	return surveyDiff{dmax: math.Float32frombits(uint32(v[0])), differ: int(uint32(v[1])),
		ymax: math.Float32frombits(uint32(v[2])), bad: int(uint32(v[3]))}, nil
}

// raw runs fn, which calls the CUDA driver or cuBLASLt directly, as an op of b: b locked, its context current.
func (b *Backend) raw(fn func() error) (err error) {
	o := b.begin("GemmSurvey")
	defer o.end(&err)
	o.fail(fn())
	return
}

// fillPattern fills x with pseudo-random normal values: a block of 2²⁰+7 generated on the host (seeded),
// uploaded once and copied over x on the device, so element e of x is the block's e mod len(block). It returns
// the block (before rounding to x's dtype).
func (b *Backend) fillPattern(x *tensor.Tensor, seed uint64) ([]float32, error) {
	const period = 1<<20 + 7
	n := x.Numel()
	m := min(n, period)
	v := make([]float32, m)
	s := seed*0x9E3779B97F4A7C15 + 1
	for i := range v { // Box–Muller on a xorshift stream
		next := func() float64 {
			s ^= s << 13
			s ^= s >> 7
			s ^= s << 17
			return (float64(s>>11) + 0.5) / (1 << 53)
		}
		u1, u2 := next(), next()
		v[i] = float32(math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2))
	}
	head, err := x.View(0, m)
	if err != nil {
		return nil, err
	}
	if err := b.Upload(head, v); err != nil {
		return nil, err
	}
	es := x.DType.Size()
	for off := m; off < n; off += m {
		c := min(m, n-off)
		if err := b.raw(func() error {
			return driverErr("cuMemcpyDtoDAsync", cu.MemcpyDtoDAsync(cu.DevicePtr(addr(x)+uint64(off*es)), cu.DevicePtr(addr(x)), int64(c*es), b.stream), "survey fill")
		}); err != nil {
			return nil, err
		}
	}
	return v, nil
}
