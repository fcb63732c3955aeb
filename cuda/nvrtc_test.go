//go:build cuda

package cuda_test

import (
	"errors"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tune-ml/tune/cuda"
)

// TestNVRTCCompileAll compiles every embedded kernel file with whatever libnvrtc the loader finds (no GPU
// needed), for sm_90 (the H200) unless TUNE_CUDA_ARCH names another compute capability, e.g. 80. It uses a
// private cache directory so that it really compiles, and fails with NVRTC's log on any error or warning. The
// modules that use wgmma (kernels/wgmma.cuh) are compiled for sm_90a where the NVRTC is 12.0 or newer and the
// target is sm_90; elsewhere (NVRTC 11.8, another TUNE_CUDA_ARCH) their subtests skip, saying why.
func TestNVRTCCompileAll(t *testing.T) {
	maj, min, path, err := cuda.NVRTCVersion()
	if err != nil {
		t.Skipf("no libnvrtc can be opened, so the kernels cannot be compile-checked here: %v", err)
	}
	t.Logf("NVRTC %d.%d from %s", maj, min, path)
	sm := testSM(t)
	t.Setenv("TUNE_KERNEL_CACHE", t.TempDir())
	files := cuda.KernelFiles()
	if len(files) == 0 {
		t.Fatal("no kernel files are embedded")
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			size, cubin, log, _, err := cuda.CompileKernelForTest(f, sm)
			if cuda.NoSM90a(err) {
				t.Skipf("not compiled here: %v", err) // a wgmma module needs NVRTC 12+ and sm_90
			}
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

// TestWarmKernelCache compiles the kernel files named in TUNE_WARM_KERNELS (comma-separated module names, or
// "all") into the kernel cache (TUNE_KERNEL_CACHE, else the default directory), several at a time, for sm_90
// unless TUNE_CUDA_ARCH names another compute capability; it is skipped when the variable is unset. A GPU
// script runs it first so that no later step (under a short timeout) pays a cold NVRTC compile.
func TestWarmKernelCache(t *testing.T) {
	list := os.Getenv("TUNE_WARM_KERNELS")
	if list == "" {
		t.Skip("TUNE_WARM_KERNELS is unset")
	}
	if _, _, _, err := cuda.NVRTCVersion(); err != nil {
		t.Fatalf("no libnvrtc: %v", err)
	}
	sm := testSM(t)
	files := strings.Split(list, ",")
	if list == "all" {
		files = cuda.KernelFiles()
	}
	sem := make(chan struct{}, max(1, runtime.NumCPU()))
	var wg sync.WaitGroup
	for _, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			start := time.Now()
			size, _, _, _, err := cuda.CompileKernelForTest(f, sm)
			if cuda.NoSM90a(err) {
				t.Logf("%s: not compiled here: %v", f, err)
				return
			}
			if err != nil {
				t.Errorf("%s: %v", f, err)
				return
			}
			t.Logf("%s: %d bytes in %v", f, size, time.Since(start).Round(100*time.Millisecond))
		}()
	}
	wg.Wait()
}

// TestKernelRegisters prints, for the kernel files named in TUNE_KERNEL_REGS (comma-separated module names, or
// "all"), each kernel's registers and spilled bytes as ptxas reports them (NVRTC --ptxas-options=-v, sm_90
// unless TUNE_CUDA_ARCH names another compute capability), e.g. TUNE_KERNEL_REGS=attention_bwd_bf16_d64.cu; it is
// skipped when the variable is unset. Two blocks of 128 threads fit an SM at ≤ 255 registers, three at ≤ 168,
// four at ≤ 128.
func TestKernelRegisters(t *testing.T) {
	list := os.Getenv("TUNE_KERNEL_REGS")
	if list == "" {
		t.Skip("TUNE_KERNEL_REGS is unset")
	}
	if _, _, _, err := cuda.NVRTCVersion(); err != nil {
		t.Fatalf("no libnvrtc: %v", err)
	}
	sm := testSM(t)
	t.Setenv("TUNE_KERNEL_CACHE", t.TempDir())
	files := strings.Split(list, ",")
	if list == "all" {
		files = cuda.KernelFiles()
	}
	entry := regexp.MustCompile(`Compiling entry function '([A-Za-z0-9_]+)'`)
	spill := regexp.MustCompile(`(\d+) bytes spill stores, (\d+) bytes spill loads`)
	regs := regexp.MustCompile(`Used (\d+) registers`)
	for _, f := range files {
		log, err := cuda.KernelRegistersForTest(f, sm)
		if cuda.NoSM90a(err) {
			t.Logf("%s: not compiled here: %v", f, err)
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		name, st, ld := "", "0", "0"
		for _, line := range strings.Split(log, "\n") {
			if m := entry.FindStringSubmatch(line); m != nil {
				name, st, ld = m[1], "0", "0"
			} else if m := spill.FindStringSubmatch(line); m != nil {
				st, ld = m[1], m[2]
			} else if m := regs.FindStringSubmatch(line); m != nil && name != "" {
				t.Logf("%s %s: %s registers, %s/%s bytes spilled (stores/loads)", f, name, m[1], st, ld)
				name = ""
			}
		}
	}
}

// testSM is the compute capability the compile tests target: sm_90 (the H200) unless TUNE_CUDA_ARCH names
// another, e.g. 80.
func testSM(t testing.TB) int {
	t.Helper()
	s := os.Getenv("TUNE_CUDA_ARCH")
	if s == "" {
		return 90
	}
	sm, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("TUNE_CUDA_ARCH=%q: want a compute capability such as 90", s)
	}
	return sm
}
