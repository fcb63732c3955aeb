//go:build cuda

package cuda

import (
	"path"
	"strings"
	"testing"
)

// TestIncludedHeaders: a compile's cache key covers exactly the headers its file includes (besides common.cuh,
// which all do): the attention files attention.cuh (and the philox.cuh it includes), the dropout kernels'
// files philox.cuh, the files using Hopper's warpgroup MMA wgmma.cuh, every other file none, so adding a header leaves the cached kernels of the files that do
// not include it valid.
func TestIncludedHeaders(t *testing.T) {
	hdrs, err := kernelHeaders()
	if err != nil {
		t.Fatal(err)
	}
	if hdrs[0].name != "common.cuh" {
		t.Fatalf("first header %s, want common.cuh", hdrs[0].name)
	}
	ents, _ := kernelFS.ReadDir("kernels")
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".cu") {
			continue
		}
		src, err := kernelFS.ReadFile(path.Join("kernels", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range includedHeaders(src, hdrs[1:]) {
			got = append(got, h.name)
		}
		var hs []string
		att := strings.Contains(string(src), `#include "attention.cuh"`)
		if att {
			hs = append(hs, "attention.cuh")
		}
		if att || strings.Contains(string(src), `#include "philox.cuh"`) { // attention.cuh includes philox.cuh
			hs = append(hs, "philox.cuh")
		}
		if strings.Contains(string(src), `#include "wgmma.cuh"`) {
			hs = append(hs, "wgmma.cuh")
		}
		want := strings.Join(hs, ",")
		if strings.HasPrefix(e.Name(), "attention_") != att && e.Name() != "attention_f32.cu" {
			t.Errorf("%s: want the attention files, and only them, to include attention.cuh", e.Name())
		}
		if strings.Join(got, ",") != want {
			t.Errorf("%s includes headers %v, want %q", e.Name(), got, want)
		}
	}
	// Through another header: a file including only attention.cuh also gets what attention.cuh includes.
	fake := []kernelHeader{{"a.cuh", []byte(`#include "b.cuh"`)}, {"b.cuh", []byte("x")}, {"c.cuh", nil}}
	if got := includedHeaders([]byte(`#include "a.cuh"`), fake); len(got) != 2 || got[0].name != "a.cuh" || got[1].name != "b.cuh" {
		t.Errorf("transitive includes: got %v, want a.cuh and b.cuh", got)
	}
}

// TestPhiloxModulesAreMarked: a compiled module is marked as holding tune_philox_base exactly when its source
// includes philox.cuh (directly or through attention.cuh), so that the backend asks only those modules for
// the constant and no cuModuleGetGlobal call fails (compute-sanitizer counts a failed call as an error).
func TestPhiloxModulesAreMarked(t *testing.T) {
	if _, err := loadNVRTC(); err != nil {
		t.Skipf("NVRTC not available here: %v", err)
	}
	t.Setenv("TUNE_KERNEL_CACHE", t.TempDir())
	for file, want := range map[string]bool{"optim.cu": false, "softmax.cu": false, "elementwise.cu": true} {
		img, err := compileKernel(file, 90)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if img.philox != want {
			t.Errorf("%s: philox %v, want %v", file, img.philox, want)
		}
		// The same answer from the disk cache.
		if img, err = compileKernel(file, 90); err != nil {
			t.Fatalf("%s from the cache: %v", file, err)
		}
		if img.philox != want || img.path == "" {
			t.Errorf("%s from the cache: philox %v (path %q), want %v", file, img.philox, img.path, want)
		}
	}
}
