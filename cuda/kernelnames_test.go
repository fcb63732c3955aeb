//go:build cuda

package cuda

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestLaunchedKernelsExist compiles every kernel file that this package's Go code launches a kernel of by a
// literal name (o.launch, o.ew, o.rowsLaunch, b.unary, b.binary, and the lnBwdFused, residual_layernorm_fwd2 and layernorm_bwd2 families) and checks that each
// name is an entry point of the compiled image, so that a kernel renamed, dropped or left uninstantiated in a
// .cu file fails here rather than as CUDA_ERROR_NOT_FOUND on the GPU. It needs NVRTC, not a GPU. Attention's
// kernels, whose names are composed at run time, are checked by the attention tests on the GPU.
func TestLaunchedKernelsExist(t *testing.T) {
	if _, err := loadNVRTC(); err != nil {
		t.Skipf("no libnvrtc, so the kernels cannot be compiled here: %v", err)
	}
	t.Setenv("TUNE_KERNEL_CACHE", t.TempDir())
	want := map[string]map[string]bool{} // file → kernel names
	add := func(file, name string) {
		if want[file] == nil {
			want[file] = map[string]bool{}
		}
		want[file][name] = true
	}
	launch := regexp.MustCompile(`\b(?:launch|ew|rowsLaunch)\("([a-z0-9]+\.cu)",\s*"([A-Za-z0-9_]+)"`)
	elementwise := regexp.MustCompile(`\b(?:unary|binary)\("[A-Za-z]+",\s*"([A-Za-z0-9_]+)"`)
	ents, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		src, err := os.ReadFile(e.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range launch.FindAllSubmatch(src, -1) {
			add(string(m[1]), string(m[2]))
		}
		for _, m := range elementwise.FindAllSubmatch(src, -1) {
			add("elementwise.cu", string(m[1]))
		}
	}
	for k := 1; k <= lnBwdFusedMax; k++ {
		add("lnbwd.cu", lnBwdRing(k))
	}
	for k := 1; k <= resLNFwd2Max; k++ {
		add("layernorm2.cu", fmt.Sprintf("residual_layernorm_fwd2_%d", k))
	}
	for k := 1; k <= lnBwd2Max; k++ {
		add("layernorm2.cu", fmt.Sprintf("layernorm_bwd2_%d", k))
	}
	total := 0
	files := make([]string, 0, len(want))
	for f := range want {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, file := range files {
		img, err := compileKernel(file, 90)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for name := range want[file] {
			total++
			entry := []byte(".text." + name + "\x00") // a cubin's section of the kernel
			if !img.cubin {
				entry = []byte(".entry " + name + "(") // PTX
			}
			if !bytes.Contains(img.data, entry) {
				t.Errorf("kernels/%s has no kernel %s, which the Go code launches", file, name)
			}
		}
	}
	if total < 40 {
		t.Fatalf("found only %d launched kernel names in the Go sources: the patterns no longer match the launch calls", total)
	}
	t.Logf("%d kernel names in %d files", total, len(files))
}
