package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/internal/atomicfile"

	"github.com/tune-ml/tune/loaders"
)

// Implementation names in Result.Impl.
const (
	ImplTune           = "tune"
	ImplPyTorchEager   = "pytorch-eager"
	ImplPyTorchCompile = "pytorch-compile"
)

// Result is one measured configuration: the JSON record `tune bench --json` writes and
// tools/reference/bench_pytorch.py writes for PyTorch, so that Report can line them up.
type Result struct {
	Impl      string `json:"impl"`                // ImplTune, ImplPyTorchEager, ImplPyTorchCompile
	Device    string `json:"device"`              // "NVIDIA H200", "cpu: <model> (2 cores)"
	Backend   string `json:"backend,omitempty"`   // "cuda:0", "cpu"
	Attention string `json:"attention,omitempty"` // PyTorch's attn_implementation (sdpa, eager)
	Model     string `json:"model"`               // "bert-base", "tiny", or a config.json path
	Batch     int    `json:"batch"`               // B, sequences per step
	Seq       int    `json:"seq"`                 // T, tokens per sequence (no padding)
	Mode      string `json:"mode"`                // fp32, fp16 or bf16 (autocast)
	LoRA      bool   `json:"lora"`                // LoRA fine-tuning instead of full
	// GradientCheckpointing says the layers were recomputed in backward (gradient_checkpointing).
	GradientCheckpointing bool `json:"gradient_checkpointing,omitempty"`
	LoRARank              int  `json:"lora_r,omitempty"` // adapter rank
	// LoRATargets are the adapted module names (PEFT target_modules).
	LoRATargets     []string `json:"lora_targets,omitempty"`
	Params          int64    `json:"params"`           // parameters of the model
	TrainableParams int64    `json:"trainable_params"` // parameters with a gradient and AdamW state
	Warmup          int      `json:"warmup"`           // untimed steps first
	Steps           int      `json:"steps"`            // timed steps
	// StepMS is each timed step's duration in milliseconds, in order.
	StepMS   []float64 `json:"step_ms"`
	MedianMS float64   `json:"median_ms"` // median of StepMS: the step time
	P10MS    float64   `json:"p10_ms"`    // 10th percentile of StepMS (Percentile)
	P90MS    float64   `json:"p90_ms"`    // 90th percentile of StepMS
	// TokensPerS is B·T / median step time.
	TokensPerS float64 `json:"tokens_per_s"`
	// FLOPsPerStep is CountFLOPs' total (GEMMs only; see the package documentation).
	FLOPsPerStep float64 `json:"flops_per_step"`
	// TFLOPS is FLOPsPerStep / median step time, in 10^12 FLOP/s.
	TFLOPS float64 `json:"tflops"`
	// PeakBytes is the most memory allocated during the warm-up and timed steps (weights, gradients, optimizer
	// state, activations, scratch) minus what was allocated before the model was built; see Memory.
	PeakBytes int64  `json:"peak_bytes"`
	Memory    string `json:"memory"` // how PeakBytes was measured
	Timing    string `json:"timing"` // how steps were timed: "CUDA events", "wall clock"
	// SkippedSteps counts timed FP16 steps the GradScaler skipped for inf/NaN gradients (no AdamW update).
	SkippedSteps int `json:"skipped_steps"`
	// HostWaitsPerStep is how often a timed step made the host wait for the device, on average: the CUDA
	// backend's own count (tensor.HostWaitCounter, the timing event excluded), or on a synchronous backend the
	// calls that hand device data to the host (Meter.HostReads). HostWaits splits it by op.
	HostWaitsPerStep float64            `json:"host_waits_per_step"`
	HostWaits        map[string]float64 `json:"host_waits,omitempty"`
	// CUDAGraph is how the steps ran when they were captured as a CUDA graph (Spec.CUDAGraphs).
	CUDAGraph *cuda.GraphStats `json:"cuda_graph,omitempty"`
	LossFirst float64          `json:"loss_first"` // loss of the first timed step
	LossLast  float64          `json:"loss_last"`  // loss of the last timed step
	// Breakdown is the per-op time of the profiled steps (tune bench --breakdown), the most time first.
	Breakdown *Breakdown `json:"breakdown,omitempty"`
}

// Key identifies the configuration a Result measured, whatever the implementation.
func (r *Result) Key() string {
	k := fmt.Sprintf("%s %d×%d %s", r.Model, r.Batch, r.Seq, r.Mode)
	if r.LoRA {
		k += fmt.Sprintf(" LoRA r=%d", r.LoRARank)
	}
	return k
}

// Breakdown is where the time of a profiled step goes, per op class (Meter).
type Breakdown struct {
	Steps int      `json:"steps"` // profiled steps the sums cover
	Ops   []OpStat `json:"ops"`   // per op class, the most time first; their MS sum to Steps profiled steps
	Gemms []OpStat `json:"gemms"` // per GEMM shape, the 20 slowest
	// StepMS is the median unprofiled step of the same run, for comparison with the per-step sum of Ops.
	StepMS float64 `json:"step_ms"`
	// LaunchMS is the median time of a 1-element Fill measured the same way: roughly what each op's time
	// includes besides its own work.
	LaunchMS float64 `json:"launch_ms"`
	Timing   string  `json:"timing"` // how ops were timed: "CUDA events behind a host gate ...", "wall clock"
}

// File is a results file: what produced it and its results.
type File struct {
	Tool    string            `json:"tool"`              // "tune bench", "bench_pytorch.py"
	Version map[string]string `json:"version,omitempty"` // module or library versions ("go", "torch", ...)
	Commit  string            `json:"commit,omitempty"`  // tune's VCS revision, "+dirty" when modified
	Date    string            `json:"date"`              // RFC 3339, UTC
	Host    string            `json:"host,omitempty"`    // the machine's host name (os.Hostname)
	Results []Result          `json:"results"`           // one per configuration measured
}

// ErrNoResults is returned by ReadFile for a results file that holds no result (every configuration of a
// bench_pytorch.py run failed, for example; its "errors" list says why).
var ErrNoResults = errors.New("bench: the file holds no results")

// ReadFile reads a results file written by WriteFile or by tools/reference/bench_pytorch.py.
func ReadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	var f File
	if err := json.Unmarshal(data, &f); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("bench: %s is not a results file: invalid JSON: %w", path, loaders.DescribeJSONError(data, err))
		}
		return nil, fmt.Errorf("bench: %s is not a results file: %w", path, loaders.DescribeJSONError(data, err))
	}
	if len(f.Results) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoResults, path)
	}
	for i, r := range f.Results {
		if r.Impl == "" || r.Batch <= 0 || r.Seq <= 0 || r.Mode == "" || !(r.MedianMS > 0) {
			return nil, fmt.Errorf("bench: %s: result %d lacks impl, batch, seq, mode or median_ms", path, i)
		}
	}
	return &f, nil
}

// WriteFile writes f as indented JSON to path through a temporary file and a rename, and refuses to replace an
// existing file (remove it first, or choose another name).
func WriteFile(path string, f *File) error {
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: encoding results: %w", err)
	}
	return writeNew(path, append(data, '\n'))
}

// writeNew writes data to a new file at path through atomicfile.WriteNew (a synced temporary file hard-linked
// into place), which refuses to replace an existing file, even one created while data was being written.
func writeNew(path string, data []byte) error {
	err := atomicfile.WriteNew(path, 0o644, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	switch {
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("bench: %s already exists; remove it or choose another name", path)
	case err != nil:
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}
