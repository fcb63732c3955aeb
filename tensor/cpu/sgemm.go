package cpu

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// A blocked, packed FP32 GEMM in the style of BLIS (Van Zee and van de Geijn, "BLIS: A Framework for Rapidly
// Instantiating BLAS Functionality", ACM TOMS 2015; Goto and van de Geijn, "Anatomy of High-Performance Matrix
// Multiplication", ACM TOMS 2008). Loops, outermost first:
//
//	jc over N in blocks of gemmNC      B block (KC × NC) packed once, shared by every thread
//	pc over K in blocks of gemmKC      (in order: each element of C sums its K blocks first to last)
//	ic over M in blocks of mc          one task per block: A block (MC × KC) packed by the thread that owns it
//	jr over the block's NR panels       the B micro-panel (KC × NR) stays in L1
//	ir over the block's MR panels       the micro-kernel: an MR × NR tile of C in registers over kc steps
//
// Every element of C is written by one task, and its sum is formed in a fixed order (p ascending within a
// micro-kernel call, K blocks in order), so results do not depend on thread timing or core count.
const (
	gemmKC = 256  // K block: an A micro-panel (12 × 256 × 4 B = 12 KiB) and a B micro-panel (32 KiB) fit L1+L2
	gemmMC = 96   // M block: the packed A block (96 × 256 × 4 B = 96 KiB) stays in L2
	gemmNC = 3072 // N block: the packed B block (256 × 3072 × 4 B = 3 MiB) stays in L3
)

// microKernel is one register-tiled kernel: fn adds alpha·(packed A panel)·(packed B panel) into an MR×NR
// tile of C with row stride ldc (see sgemm_amd64.s for the exact contract).
type microKernel struct {
	name   string // the path's name, as TUNE_CPU_GEMM spells it
	mr, nr int    // tile rows and columns
	fn     func(kc int, a, b, c *float32, ldc int, alpha float32)
}

// gemmPath is the micro-kernel Gemm uses for FP32 products; nil means gonum's Sgemm (the pure-Go fallback).
var gemmPath *microKernel

func init() {
	k, err := selectGemmPath(os.Getenv("TUNE_CPU_GEMM"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "tune: warning: %v\n", err)
	}
	gemmPath = k
	hasSIMD = hasSIMD && k != nil && k.name == "avx512" // a forced slower path runs no AVX-512 code at all
}

// GemmKernel names the FP32 GEMM path the CPU backend uses: "avx512 (12x32)", "avx2 (6x16)" or "gonum".
// The environment variable TUNE_CPU_GEMM=avx512|avx2|gonum (any case) forces a path (for tests and
// comparisons); a path the processor cannot run, or an unknown value, is refused with a warning saying which
// and the best available one is used.
func GemmKernel() string {
	if gemmPath == nil {
		return "gonum"
	}
	return fmt.Sprintf("%s (%dx%d)", gemmPath.name, gemmPath.mr, gemmPath.nr)
}

// gemmPathNames are the values TUNE_CPU_GEMM takes (any case).
var gemmPathNames = []string{"auto", "avx512", "avx2", "gonum"}

// selectGemmPath picks the path named by want ("" or "auto": the fastest the CPU supports), in any case.
func selectGemmPath(want string) (*microKernel, error) {
	avail := availableKernels() // fastest first
	orig := want
	want = strings.ToLower(strings.TrimSpace(want))
	if want != "" && !slices.Contains(gemmPathNames, want) {
		var best *microKernel
		if len(avail) > 0 {
			best = avail[0]
		}
		return best, fmt.Errorf("TUNE_CPU_GEMM=%q is not a GEMM path (auto, avx512, avx2 or gonum); using the fastest", orig)
	}
	switch want {
	case "", "auto":
		if len(avail) > 0 {
			return avail[0], nil
		}
		return nil, nil
	case "gonum":
		return nil, nil
	}
	for _, k := range avail {
		if k.name == want {
			return k, nil
		}
	}
	names := []string{"gonum"}
	for _, k := range avail {
		names = append(names, k.name)
	}
	var best *microKernel
	if len(avail) > 0 {
		best = avail[0]
	}
	return best, fmt.Errorf("TUNE_CPU_GEMM=%q is not available on this processor (available: %v); using the fastest", orig, names)
}

// packPool recycles packing buffers (A blocks per task, B blocks per call), so steady-state training steps do
// not allocate them again.
var packPool sync.Pool

func getPack(n int) *[]float32 {
	if p, ok := packPool.Get().(*[]float32); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	s := make([]float32, n)
	return &s
}

// sgemmPacked computes c = alpha·op(a)·op(b) + beta·c for row-major m×n c (row stride ldc), op(a) m×k, op(b)
// k×n, with the micro-kernel mk; parallel says whether it may use every core (false when the caller already
// runs batch members in parallel). beta == 0 does not read c.
func sgemmPacked(mk *microKernel, tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int,
	beta float32, c []float32, ldc int, parallel bool) {
	scaleRows(c, m, n, ldc, beta)
	if k == 0 || m == 0 || n == 0 {
		return
	}
	workers := 1
	if parallel && m*n*k >= 1<<18 {
		workers = runtime.GOMAXPROCS(0)
	}
	// Shrink the M block (in whole MR panels) until every worker has at least two blocks to take.
	mc := gemmMC - gemmMC%mk.mr
	for mc > mk.mr && (m+mc-1)/mc < 2*workers {
		mc -= mk.mr
	}
	for jc := 0; jc < n; jc += gemmNC {
		nc := min(gemmNC, n-jc)
		panels := (nc + mk.nr - 1) / mk.nr
		for pc := 0; pc < k; pc += gemmKC {
			kc := min(gemmKC, k-pc)
			bp := getPack(panels * kc * mk.nr)
			packB(*bp, tB, b, ldb, pc, jc, kc, nc, mk.nr)
			blocks := (m + mc - 1) / mc
			run := func(ib int) {
				ic := ib * mc
				mcb := min(mc, m-ic)
				apLen := ((mcb + mk.mr - 1) / mk.mr) * kc * mk.mr
				ap := getPack(apLen + mk.mr*mk.nr) // the packed block, then the edge tile
				packA(*ap, tA, a, lda, ic, pc, mcb, kc, mk.mr)
				macroKernel(mk, (*ap)[:apLen], *bp, (*ap)[apLen:], c[ic*ldc+jc:], ldc, mcb, nc, kc, alpha)
				packPool.Put(ap)
			}
			forEachTask(blocks, workers, run)
			packPool.Put(bp)
		}
	}
}

// forEachTask runs fn(0..n-1), on every core when workers > 1 (parallelChunks, one task per chunk for tasks this
// large); which goroutine runs a task never changes its result.
func forEachTask(n, workers int, fn func(i int)) {
	if workers <= 1 || n <= 1 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	parallelChunks(n, minChunkWork, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			fn(i)
		}
	})
}

// macroKernel multiplies one packed A block (mc × kc) by the packed B block (kc × nc) into c (row stride ldc):
// full tiles go straight to the micro-kernel; edge tiles go through a zeroed MR×NR scratch tile whose valid part
// is then added to c. edge holds MR·NR floats (a heap buffer: a pointer passed through mk.fn escapes).
func macroKernel(mk *microKernel, ap, bp, edge, c []float32, ldc, mc, nc, kc int, alpha float32) {
	for jr := 0; jr < nc; jr += mk.nr {
		bpan := bp[(jr/mk.nr)*kc*mk.nr:]
		nr := min(mk.nr, nc-jr)
		for ir := 0; ir < mc; ir += mk.mr {
			apan := ap[(ir/mk.mr)*kc*mk.mr:]
			mr := min(mk.mr, mc-ir)
			if mr == mk.mr && nr == mk.nr {
				mk.fn(kc, &apan[0], &bpan[0], &c[ir*ldc+jr], ldc, alpha)
				continue
			}
			tile := edge[:mk.mr*mk.nr]
			clear(tile)
			mk.fn(kc, &apan[0], &bpan[0], &tile[0], mk.nr, 1)
			for i := 0; i < mr; i++ {
				row := c[(ir+i)*ldc+jr : (ir+i)*ldc+jr+nr]
				for j := range row {
					row[j] += alpha * tile[i*mk.nr+j]
				}
			}
		}
	}
}

// packA copies rows [i0, i0+mc) and columns [p0, p0+kc) of op(a) into MR-row panels: panel r holds, for each p,
// the MR values op(a)[i0+r·MR+i][p0+p] at dst[r·kc·MR + p·MR + i]; rows past mc are zero.
func packA(dst []float32, tA bool, a []float32, lda, i0, p0, mc, kc, mr int) {
	for r := 0; r*mr < mc; r++ {
		pan := dst[r*kc*mr : (r+1)*kc*mr]
		rows := min(mr, mc-r*mr)
		if rows < mr {
			clear(pan)
		}
		row0 := i0 + r*mr
		if tA { // a is stored k×m: op(a)[row][p] = a[p·lda + row], so each p copies `rows` contiguous values
			for p := 0; p < kc; p++ {
				copy(pan[p*mr:p*mr+rows], a[(p0+p)*lda+row0:(p0+p)*lda+row0+rows])
			}
			continue
		}
		for i := 0; i < rows; i++ {
			src := a[(row0+i)*lda+p0 : (row0+i)*lda+p0+kc]
			for p, v := range src {
				pan[p*mr+i] = v
			}
		}
	}
}

// packB copies rows [p0, p0+kc) and columns [j0, j0+nc) of op(b) into NR-column panels: panel s holds, for
// each p, the NR values op(b)[p0+p][j0+s·NR+j] at dst[s·kc·NR + p·NR + j]; columns past nc are zero.
func packB(dst []float32, tB bool, b []float32, ldb, p0, j0, kc, nc, nr int) {
	for s := 0; s*nr < nc; s++ {
		pan := dst[s*kc*nr : (s+1)*kc*nr]
		cols := min(nr, nc-s*nr)
		if cols < nr {
			clear(pan)
		}
		j := j0 + s*nr
		if tB { // b is stored n×k: op(b)[p][col] = b[col·ldb + p]
			for jj := 0; jj < cols; jj++ {
				src := b[(j+jj)*ldb+p0 : (j+jj)*ldb+p0+kc]
				for p, v := range src {
					pan[p*nr+jj] = v
				}
			}
		} else {
			for p := 0; p < kc; p++ {
				copy(pan[p*nr:p*nr+cols], b[(p0+p)*ldb+j:(p0+p)*ldb+j+cols])
			}
		}
	}
}
