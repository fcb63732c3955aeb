//go:build cuda

package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tune-ml/tune/cuda"
)

// TestWgmmaProbe runs the one-warpgroup products of kernels/wgmma_probe.cu (wgmma through kernels/wgmma.cuh:
// 128-byte-swizzled K-major and MN-major descriptors, A from shared memory and from registers, N = 64 and 128,
// K = 64 and 128) and requires C to equal the CPU's product exactly: the operands are multiples of 1/4 in
// [−2, 2], so every product and partial sum is exact in FP32. It skips unless the device is sm_90 and the
// NVRTC can compile sm_90a. When an MN-major case fails it also tries the descriptor with its two byte offsets
// exchanged and says whether that matches, to tell a wrong field from a wrong layout.
func TestWgmmaProbe(t *testing.T) {
	gpu := openOrSkip(t)
	if sm := cuda.DeviceSM(gpu); sm != 90 {
		t.Skipf("wgmma needs an sm_90 device, this one is sm_%d", sm)
	}
	cases := []struct {
		name   string
		n, k   int
		mn     bool
		altLBO int // the MN-major descriptor with leading and stride byte offsets exchanged
	}{
		{"wgmma_probe_ss_k_n64_k64", 64, 64, false, 0},
		{"wgmma_probe_ss_k_n128_k128", 128, 128, false, 0},
		{"wgmma_probe_ss_mn_n128_k64", 128, 64, true, 1024},
		{"wgmma_probe_rs_k_n128_k128", 128, 128, false, 0},
		{"wgmma_probe_rs_mn_n64_k64", 64, 64, true, 1024},
		{"wgmma_probe_rs_mn_n128_k128", 128, 128, true, 1024},
	}
	rng := rand.New(rand.NewPCG(7, 8))
	bits := func(n int) ([]uint16, []float32) {
		u, f := make([]uint16, n), make([]float32, n)
		for i := range u {
			f[i] = float32(rng.IntN(17)-8) / 4
			u[i] = uint16(math.Float32bits(f[i]) >> 16) // exact: a quarter-integer has 3 significant bits
		}
		return u, f
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			au, af := bits(64 * c.k)
			bu, bf := bits(c.n * c.k)
			want := make([]float32, 64*c.n)
			for i := 0; i < 64; i++ {
				for j := 0; j < c.n; j++ {
					var s float32
					for l := 0; l < c.k; l++ {
						bv := bf[j*c.k+l] // K-major: B is n×k
						if c.mn {
							bv = bf[l*c.n+j] // MN-major: B is k×n
						}
						s += af[i*c.k+l] * bv
					}
					want[i*c.n+j] = s
				}
			}
			got, err := cuda.WgmmaProbe(gpu, c.name, c.n, c.k, au, bu, 0, 0)
			if cuda.NoSM90a(err) {
				t.Skipf("no sm_90a here: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			bad := mismatches(got, want)
			if bad == 0 {
				return
			}
			t.Errorf("%d of %d elements differ from the CPU product; first: %s", bad, len(want), firstMismatch(got, want, c.n))
			if c.mn {
				alt, err := cuda.WgmmaProbe(gpu, c.name, c.n, c.k, au, bu, c.altLBO, c.k*128)
				if err == nil {
					t.Logf("with the byte offsets exchanged (LBO %d, SBO %d): %d elements differ", c.altLBO, c.k*128, mismatches(alt, want))
				}
			}
		})
	}
}

func mismatches(got, want []float32) int {
	n := 0
	for i := range want {
		if got[i] != want[i] {
			n++
		}
	}
	return n
}

func firstMismatch(got, want []float32, cols int) string {
	for i := range want {
		if got[i] != want[i] {
			return fmt.Sprintf("C[%d][%d] = %g, want %g", i/cols, i%cols, got[i], want[i])
		}
	}
	return "none"
}
