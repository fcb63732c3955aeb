package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor/cpu"
)

func init() { register(newEnvCmd) }

// envOptions holds `tune env`'s flags and, for tests, the probes it reads the machine with.
type envOptions struct {
	JSON bool

	probe   func() ([]cuda.DeviceInfo, error) // cuda.Probe
	cpuinfo func() (string, error)            // contents of /proc/cpuinfo
}

func newEnvCmd() *cobra.Command {
	o := &envOptions{probe: cuda.Probe, cpuinfo: readCPUInfo}
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Show the machine, the CUDA devices and the precision to train in",
		Long: `env reports what tune runs on: the OS and architecture, the Go version, the CPU, whether this binary was
built with CUDA support, and for each CUDA device its name, compute capability, memory, Tensor Cores, BF16
support and the CUDA libraries loaded, with the precision to train in:

  Ampere or newer (compute capability 8.0+)  bf16: BF16 Tensor Cores, FP32's range, no loss scaling
  Volta or Turing (7.x)                       fp16: FP16 Tensor Cores with the GradScaler (no native BF16)
  older GPUs (no Tensor Cores)                fp32: half precision would not be faster
  CPU only                                    fp32: bf16 autocast on the CPU is emulated (correct, not faster)`,
		Example: `  tune env
  tune env --json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("env takes no arguments, got %q", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.OutOrStdout()) },
	}
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the report as JSON")
	return cmd
}

// envReport is what `tune env` prints; its JSON form is the --json output.
type envReport struct {
	OS        string         `json:"os"`
	Arch      string         `json:"arch"`
	GoVersion string         `json:"go_version"`
	CPUModel  string         `json:"cpu_model"`
	CPUCores  int            `json:"cpu_cores"`
	CPUGemm   string         `json:"cpu_gemm"` // the CPU backend's FP32 GEMM path (cpu.GemmKernel)
	CUDA      string         `json:"cuda"`     // "available", or why not (built without CUDA, no device, driver error)
	Devices   []envDevice    `json:"devices"`
	CPU       recommendation `json:"cpu_recommendation"` // used when there is no device
}

// envDevice is one CUDA device in the report.
type envDevice struct {
	Ordinal           int            `json:"ordinal"`
	Name              string         `json:"name"`
	ComputeCapability string         `json:"compute_capability"`
	MemoryBytes       uint64         `json:"memory_bytes"`
	Driver            int            `json:"driver_api,omitempty"`
	TensorCores       bool           `json:"tensor_cores"`
	BF16              bool           `json:"bf16"`
	Libraries         []string       `json:"libraries"`
	Recommendation    recommendation `json:"recommendation"`
}

// recommendation is the precision to train in and why.
type recommendation struct {
	Precision string `json:"precision"` // fp32, fp16 or bf16, as a recipe's precision key takes it
	Reason    string `json:"reason"`
}

// recommendDevice picks the training precision for a CUDA device from its compute capability: Ampere (8.0) and
// newer have BF16 Tensor Cores, so bf16 (FP32's exponent range, no loss scaling); Volta and Turing (7.x) have FP16
// Tensor Cores only, so fp16 with the GradScaler; older devices have no Tensor Cores, so half precision would
// save memory but not time, and fp32 avoids the scaler's skipped steps.
func recommendDevice(d cuda.DeviceInfo) recommendation {
	switch {
	case d.BF16():
		return recommendation{"bf16", fmt.Sprintf("compute capability %d.%d (Ampere or newer) has BF16 Tensor Cores: bf16 autocast is as fast as fp16 and needs no loss scaling", d.Major, d.Minor)}
	case d.TensorCores():
		return recommendation{"fp16", fmt.Sprintf("compute capability %d.%d (Volta/Turing) has FP16 Tensor Cores but no native BF16: fp16 autocast with the GradScaler (dynamic loss scaling, automatic)", d.Major, d.Minor)}
	}
	return recommendation{"fp32", fmt.Sprintf("compute capability %d.%d has no Tensor Cores: mixed precision would not pay", d.Major, d.Minor)}
}

// recommendCPU is the advice for a machine (or binary) without a usable CUDA device.
func recommendCPU() recommendation {
	return recommendation{"fp32", "training runs on the CPU backend: bf16 autocast there is emulated (correct, the same numerics as the GPU, but not faster), so fp32 is the fastest"}
}

// buildEnvReport gathers the report; probe errors become part of it (env itself only fails on output errors).
func (o *envOptions) buildEnvReport() envReport {
	r := envReport{
		OS: runtime.GOOS, Arch: runtime.GOARCH, GoVersion: runtime.Version(),
		CPUModel: "unknown", CPUCores: runtime.NumCPU(), CPUGemm: cpu.GemmKernel(), CUDA: "available", CPU: recommendCPU(),
		Devices: []envDevice{},
	}
	if info, err := o.cpuinfo(); err == nil {
		if m := cpuModel(info); m != "" {
			r.CPUModel = m
		}
	}
	devs, err := o.probe()
	switch {
	case err != nil:
		r.CUDA = strings.TrimPrefix(err.Error(), "cuda: ")
	case len(devs) == 0:
		r.CUDA = "no CUDA device found"
	}
	for _, d := range devs {
		r.Devices = append(r.Devices, envDevice{
			Ordinal:           d.Ordinal,
			Name:              d.Name,
			MemoryBytes:       d.MemoryBytes,
			Driver:            d.Driver,
			Libraries:         d.Libraries,
			ComputeCapability: fmt.Sprintf("%d.%d", d.Major, d.Minor),
			TensorCores:       d.TensorCores(),
			BF16:              d.BF16(),
			Recommendation:    recommendDevice(d),
		})
	}
	return r
}

func (o *envOptions) run(w io.Writer) error {
	r := o.buildEnvReport()
	if o.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	return writeEnvReport(w, r)
}

// writeEnvReport prints r as aligned "key: value" lines, one block per device.
func writeEnvReport(w io.Writer, r envReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "os/arch:\t%s/%s\n", r.OS, r.Arch)
	fmt.Fprintf(tw, "go:\t%s\n", r.GoVersion)
	fmt.Fprintf(tw, "cpu:\t%s (%d logical cores)\n", r.CPUModel, r.CPUCores)
	fmt.Fprintf(tw, "gemm:\t%s (CPU backend; TUNE_CPU_GEMM=avx512|avx2|gonum forces a path)\n", r.CPUGemm)
	fmt.Fprintf(tw, "cuda:\t%s\n", r.CUDA)
	for _, d := range r.Devices {
		fmt.Fprintf(tw, "\ncuda:%d:\t%s\n", d.Ordinal, d.Name)
		fmt.Fprintf(tw, "  compute capability:\t%s\n", d.ComputeCapability)
		fmt.Fprintf(tw, "  memory:\t%.1f GiB\n", float64(d.MemoryBytes)/(1<<30))
		fmt.Fprintf(tw, "  tensor cores:\t%s\n", yesNo(d.TensorCores))
		fmt.Fprintf(tw, "  bf16:\t%s\n", yesNo(d.BF16))
		if d.Driver > 0 {
			fmt.Fprintf(tw, "  driver API:\t%d.%d\n", d.Driver/1000, d.Driver%1000/10)
		}
		libs := "none loaded"
		if len(d.Libraries) > 0 {
			libs = strings.Join(d.Libraries, "\n\t")
		}
		fmt.Fprintf(tw, "  libraries:\t%s\n", libs)
		fmt.Fprintf(tw, "  recommended precision:\t%s (%s)\n", d.Recommendation.Precision, d.Recommendation.Reason)
	}
	if len(r.Devices) == 0 {
		fmt.Fprintf(tw, "\ndevice:\tCPU only\n")
		fmt.Fprintf(tw, "recommended precision:\t%s (%s)\n", r.CPU.Precision, r.CPU.Reason)
	}
	return tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// readCPUInfo returns /proc/cpuinfo (Linux); elsewhere the error makes the model "unknown".
func readCPUInfo() (string, error) {
	b, err := os.ReadFile("/proc/cpuinfo")
	return string(b), err
}

// cpuModel returns the CPU's name from a /proc/cpuinfo text: the first "model name" (x86), else "Model" or
// "Hardware" (ARM boards), else "cpu model" (MIPS); "" when none is present.
func cpuModel(cpuinfo string) string {
	for _, key := range []string{"model name", "Model", "Hardware", "cpu model"} {
		for line := range strings.Lines(cpuinfo) {
			k, v, ok := strings.Cut(line, ":")
			if ok && strings.TrimSpace(k) == key {
				if v = strings.TrimSpace(v); v != "" {
					return v
				}
			}
		}
	}
	return ""
}
