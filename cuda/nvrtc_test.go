//go:build cuda

package cuda_test

import (
	"errors"
	"os"
	"strconv"
	"testing"

	"github.com/tune-ml/tune/cuda"
)

// TestNVRTCCompileAll compiles every embedded kernel file with whatever libnvrtc the loader finds (no GPU
// needed), for sm_90 (the H200) unless TUNE_CUDA_ARCH names another compute capability, e.g. 80. It uses a
// private cache directory so that it really compiles, and fails with NVRTC's log on any error or warning.
func TestNVRTCCompileAll(t *testing.T) {
	maj, min, path, err := cuda.NVRTCVersion()
	if err != nil {
		t.Skipf("no libnvrtc can be opened, so the kernels cannot be compile-checked here: %v", err)
	}
	t.Logf("NVRTC %d.%d from %s", maj, min, path)
	sm := 90
	if s := os.Getenv("TUNE_CUDA_ARCH"); s != "" {
		if sm, err = strconv.Atoi(s); err != nil {
			t.Fatalf("TUNE_CUDA_ARCH=%q: want a compute capability such as 90", s)
		}
	}
	t.Setenv("TUNE_KERNEL_CACHE", t.TempDir())
	files := cuda.KernelFiles()
	if len(files) == 0 {
		t.Fatal("no kernel files are embedded")
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			size, cubin, log, _, err := cuda.CompileKernelForTest(f, sm)
			var ce *cuda.Error
			if errors.As(err, &ce) {
				t.Fatalf("%s: %s", ce.Status, ce.Detail)
			}
			if err != nil {
				t.Fatal(err)
			}
			if size == 0 {
				t.Fatal("NVRTC returned an empty image")
			}
			if log != "" {
				t.Errorf("NVRTC warnings for %s:\n%s", f, log)
			}
			t.Logf("%s: %d bytes (cubin=%v)", f, size, cubin)
		})
	}
}
