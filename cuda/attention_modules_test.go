//go:build cuda

package cuda_test

import (
	"regexp"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/tune-ml/tune/cuda"
)

// TestAttentionModulesHoldTheirKernels compiles every attention kernel module (kernels/attention_fwd.cu,
// attention_bwd.cu and, with an NVRTC that compiles sm_90a, attention_bwd_wg.cu per family, attention_ref.cu;
// no GPU needed) and requires its image to hold exactly the kernels the Go code
// launches from it: a misspelt or uninstantiated name fails here rather than as CUDA_ERROR_NOT_FOUND on the
// GPU, and a kernel compiled into a module nobody launches it from (the cold-compile time that the split
// removes) fails too.
func TestAttentionModulesHoldTheirKernels(t *testing.T) {
	if _, _, _, err := cuda.NVRTCVersion(); err != nil {
		t.Skipf("no libnvrtc: %v", err)
	}
	t.Setenv("TUNE_KERNEL_CACHE", t.TempDir())
	want := cuda.AttnModuleKernels()
	files := map[string]bool{}
	for _, f := range cuda.KernelFiles() {
		files[f] = true
	}
	mods := make([]string, 0, len(want))
	for m := range want {
		mods = append(mods, m)
		if !files[m] {
			t.Errorf("module %s is launched from but is not a kernel file or variant", m)
		}
	}
	sort.Strings(mods)
	cubinEntry := regexp.MustCompile(`\.text\.(attn_[A-Za-z0-9_]+)\x00`)
	ptxEntry := regexp.MustCompile(`\.entry (attn_[A-Za-z0-9_]+)\(`)
	for _, m := range mods {
		t.Run(m, func(t *testing.T) {
			start := time.Now()
			img, cubin, err := cuda.KernelImageForTest(m, 90)
			if cuda.NoSM90a(err) {
				t.Skipf("not compiled here: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			re := ptxEntry
			if cubin {
				re = cubinEntry
			}
			var got []string
			for _, x := range re.FindAllSubmatch(img, -1) {
				if n := string(x[1]); !slices.Contains(got, n) {
					got = append(got, n)
				}
			}
			sort.Strings(got)
			if !slices.Equal(got, want[m]) {
				t.Errorf("%s holds kernels\n  %v\nwant\n  %v", m, got, want[m])
			}
			t.Logf("%s: %d kernels, %d bytes, compiled in %v", m, len(got), len(img), time.Since(start).Round(100*time.Millisecond))
		})
	}
}
