//go:build cuda

package cuda

// #cgo LDFLAGS: -ldl -lcuda
// #include <stdlib.h>
// #include "tunecuda.h"
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"
)

// library describes one shared object opened at run time: its sonames newest first and the environment
// variable that overrides the search with an explicit file.
type library struct {
	name     string   // "cublasLt"
	sonames  []string // newest first
	override string   // environment variable naming a file to load instead of searching
	bind     func(h unsafe.Pointer) error

	once sync.Once
	path string // the file loaded
	err  error
}

var (
	libCublasLt = &library{
		name:     "cublasLt",
		sonames:  []string{"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11"},
		override: "TUNE_CUBLASLT",
		bind: func(h unsafe.Pointer) error {
			if missing := C.tc_lt_bind(h); missing != nil {
				return fmt.Errorf("symbol %s is missing", C.GoString(missing))
			}
			return nil
		},
	}
	libNVRTC = &library{
		name:     "nvrtc",
		sonames:  []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so.11.1", "libnvrtc.so.11.0"},
		override: "TUNE_NVRTC",
		bind: func(h unsafe.Pointer) error {
			if missing := C.tc_nvrtc_bind(h); missing != nil {
				return fmt.Errorf("symbol %s is missing", C.GoString(missing))
			}
			return nil
		},
	}
)

// errLibraryNotFound marks a library that no candidate file could provide.
var errLibraryNotFound = errors.New("library not found")

// load opens the library once and binds its entry points. The search order is: the override variable (a
// file path; no fallback if it fails), then for each soname newest first: $CUDA_HOME/lib64, $CUDA_PATH/lib64,
// the dynamic loader's own search (LD_LIBRARY_PATH, the ld.so cache, system directories), and
// /usr/local/cuda/lib64.
func (l *library) load() (string, error) {
	l.once.Do(func() { l.path, l.err = l.open() })
	return l.path, l.err
}

func (l *library) open() (string, error) {
	if f := os.Getenv(l.override); f != "" {
		h, err := dlopen(f)
		if err != nil {
			return "", fmt.Errorf("cuda: %s=%s: %w (unset it to search the default locations)", l.override, f, err)
		}
		if err := l.bind(h); err != nil {
			return "", fmt.Errorf("cuda: %s=%s: %w", l.override, f, err)
		}
		return dlpath(h, f), nil
	}
	var tried []string
	var dirs []string
	for _, v := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if d := os.Getenv(v); d != "" {
			dirs = append(dirs, filepath.Join(d, "lib64"), filepath.Join(d, "lib"))
		}
	}
	for _, so := range l.sonames {
		var cands []string
		for _, d := range dirs {
			cands = append(cands, filepath.Join(d, so))
		}
		cands = append(cands, so, filepath.Join("/usr/local/cuda/lib64", so))
		for _, c := range cands {
			if strings.ContainsRune(c, '/') {
				if _, err := os.Stat(c); err != nil {
					continue
				}
			}
			h, err := dlopen(c)
			if err != nil {
				tried = append(tried, err.Error())
				continue
			}
			if err := l.bind(h); err != nil {
				tried = append(tried, c+": "+err.Error())
				continue
			}
			return dlpath(h, c), nil
		}
	}
	msg := fmt.Sprintf("cuda: %s: none of %s could be opened", l.name, strings.Join(l.sonames, ", "))
	if len(tried) > 0 {
		msg += " (" + strings.Join(tried, "; ") + ")"
	}
	return "", fmt.Errorf("%s; install the CUDA libraries, add their directory to LD_LIBRARY_PATH, set CUDA_HOME, or name the file in %s: %w", msg, l.override, errLibraryNotFound)
}

func dlopen(path string) (unsafe.Pointer, error) {
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	var buf [512]C.char
	h := C.tc_dlopen(cs, &buf[0], C.size_t(len(buf)))
	if h == nil {
		return nil, errors.New(C.GoString(&buf[0]))
	}
	return h, nil
}

func dlpath(h unsafe.Pointer, fallback string) string {
	p := C.GoString(C.tc_dlpath(h))
	if p == "" {
		return fallback
	}
	if abs, err := filepath.EvalSymlinks(p); err == nil && abs != p {
		return p + " -> " + abs
	}
	return p
}

// driverInitStatus returns the result of the real cuInit recorded by the interposer in tunecuda.c.
func driverInitStatus() int { return int(C.tc_cu_init_status()) }

// driverErrorName returns the CUresult name of code (CUDA_ERROR_OUT_OF_MEMORY ...).
func driverErrorName(code int) string {
	s := C.tc_cu_error_name(C.int(code))
	if s == nil {
		return fmt.Sprintf("CUDA_ERROR_UNKNOWN_CODE_%d", code)
	}
	return C.GoString(s)
}
