package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
)

func TestRecommendDevice(t *testing.T) {
	tests := []struct {
		name         string
		major, minor int
		want         string
	}{
		{"Kepler K80 has no Tensor Cores", 3, 7, "fp32"},
		{"Pascal P100 has no Tensor Cores", 6, 0, "fp32"},
		{"Volta V100: fp16 with the scaler", 7, 0, "fp16"},
		{"Turing T4: fp16 with the scaler", 7, 5, "fp16"},
		{"Ampere A100: bf16", 8, 0, "bf16"},
		{"Ampere RTX 3090: bf16", 8, 6, "bf16"},
		{"Ada L4: bf16", 8, 9, "bf16"},
		{"Hopper H100/H200: bf16", 9, 0, "bf16"},
		{"Blackwell B200: bf16", 10, 0, "bf16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := recommendDevice(cuda.DeviceInfo{Major: tt.major, Minor: tt.minor})
			if r.Precision != tt.want {
				t.Errorf("compute capability %d.%d: %s (%s), want %s", tt.major, tt.minor, r.Precision, r.Reason, tt.want)
			}
			if !strings.Contains(r.Reason, fmt.Sprintf("%d.%d", tt.major, tt.minor)) {
				t.Errorf("reason %q does not name the compute capability", r.Reason)
			}
		})
	}
	if r := recommendCPU(); r.Precision != "fp32" || !strings.Contains(r.Reason, "emulated") {
		t.Errorf("recommendCPU() = %+v, want fp32 saying bf16 on the CPU is emulated", r)
	}
}

func TestCPUModel(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"x86 model name", "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel\t\t: 85\nmodel name\t: Intel(R) Xeon(R) Platinum 8480C\n", "Intel(R) Xeon(R) Platinum 8480C"},
		{"ARM board Model", "processor\t: 0\nBogoMIPS\t: 108.00\n\nModel\t\t: Raspberry Pi 4 Model B Rev 1.4\n", "Raspberry Pi 4 Model B Rev 1.4"},
		{"numeric model is not a name", "model\t\t: 85\n", ""},
		{"empty file", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cpuModel(tt.in); got != tt.want {
				t.Errorf("cpuModel = %q, want %q", got, tt.want)
			}
		})
	}
}

func fakeEnv(devs []cuda.DeviceInfo, err error) *envOptions {
	return &envOptions{
		probe:   func() ([]cuda.DeviceInfo, error) { return devs, err },
		cpuinfo: func() (string, error) { return "model name\t: Test CPU 9000\n", nil },
	}
}

// TestEnvCPUOnly checks the report of a binary built without CUDA: it says so and recommends fp32 on the CPU.
func TestEnvCPUOnly(t *testing.T) {
	o := fakeEnv(nil, fmt.Errorf("cuda: this binary was built without CUDA support: %w", tensor.ErrNoDevice))
	var out bytes.Buffer
	if err := o.run(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Test CPU 9000", "built without CUDA support", "CPU only", "recommended precision:  fp32", "emulated",
		"gemm:     " + cpu.GemmKernel() + " (CPU backend"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestEnvDevices checks the per-device blocks, in text and JSON.
func TestEnvDevices(t *testing.T) {
	devs := []cuda.DeviceInfo{
		{Ordinal: 0, Name: "NVIDIA H200", Major: 9, Minor: 0, MemoryBytes: 150 << 30, Driver: 13000,
			Libraries: []string{"cublasLt: /usr/local/cuda/lib64/libcublasLt.so.13", "nvrtc: /usr/local/cuda/lib64/libnvrtc.so.13"}},
		{Ordinal: 1, Name: "Tesla T4", Major: 7, Minor: 5, MemoryBytes: 16 << 30},
	}
	o := fakeEnv(devs, nil)
	var out bytes.Buffer
	if err := o.run(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	t.Logf("tune env with two devices:\n%s", text)
	for _, want := range []string{"cuda:     available", "cuda:0:", "NVIDIA H200", "compute capability:", "9.0", "150.0 GiB",
		"libcublasLt.so.13", "libnvrtc.so.13", "driver API:", "13.0", "recommended precision:  bf16", "Tesla T4", "7.5",
		"recommended precision:  fp16"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "CPU only") {
		t.Errorf("output with devices says CPU only:\n%s", text)
	}

	o.JSON = true
	out.Reset()
	if err := o.run(&out); err != nil {
		t.Fatal(err)
	}
	var r envReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("--json output does not decode: %v\n%s", err, out.String())
	}
	if len(r.Devices) != 2 || r.Devices[0].Recommendation.Precision != "bf16" || !r.Devices[0].BF16 ||
		r.Devices[1].Recommendation.Precision != "fp16" || r.Devices[1].BF16 || !r.Devices[1].TensorCores {
		t.Errorf("--json devices = %+v", r.Devices)
	}
}

// TestEnvProbeError checks that a driver failure is reported, not fatal.
func TestEnvProbeError(t *testing.T) {
	o := fakeEnv(nil, errors.New("cuda: cuInit: CUDA_ERROR_NO_DEVICE"))
	var out bytes.Buffer
	if err := o.run(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "cuInit: CUDA_ERROR_NO_DEVICE") || !strings.Contains(out.String(), "CPU only") {
		t.Errorf("output:\n%s", out.String())
	}
}

// TestEnvCommand runs the real command through the CLI entry point.
func TestEnvCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"env"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("tune env exited %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "os/arch:") || !strings.Contains(stdout.String(), "recommended precision:") {
		t.Errorf("tune env output:\n%s", stdout.String())
	}
	if code := run([]string{"env", "extra"}, &stdout, &stderr); code != exitUsage {
		t.Errorf("tune env with an argument exited %d, want %d (usage)", code, exitUsage)
	}
}
