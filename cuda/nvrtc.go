//go:build cuda

package cuda

// #include <stdlib.h>
// #include "tunecuda.h"
import "C"

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/tune-ml/tune/internal/atomicfile"
)

// kernelFS holds the CUDA C++ sources compiled at run time. The .cuh files are passed to NVRTC as headers
// (kernelHeaders).
//
//go:embed kernels/*.cu kernels/*.cuh
var kernelFS embed.FS

// kernelOptions are the NVRTC options every kernel file is compiled with (besides the target): C++17, no FMA
// contraction (results match tensor/cpu's operation order; see kernels/common.cuh) and line information for
// compute-sanitizer and Nsight.
var kernelOptions = []string{"--std=c++17", "--fmad=false", "-lineinfo"}

// nvrtcExtraOptions are appended to every compile's options (and so to the cache key): tests set
// --ptxas-options=-v to read the kernels' register and spill counts from NVRTC's log (KernelRegistersForTest).
var nvrtcExtraOptions []string

// optionsFor returns the options of one kernel file: kernelOptions, less -lineinfo for the attention files
// (attention_*.cu), lnbwd.cu and layernorm2.cu, whose template kernels crash NVRTC 11.8's built-in ptxas (a
// segmentation fault inside nvrtcCompileProgram) when line information is requested; compute-sanitizer then
// reports their errors by kernel name and PC.
func optionsFor(file string) []string {
	if !strings.HasPrefix(file, "attention") && file != "lnbwd.cu" && file != "layernorm2.cu" {
		return kernelOptions
	}
	var out []string
	for _, o := range kernelOptions {
		if o != "-lineinfo" {
			out = append(out, o)
		}
	}
	return out
}

// kernelVariant is a kernel module compiled from another embedded file with macros defined first (each
// "NAME VALUE" in defines becomes "#define NAME VALUE").
type kernelVariant struct {
	base    string
	defines []string
}

// kernelVariants are the kernel modules compiled from another embedded file: the attention modules
// (attnModules: kernels/attention_fwd.cu and attention_bwd.cu per kernel family, so that a process compiles only
// the kernels it launches).
var kernelVariants = attnModules()

// kernelFiles lists the kernel modules, sorted: the embedded .cu files (except those only compiled as the base
// of kernelVariants, e.g. kernels/attention_fwd.cu, which needs the macros of its variants) and the
// kernelVariants.
func kernelFiles() []string {
	bases := map[string]bool{}
	for _, v := range kernelVariants {
		bases[v.base] = true
	}
	ents, _ := kernelFS.ReadDir("kernels")
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".cu") && !bases[e.Name()] {
			out = append(out, e.Name())
		}
	}
	for v := range kernelVariants {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// nvrtcInfo describes the NVRTC that was loaded.
type nvrtcInfo struct {
	path         string
	major, minor int
	archs        []int // supported SM versions, ascending; nil if this NVRTC cannot list them
}

var (
	nvrtcOnce sync.Once
	nvrtcInf  nvrtcInfo
	nvrtcErr  error
)

// loadNVRTC opens libnvrtc (see library.load) and queries its version and targets.
func loadNVRTC() (nvrtcInfo, error) {
	nvrtcOnce.Do(func() {
		p, err := libNVRTC.load()
		if err != nil {
			nvrtcErr = err
			return
		}
		var maj, min C.int
		if st := C.tc_nvrtc_version(&maj, &min); st != 0 {
			nvrtcErr = nvrtcError("nvrtcVersion", int(st), "")
			return
		}
		nvrtcInf = nvrtcInfo{path: p, major: int(maj), minor: int(min)}
		var buf [64]C.int
		if n := int(C.tc_nvrtc_archs(&buf[0], C.int(len(buf)))); n > 0 {
			for _, a := range buf[:n] {
				nvrtcInf.archs = append(nvrtcInf.archs, int(a))
			}
			sort.Ints(nvrtcInf.archs)
		}
	})
	return nvrtcInf, nvrtcErr
}

func nvrtcError(call string, code int, detail string) error {
	name := "NVRTC_ERROR"
	if code >= 0 && libNVRTC.err == nil && libNVRTC.path != "" {
		name = C.GoString(C.tc_nvrtc_error(C.int(code)))
	}
	return &Error{Call: call, Code: code, Status: name, Detail: detail}
}

// target chooses what to compile for a device of compute capability sm (e.g. 90): a CUBIN for sm when this
// NVRTC supports it, else PTX for the newest virtual architecture it supports below sm (the driver JIT-compiles
// it at load).
func (n nvrtcInfo) target(sm int) (opt string, cubin bool, err error) {
	if n.archs == nil {
		return fmt.Sprintf("--gpu-architecture=compute_%d", sm), false, nil
	}
	best := 0
	for _, a := range n.archs {
		if a == sm {
			return fmt.Sprintf("--gpu-architecture=sm_%d", sm), true, nil
		}
		if a < sm {
			best = a
		}
	}
	if best == 0 {
		return "", false, fmt.Errorf("cuda: NVRTC %d.%d (%s) supports sm_%d..sm_%d, not this device's sm_%d; use an older CUDA toolkit's NVRTC via TUNE_NVRTC", n.major, n.minor, n.path, n.archs[0], n.archs[len(n.archs)-1], sm)
	}
	return fmt.Sprintf("--gpu-architecture=compute_%d", best), false, nil
}

// errNoSM90a is the error of compiling a module that includes kernels/wgmma.cuh (Hopper's warpgroup MMA, which
// exists only in the sm_90a target) where it cannot be: the device is not compute capability 9.0, or the NVRTC
// is older than 12.0 (NVRTC 11.8 has no sm_90a). Callers fall back to kernels of the plain target.
var errNoSM90a = errors.New("cuda: the module uses wgmma (sm_90a only)")

// target90a is the target of a module that includes kernels/wgmma.cuh: a CUBIN for sm_90a when the device is
// sm_90 and this NVRTC is 12.0 or newer and lists sm_90 (NVRTC lists plain architectures only; every NVRTC 12
// that compiles sm_90 accepts sm_90a), else errNoSM90a.
func (n nvrtcInfo) target90a(sm int) (string, error) {
	if sm != 90 {
		return "", fmt.Errorf("%w: the device is sm_%d", errNoSM90a, sm)
	}
	if n.major < 12 || n.archs == nil || !slices.Contains(n.archs, 90) {
		return "", fmt.Errorf("%w: NVRTC %d.%d (%s) cannot compile sm_90a (12.0 or newer can)", errNoSM90a, n.major, n.minor, n.path)
	}
	return "--gpu-architecture=sm_90a", nil
}

// kernelImage is one compiled kernel file.
type kernelImage struct {
	data  []byte // CUBIN or NUL-terminated PTX
	cubin bool
	log   string // NVRTC's log (warnings), empty when loaded from the disk cache
	path  string // cache file, if written or read

	philox bool // the source includes kernels/philox.cuh, so the module has the constant tune_philox_base
}

// kernelCacheDir returns where compiled kernels are kept: $TUNE_KERNEL_CACHE, else
// $XDG_CACHE_HOME/tune/kernels (os.UserCacheDir, ~/.cache on Linux). Empty when none can be found.
func kernelCacheDir() string {
	if d := os.Getenv("TUNE_KERNEL_CACHE"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "tune", "kernels")
}

// compileKernel compiles the embedded file (e.g. "norm.cu") for compute capability sm, reading and writing the
// disk cache keyed by a SHA-256 of the NVRTC version, the options, the target and every source byte. A compile
// error returns an *Error whose Detail holds NVRTC's log.
func compileKernel(file string, sm int) (*kernelImage, error) {
	nv, err := loadNVRTC()
	if err != nil {
		return nil, err
	}
	base, prefix := file, ""
	if v, ok := kernelVariants[file]; ok {
		base = v.base
		for _, d := range v.defines {
			prefix += "#define " + d + "\n"
		}
	}
	src, err := kernelFS.ReadFile(path.Join("kernels", base))
	if err != nil {
		return nil, fmt.Errorf("cuda: no embedded kernel file %q: %w", file, err)
	}
	src = append([]byte(prefix), src...)
	hdrs, err := kernelHeaders()
	if err != nil {
		return nil, err
	}
	incl := includedHeaders(src, hdrs[1:])
	var tgt string
	var cubin bool
	if slices.ContainsFunc(incl, func(x kernelHeader) bool { return x.name == "wgmma.cuh" }) {
		cubin = true
		if tgt, err = nv.target90a(sm); err != nil {
			return nil, fmt.Errorf("kernels/%s: %w", file, err)
		}
	} else if tgt, cubin, err = nv.target(sm); err != nil {
		return nil, err
	}
	opts := append(append([]string{tgt}, optionsFor(base)...), nvrtcExtraOptions...)
	h := sha256.New()
	fmt.Fprintf(h, "nvrtc %d.%d\x00%s\x00%s\x00", nv.major, nv.minor, strings.Join(opts, "\x00"), file)
	h.Write(src)
	h.Write([]byte{0})
	h.Write(hdrs[0].src) // common.cuh, which every file includes
	philox := false
	for _, x := range incl {
		fmt.Fprintf(h, "\x00%s\x00", x.name)
		h.Write(x.src)
		philox = philox || x.name == "philox.cuh"
	}
	key := hex.EncodeToString(h.Sum(nil))[:24]
	ext := ".ptx"
	if cubin {
		ext = ".cubin"
	}
	stem := strings.TrimSuffix(file, ".cu")
	arch := strings.TrimPrefix(tgt, "--gpu-architecture=")
	dir := kernelCacheDir()
	var cachePath string
	if dir != "" {
		cachePath = filepath.Join(dir, fmt.Sprintf("%s-%s-%s%s", stem, arch, key, ext))
		if data, err := os.ReadFile(cachePath); err == nil && len(data) > 0 {
			return &kernelImage{data: data, cubin: cubin, path: cachePath, philox: philox}, nil
		}
	}
	data, log, err := nvrtcCompile(string(src), file, hdrs, opts, cubin)
	if err != nil {
		return nil, err
	}
	img := &kernelImage{data: data, cubin: cubin, log: log, philox: philox}
	if cachePath != "" && writeCache(dir, cachePath, data) == nil {
		img.path = cachePath
	}
	return img, nil
}

// writeCache writes data to dst in dir (created if needed) through a temporary file and a rename
// (atomicfile.WriteFile), so concurrent processes never see a partial file. The mode stays 0600, as the cache
// always had. Failure only costs a recompile next time.
func writeCache(dir, dst string, data []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(dst, data, 0o600)
}

// kernelHeader is one embedded header file (kernels/*.cuh).
type kernelHeader struct {
	name string // e.g. "common.cuh", as a kernel file includes it
	src  []byte
}

// kernelHeaders returns the embedded headers, common.cuh first, then the others by name.
func kernelHeaders() ([]kernelHeader, error) {
	common, err := kernelFS.ReadFile("kernels/common.cuh")
	if err != nil {
		return nil, fmt.Errorf("cuda: embedded kernels/common.cuh is missing: %w", err)
	}
	out := []kernelHeader{{"common.cuh", common}}
	ents, _ := kernelFS.ReadDir("kernels")
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, ".cuh") && n != "common.cuh" {
			b, err := kernelFS.ReadFile("kernels/" + n)
			if err != nil {
				return nil, fmt.Errorf("cuda: embedded kernels/%s: %w", n, err)
			}
			out = append(out, kernelHeader{n, b})
		}
	}
	return out, nil
}

// includedHeaders returns the headers of hdrs that src includes, directly or through another of them, in
// hdrs' order: the ones a compile's cache key must cover (a file that includes only common.cuh keeps the key
// it had before other headers existed).
func includedHeaders(src []byte, hdrs []kernelHeader) []kernelHeader {
	in := make([]bool, len(hdrs))
	for changed := true; changed; {
		changed = false
		for i, x := range hdrs {
			if in[i] {
				continue
			}
			inc := []byte(`#include "` + x.name + `"`)
			found := bytes.Contains(src, inc)
			for k := range hdrs {
				found = found || (in[k] && bytes.Contains(hdrs[k].src, inc))
			}
			if found {
				in[i], changed = true, true
			}
		}
	}
	var out []kernelHeader
	for i, x := range hdrs {
		if in[i] {
			out = append(out, x)
		}
	}
	return out
}

// nvrtcCompile runs NVRTC on one source with the embedded headers.
func nvrtcCompile(src, name string, headers []kernelHeader, opts []string, cubin bool) ([]byte, string, error) {
	csrc, cname := C.CString(src), C.CString(name)
	defer C.free(unsafe.Pointer(csrc))
	defer C.free(unsafe.Pointer(cname))
	nh := len(headers)
	hdrs := (**C.char)(C.malloc(C.size_t(nh) * C.size_t(unsafe.Sizeof(uintptr(0)))))
	hnames := (**C.char)(C.malloc(C.size_t(nh) * C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(hdrs))
	defer C.free(unsafe.Pointer(hnames))
	hs, hn := unsafe.Slice(hdrs, nh), unsafe.Slice(hnames, nh)
	for i, x := range headers {
		hs[i], hn[i] = C.CString(string(x.src)), C.CString(x.name)
	}
	defer func() {
		for i := range headers {
			C.free(unsafe.Pointer(hs[i]))
			C.free(unsafe.Pointer(hn[i]))
		}
	}()
	copts := (**C.char)(C.malloc(C.size_t(len(opts)) * C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(copts))
	optSlice := unsafe.Slice(copts, len(opts))
	for i, o := range opts {
		optSlice[i] = C.CString(o)
	}
	defer func() {
		for _, p := range optSlice {
			C.free(unsafe.Pointer(p))
		}
	}()
	var out, log *C.char
	var outlen C.size_t
	cb := C.int(0)
	if cubin {
		cb = 1
	}
	st := C.tc_nvrtc_compile(csrc, cname, C.int(nh), hdrs, hnames, C.int(len(opts)), copts, cb, &out, &outlen, &log)
	var logStr string
	if log != nil {
		logStr = strings.TrimSpace(C.GoString(log))
		C.free(unsafe.Pointer(log))
	}
	if st != 0 {
		if out != nil {
			C.free(unsafe.Pointer(out))
		}
		return nil, logStr, nvrtcError("nvrtcCompileProgram", int(st), fmt.Sprintf("kernels/%s with %s:\n%s", name, strings.Join(opts, " "), logStr))
	}
	data := C.GoBytes(unsafe.Pointer(out), C.int(outlen))
	C.free(unsafe.Pointer(out))
	return data, logStr, nil
}
