// Package tensortest runs tests on every compiled backend. Tests are written once against tensor.Backend and
// ForEachBackend runs them on the CPU reference backend and, in a binary built with -tags cuda on a machine with
// a GPU, on the CUDA backend too (candle's test_device!, gomlx's TestOfficialBackends).
//
// Simplest use, a test that runs on each backend:
//
//	func TestGELU(t *testing.T) {
//		tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
//			x := tensortest.Upload(t, b, tensor.BF16, []float32{-1, 0, 1})
//			y := tensortest.Alloc(t, b, tensor.F32, 3)
//			if err := b.GELU(y, x); err != nil {
//				t.Fatal(err)
//			}
//			got := tensortest.Download(t, b, y) // []float32
//			...
//		})
//	}
//
// The subtests are named after the backends ("cpu", "cuda"); a backend compiled in without a device (a CUDA
// build on a machine without a GPU) is skipped with its reason, so the same test binary runs anywhere.
//
// Comparing with a reference: RelErr gives the per-tensor relative error max|a − b| / max|b| and the worst
// element's index, MaxAbsDiff the absolute one, and Tolerance(dt) the bound tune holds a backend's output to
// against the CPU reference: about one unit in the last place of the stored dtype (2⁻¹⁰ for F16, 2⁻⁷ for BF16),
// FP32 accumulation-order noise for F32, applied as |got − want| ≤ Tolerance(dt)·(|want| + rms(want)).
//
// Full control: RunOpSuite checks every op of a backend, forward and backward, against the CPU reference on
// random inputs with odd shapes, in F32, F16 and BF16 storage, with every tensor an unaligned view inside a
// guarded buffer, outputs pre-filled with NaN (an element the op fails to write shows up) and inputs checked
// unchanged. A backend passes it through the Backend interface alone:
//
//	func TestOps(t *testing.T) { tensortest.ForEachBackend(t, tensortest.RunOpSuite) }
//
// Importing the package links both backends in (the cuda package is a stub without the build tag).
package tensortest
