//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/tune-ml/tune/tensor"
)

// Error is a failed call into the CUDA driver, cuBLASLt or NVRTC, carrying the library's own status name
// (CUDA_ERROR_OUT_OF_MEMORY, CUBLAS_STATUS_NOT_SUPPORTED, NVRTC_ERROR_COMPILATION ...) so that a report can
// be searched for. Ops wrap it in a *tensor.OpError.
type Error struct {
	Call   string // the API function, e.g. "cublasLtMatmul"
	Code   int    // the numeric status
	Status string // its name
	Detail string // what was being done, and what to try
}

// Error formats as "cuda: cublasLtMatmul: CUBLAS_STATUS_NOT_SUPPORTED (15): detail".
func (e *Error) Error() string {
	s := fmt.Sprintf("cuda: %s: %s (%d)", e.Call, e.Status, e.Code)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// cuCode extracts the CUresult from an error returned by gorgonia.org/cu (an unexported integer type).
func cuCode(err error) (int, bool) {
	v := reflect.ValueOf(err)
	switch v.Kind() {
	case reflect.Int, reflect.Int32, reflect.Int64:
		return int(v.Int()), true
	}
	return 0, false
}

// driverErr converts an error from gorgonia.org/cu into an *Error named after the CUresult; nil stays nil.
// CUDA_ERROR_NO_DEVICE and a missing driver also wrap tensor.ErrNoDevice.
func driverErr(call string, err error, detail string, a ...any) error {
	if err == nil {
		return nil
	}
	code, ok := cuCode(err)
	if !ok {
		return fmt.Errorf("cuda: %s: %w", call, err)
	}
	return driverErrCode(call, code, fmt.Sprintf(detail, a...))
}

func driverErrCode(call string, code int, detail string) error {
	e := &Error{Call: call, Code: code, Status: driverErrorName(code), Detail: detail}
	switch code {
	case 100, 34, 35, 999: // NO_DEVICE, STUB_LIBRARY, INSUFFICIENT_DRIVER, UNKNOWN (no usable driver)
		return fmt.Errorf("%w: %w", e, tensor.ErrNoDevice)
	}
	return e
}

// cublasStatusNames are cublasStatus_t's names (cublas_api.h, the same in 11.8 and 13).
var cublasStatusNames = map[int]string{
	0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED",
	7: "CUBLAS_STATUS_INVALID_VALUE", 8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR",
	13: "CUBLAS_STATUS_EXECUTION_FAILED", 14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED",
	16: "CUBLAS_STATUS_LICENSE_ERROR",
}

// cublasErr returns nil for CUBLAS_STATUS_SUCCESS and an *Error named after the status otherwise.
func cublasErr(call string, status int, detail string, a ...any) error {
	if status == 0 {
		return nil
	}
	name, ok := cublasStatusNames[status]
	if !ok {
		name = fmt.Sprintf("CUBLAS_STATUS_UNKNOWN_%d", status)
	}
	return &Error{Call: call, Code: status, Status: name, Detail: fmt.Sprintf(detail, a...)}
}

// errNotSupported marks a GEMM for which cuBLASLt offers no algorithm.
var errNotSupported = errors.New("no cuBLASLt algorithm for this GEMM")
