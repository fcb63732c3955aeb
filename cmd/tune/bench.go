package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/cmd/tune/internal/bench"
	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/tensor"
)

func init() { register(newBenchCmd) }

// breakdownSteps is how many profiled steps --breakdown runs after the timed ones.
const breakdownSteps = 3

// benchOptions holds `tune bench`'s flags.
type benchOptions struct {
	Model       string   // --model: a preset name or a config.json path ("" picks by device)
	Batch, Seq  int      // --batch, --seq
	Modes       []string // --modes: fp32, fp16, bf16
	LoRA        bool     // --lora
	LoRARank    int      // --lora-r
	LoRAAlpha   float64  // --lora-alpha (0: 2r)
	LoRADropout float64  // --lora-dropout (PEFT's default 0)
	LoRATargets []string // --lora-targets (empty: PEFT's default for the architecture)
	Steps       int      // --steps: timed steps
	Warmup      int      // --warmup: untimed steps first
	LR          float64  // --lr
	Seed        uint64   // --seed
	Device      string   // --device: cpu, cuda, cuda:N or auto
	JSON        string   // --json: results file to write
	Breakdown   bool     // --breakdown: per-op time of the profiled steps
	Plan        bool     // --plan: the memory plan instead of timing
	Attn        string   // --attn-implementation: sdpa (default) or eager
	GradCkpt    bool     // --gradient-checkpointing
	Graphs      bool     // --cuda-graphs
	GemmAlgos   string   // --gemm-algos (hidden): after the steps, survey cuBLASLt's algorithms (heuristic or all)
	GemmMinDim  int      // --gemm-algos-min-dim (hidden): skip GEMMs with M, N or K at most this (0: the survey's 64)
}

func newBenchCmd() *cobra.Command {
	o := &benchOptions{}
	cmd := &cobra.Command{
		Use:   "bench [--model bert-base|tiny|smollm2-135m|...] [--batch 32 --seq 128] [--modes fp32,fp16,bf16] [--lora]",
		Short: "Time full training steps per precision: ms/step, tokens/s, TFLOP/s, peak memory",
		Long: `bench builds a freshly initialised model (a BertForSequenceClassification, or a causal LM with --model; no
checkpoint needed) and times full training steps on a synthetic batch of --batch sequences of --seq tokens,
once per precision in --modes.
A step is what tune finetune does per optimizer step: forward with dropout, backward, FP16 gradient
unscaling with the GradScaler, gradient clipping to norm 1.0, AdamW (lr --lr, no weight decay) and zeroing
the gradients. After --warmup untimed steps, --steps steps are timed one by one — with CUDA events on a GPU,
with the wall clock on the CPU — and the table shows per precision:

  ms/step, p10–p90   median step time and the 10th–90th percentile range
  tokens/s           batch × seq / median step time
  TFLOP/s            GEMM FLOPs per step / median step time. FLOPs are counted from the model as built:
                     2·rows·in·out per projection for the forward, again for the input gradient, and again
                     for the weight gradient of trained weights only (LoRA's frozen weights have none), the
                     adapters' A and B products, and 12·B·L·T²·C for attention. Fully fine-tuned BERT-base:
                     6 FLOPs per token per matmul weight + attention = 0.524 GFLOP/token at seq 128.
  peak GiB           the most memory allocated during the warm-up and timed steps, minus what was allocated
                     before the model: the CUDA caching allocator's peak (as torch.cuda.max_memory_allocated),
                     or on the CPU the bytes of the tensors allocated
  skipped            FP16 steps the GradScaler skipped for inf/NaN gradients
  loss first→last    the loss of the first and last timed step
  waits/step         how often a timed step made the host wait for the device (cuStreamSynchronize; on the
                     CPU the calls that hand tensor data to the host); on a GPU the loss and gradient norm stay
                     on the device (FP16 still reads the GradScaler's found-inf flag each step), while
                     TUNE_SYNC_FREE=0 reads them and checks the token ids on the device every step

Models: tiny (tiny-bert-random's shape), mini, small, bert-base, bert-large, or a BERT config.json path; and
the causal LMs smollm2-135m, qwen2.5-0.5b, llama-3.2-1b (the published shapes of HuggingFaceTB/SmolLM2-135M,
Qwen/Qwen2.5-0.5B and meta-llama/Llama-3.2-1B, randomly initialised: nothing is downloaded) or a config.json of
model_type llama, qwen2, qwen3 or mistral. A causal LM trains with the shifted next-token cross-entropy on
random token ids that are also its labels (no padding, no attention mask); its FLOPs count causal attention
as half the T×T products and include the LM head. Without --model, bert-base on a GPU and tiny on the CPU.
--lora adapts the model with PEFT's LoraConfig(r=--lora-r, lora_alpha=--lora-alpha (2r by default),
lora_dropout=--lora-dropout (0 by default, as PEFT's), target_modules=--lora-targets, task_type=SEQ_CLS for
BERT, CAUSAL_LM for a causal LM) first: only the adapters
(and BERT's classifier) train. --lora-targets all-linear adapts every Linear but the head; without it, PEFT's
default for the architecture (query,value; q_proj,v_proj). --breakdown then runs 3 more steps with every op timed alone and prints where the time goes.
--plan times nothing and allocates nothing sized by the model: it builds the model and AdamW on a meta
backend (tensors without storage, no weights drawn), lays out the activation arena for the batch, and prints
the bytes of each (weights, gradients, AdamW state, activations and how much of them is T×T attention
buffers or the attention dropout's keep bits (dropout bits, one bit per score), autocast weight copies) and
the largest activation buffers.
--attn-implementation eager times (or plans) the two-pass attention instead of the fused op.
--gradient-checkpointing keeps only each encoder or decoder layer's input and recomputes the layer in backward
(gradient_checkpointing: true): the plan shows the smaller activation arena; the TFLOP/s column still
counts the model's FLOPs, not the recomputation's.
--cuda-graphs (CUDA, experimental) captures a step as a CUDA graph after the warm-up and replays it; the JSON's
cuda_graph says how many timed steps replayed and, if graphs turned off, why. It needs a step without host waits:
the default, FP16 included (its power-of-two loss scales are updated on the device); with TUNE_SYNC_FREE=0 the
steps read their scalars on the host, cannot be captured and run eagerly, the reason in cuda_graph. On the CPU
--cuda-graphs warns and the steps run eagerly, as tune finetune's.
TUNE_BENCH_CPUPROFILE=FILE writes a CPU profile of the timed steps (go tool pprof): where the host's time goes;
the first precision of --modes writes FILE, each later one FILE.MODE (FILE.bf16); an existing file is refused.
--json writes every result as JSON for tune bench report, which lines them up with PyTorch's
(tools/reference/bench_pytorch.py) and draws the chart; scripts/bench-gpu.sh runs both on a GPU.`,
		Example: `  tune bench --device cpu
  tune bench --model bert-base --batch 64 --seq 512 --modes bf16
  tune bench --model smollm2-135m --batch 8 --seq 2048 --modes bf16 --breakdown
  tune bench --model qwen2.5-0.5b --batch 8 --seq 2048 --modes bf16 --lora --lora-r 16 --lora-targets all-linear
  tune bench --plan --model qwen2.5-0.5b --batch 8 --seq 2048 --modes bf16 --lora --lora-r 16 --lora-targets all-linear --device cpu
  tune bench --lora --lora-r 8 --modes fp16,bf16 --json lora.json
  tune bench --modes bf16 --steps 10 --breakdown
  tune bench --plan --model bert-base --batch 1 --seq 512 --device cpu
  tune bench --plan --gradient-checkpointing --model bert-base --batch 64 --seq 512 --modes bf16,fp32 --device cpu
  tune bench report --png bench.png tune.json pytorch.json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("bench takes no arguments (did you mean tune bench report %s?)", strings.Join(args, " "))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Model, "model", "", "bert-base, tiny, mini, small, bert-large, smollm2-135m, qwen2.5-0.5b, llama-3.2-1b or a config.json (default: bert-base on a GPU, tiny on the CPU)")
	f.IntVar(&o.Batch, "batch", 32, "sequences per step (per_device_train_batch_size)")
	f.IntVar(&o.Seq, "seq", 128, "tokens per sequence (all real, no padding)")
	f.StringSliceVar(&o.Modes, "modes", []string{"fp32", "fp16", "bf16"}, "precisions to time, in order: fp32, fp16, bf16")
	f.BoolVar(&o.LoRA, "lora", false, "train LoRA adapters (and the classifier) instead of every parameter")
	f.IntVar(&o.LoRARank, "lora-r", 8, "LoRA rank r")
	f.Float64Var(&o.LoRAAlpha, "lora-alpha", 0, "LoRA lora_alpha (default 2r)")
	f.Float64Var(&o.LoRADropout, "lora-dropout", 0, "LoRA lora_dropout, in [0, 1) (recipes/bert.yaml uses 0.1)")
	f.StringSliceVar(&o.LoRATargets, "lora-targets", nil, "modules that get an adapter (target_modules), or all-linear (default: query,value for BERT, q_proj,v_proj for a causal LM)")
	f.IntVar(&o.Steps, "steps", -1, "timed steps per precision (default 30 on a GPU, 10 on the CPU)")
	f.IntVar(&o.Warmup, "warmup", -1, "untimed steps first: kernel compilation, GEMM plans, allocator warm-up (default 5 on a GPU, 2 on the CPU)")
	for _, name := range []string{"steps", "warmup"} { // their usage says the device's default; -1 only marks "not given"
		f.Lookup(name).DefValue = "0"
	}
	f.Float64Var(&o.LR, "lr", 2e-5, "AdamW learning rate")
	f.Uint64Var(&o.Seed, "seed", 42, "seed of the weights, adapters, tokens, labels and dropout")
	f.StringVar(&o.Device, "device", "auto", "cpu, cuda, cuda:N or auto (CUDA when available)")
	f.StringVar(&o.JSON, "json", "", "write the results as JSON to this new file")
	f.StringVar(&o.Attn, "attn-implementation", "sdpa", "attention: sdpa (the fused op) or eager (the two-pass path), as transformers' attn_implementation")
	f.BoolVar(&o.Graphs, "cuda-graphs", false, "capture a step as a CUDA graph after the warm-up and replay it (CUDA): the first replay is checked against the step, later ones launch at once and are compared after")
	f.BoolVar(&o.GradCkpt, "gradient-checkpointing", false, "recompute each encoder or decoder layer in backward instead of keeping its activations (gradient_checkpointing)")
	f.BoolVar(&o.Plan, "plan", false, "print the memory a step keeps allocated (weights, gradients, AdamW state, activations) instead of timing")
	f.BoolVar(&o.Breakdown, "breakdown", false, fmt.Sprintf("after the timed steps, time every op of %d steps alone and print where the time goes", breakdownSteps))
	f.StringVar(&o.GemmAlgos, "gemm-algos", "", "after the steps, time cuBLASLt's algorithms for every GEMM the steps ran (heuristic: up to 32 heuristic results; all: also every ID × tile × stages) — the input of cuda/gemmtable.json")
	_ = f.MarkHidden("gemm-algos")
	f.IntVar(&o.GemmMinDim, "gemm-algos-min-dim", 0, "with --gemm-algos: skip GEMMs whose M, N or K is at most this (default 64, which leaves out LoRA's rank-r products; 1 surveys them too)")
	_ = f.MarkHidden("gemm-algos-min-dim")
	cmd.AddCommand(newBenchReportCmd())
	return cmd
}

// specs validates the options and returns one Spec per mode (the model still to be chosen by device).
func (o *benchOptions) specs(onGPU bool) ([]bench.Spec, error) {
	model := o.Model
	if model == "" {
		model = "tiny"
		if onGPU {
			model = "bert-base"
		}
	}
	if len(o.Modes) == 0 {
		return nil, usagef("--modes is empty; give one or more of fp32, fp16, bf16")
	}
	var specs []bench.Spec
	seen := map[string]bool{}
	for _, m := range o.Modes {
		p, err := amp.ParsePrecision(m)
		if err != nil || strings.TrimSpace(m) == "" || strings.EqualFold(m, "no") {
			return nil, usagef("--modes: unknown precision %q (want fp32, fp16 or bf16)", m)
		}
		if seen[p.Precision()] {
			return nil, usagef("--modes: %s is given twice", p.Precision())
		}
		seen[p.Precision()] = true
		s := bench.DefaultSpec()
		if err := s.SetModel(model); err != nil {
			return nil, usageError{err}
		}
		s.Batch, s.Seq, s.Policy = o.Batch, o.Seq, p
		s.Steps, s.Warmup, s.LearningRate, s.Seed = o.Steps, o.Warmup, o.LR, o.Seed
		// The CPU runs a step in emulated half precision far slower than a GPU: fewer steps by default keep
		// `tune bench --device cpu` under a minute (30 + 5 steps in three precisions took about 3 minutes).
		if s.Steps < 0 {
			s.Steps = map[bool]int{true: 30, false: 10}[onGPU]
		}
		if s.Warmup < 0 {
			s.Warmup = map[bool]int{true: 5, false: 2}[onGPU]
		}
		s.AttnImplementation, s.GradientCheckpointing, s.CUDAGraphs = o.Attn, o.GradCkpt, o.Graphs
		if o.LoRA {
			c := s.LoRAFor(o.LoRARank, o.LoRAAlpha, o.LoRATargets)
			c.LoraDropout = o.LoRADropout
			s.LoRA = &c
		}
		if o.Breakdown {
			s.Profile = breakdownSteps
		}
		if err := s.Validate(); err != nil {
			return nil, usageError{err}
		}
		specs = append(specs, s)
	}
	return specs, nil
}

func (o *benchOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	if o.GemmAlgos != "" && o.GemmAlgos != "heuristic" && o.GemmAlgos != "all" {
		return usagef("--gemm-algos %q: want heuristic or all", o.GemmAlgos)
	}
	if o.GemmMinDim < 0 || (o.GemmMinDim > 0 && o.GemmAlgos == "") {
		return usagef("--gemm-algos-min-dim %d: want a positive size, with --gemm-algos", o.GemmMinDim)
	}
	if o.JSON != "" {
		if _, err := os.Lstat(o.JSON); !errors.Is(err, fs.ErrNotExist) {
			return usagef("--json %s already exists; remove it or choose another name", o.JSON)
		}
		// Its folder too, before the steps: a missing one failed after the whole benchmark (tester7 F7).
		if err := checkOutputDir("--json", o.JSON); err != nil {
			return err
		}
	}
	// -1, the flags' default, picks the device's count; another negative number was taken for it (tester7 F6).
	for _, f := range []struct {
		name string
		v    int
		want string
	}{{"--steps", o.Steps, "1 or more"}, {"--warmup", o.Warmup, "0 or more"}} {
		if f.v < -1 {
			return usagef("%s %d: want a number of steps (%s; leave it out for the device's default)", f.name, f.v, f.want)
		}
	}
	b, err := openDevice(o.Device)
	if err != nil {
		return err
	}
	_, onGPU := cuda.Memory(b)
	specs, err := o.specs(onGPU)
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()

	s0 := specs[0]
	fmt.Fprintf(stdout, "tune bench: %s on %s (%s), batch %d × seq %d = %d tokens per step\n",
		s0.Model, b.Name(), bench.Describe(b), s0.Batch, s0.Seq, s0.Batch*s0.Seq)
	if o.Plan {
		return o.plan(stdout, b, specs)
	}
	if !onGPU {
		fmt.Fprintln(stdout, "note: CPU timings depend on the machine's load; half precision is emulated on the CPU (correct, not faster)")
	}
	if o.Graphs && !onGPU {
		// As tune finetune's training.cuda_graphs on the CPU: one warning, and the steps run eagerly (this
		// failed with exit 3 after the first progress line).
		fmt.Fprintf(stderr, "warning: --cuda-graphs: the steps run eagerly: the %s backend has no CUDA graphs (--device cuda runs them)\n", b.Name())
		for i := range specs {
			specs[i].CUDAGraphs = false
		}
	}
	file := &bench.File{Tool: "tune bench", Version: map[string]string{"go": runtime.Version()}, Commit: commit(),
		Date: time.Now().UTC().Format(time.RFC3339)}
	file.Host, _ = os.Hostname()
	for _, s := range specs {
		fmt.Fprintf(stderr, "%s: %d warm-up + %d timed steps ...\n", s.Policy.Precision(), s.Warmup, s.Steps)
		res, err := bench.Run(ctx, b, s)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "%s: %.2f ms/step\n", res.Mode, res.MedianMS)
		file.Results = append(file.Results, *res)
	}
	r0 := &file.Results[0]
	tuned := "full fine-tuning"
	if s0.LoRA != nil {
		tuned = fmt.Sprintf("LoRA r=%d alpha=%g on %s", s0.LoRA.R, s0.LoRA.LoraAlpha, strings.Join(r0.LoRATargets, ","))
		if s0.Decoder == nil {
			tuned += " + classifier"
		}
	}
	fmt.Fprintf(stdout, "%s (%s); AdamW lr %g, clip 1.0; %d warm-up + %d timed steps, %s\n",
		tuned, lora.FormatTrainable(int(r0.TrainableParams), int(r0.Params)), s0.LearningRate, s0.Warmup, s0.Steps, r0.Timing)
	fmt.Fprintf(stdout, "GEMM FLOPs per step: %.4g GFLOP, %.4g GFLOP per token (see tune bench --help)\nmemory: %s\n\n",
		r0.FLOPsPerStep/1e9, r0.FLOPsPerStep/float64(s0.Batch*s0.Seq)/1e9, r0.Memory)
	if err := bench.WriteTable(stdout, file.Results); err != nil {
		return err
	}
	for i := range file.Results {
		if file.Results[i].Breakdown != nil {
			fmt.Fprintln(stdout)
			if err := bench.WriteBreakdown(stdout, &file.Results[i]); err != nil {
				return err
			}
		}
	}
	if o.JSON != "" {
		if err := bench.WriteFile(o.JSON, file); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nwrote %s\n", o.JSON)
	}
	if o.GemmAlgos != "" {
		fmt.Fprintln(stdout)
		return cuda.SurveyGemms(b, stdout, cuda.GemmSurveyOptions{Enumerate: o.GemmAlgos == "all", MinDim: o.GemmMinDim})
	}
	return nil
}

// plan prints the memory plan of every spec (no step runs).
func (o *benchOptions) plan(stdout io.Writer, b tensor.Backend, specs []bench.Spec) error {
	if o.JSON != "" || o.Breakdown {
		return usagef("--plan runs no step: it takes neither --json nor --breakdown")
	}
	var labels []string
	var plans []bench.MemoryPlan
	for _, s := range specs {
		p, err := bench.Plan(b, s)
		if err != nil {
			return err
		}
		label := s.Policy.Precision()
		if s.LoRA != nil {
			label += fmt.Sprintf(" LoRA r=%d", s.LoRA.R)
		}
		labels, plans = append(labels, label), append(plans, p)
	}
	fmt.Fprintln(stdout, "memory a training step keeps allocated, GiB (weight cache: autocast copies of the projection weights, computed;")
	fmt.Fprintln(stdout, "the rest counted from the model, AdamW and the step arena's layout, nothing allocated; op scratch comes on top)")
	fmt.Fprintln(stdout)
	return bench.WritePlan(stdout, labels, plans)
}

// commit returns the VCS revision the binary was built from ("+dirty" when the tree was modified), or "".
func commit() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return ""
	}
	return rev + dirty
}

// benchReportOptions holds `tune bench report`'s flags and arguments.
type benchReportOptions struct {
	Files    []string
	Markdown bool   // --markdown
	PNG      string // --png
}

func newBenchReportCmd() *cobra.Command {
	o := &benchReportOptions{}
	cmd := &cobra.Command{
		Use:   "report [--markdown] [--png FILE] RESULTS.json...",
		Short: "Line up benchmark results of tune and PyTorch: tune/PyTorch ratios, targets, bar chart",
		Long: `report reads results files written by tune bench --json and by tools/reference/bench_pytorch.py, and
prints them per configuration (model, batch × seq, precision, full or LoRA) with, on each PyTorch line, the
ratios tune/PyTorch of the median step time (below 1: tune is faster) and of the peak memory (below 1: tune
uses less). Then it checks the first-pass targets against PyTorch eager (sdpa attention):

  bert-base 64×512 BF16 full fine-tuning: throughput ≥ 1.0× and peak memory ≤ 1.0×
  bert-base 32×128 BF16 LoRA r=8:          throughput ≥ 1.5×

and prints the per-op breakdown of any result that has one (tune bench --breakdown). --png draws the
throughput and memory bar chart into a new file; --markdown prints the table as Markdown.`,
		Example: `  tune bench report tune-32x128.json tune-64x512.json pytorch.json
  tune bench report --markdown --png docs/bench.png out/*.json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("report needs one or more results files (tune bench --json, bench_pytorch.py)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Files = args
			return o.run(cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&o.Markdown, "markdown", false, "print the table as Markdown")
	cmd.Flags().StringVar(&o.PNG, "png", "", "draw the bar chart into this new PNG file")
	return cmd
}

func (o *benchReportOptions) run(stdout io.Writer) error {
	if o.PNG != "" {
		if _, err := os.Lstat(o.PNG); !errors.Is(err, fs.ErrNotExist) {
			return usagef("--png %s already exists; remove it or choose another name", o.PNG)
		}
	}
	var all []bench.Result
	var sources []string
	for _, path := range o.Files {
		f, err := bench.ReadFile(path)
		if errors.Is(err, bench.ErrNoResults) {
			sources = append(sources, path+": no results (skipped; its \"errors\" say why)")
			continue
		}
		if err != nil {
			return badinput.Mark(err) // not a results file (exit 2); one that cannot be read is exit 1
		}
		all = append(all, f.Results...)
		src := fmt.Sprintf("%s: %s, %d results", path, f.Tool, len(f.Results))
		if f.Commit != "" {
			src += ", commit " + f.Commit
		}
		if f.Date != "" {
			src += ", " + f.Date
		}
		sources = append(sources, src)
	}
	if len(all) == 0 {
		return badinput.Errorf("bench: none of %s holds a result", strings.Join(o.Files, ", "))
	}
	devices := map[string]bool{}
	for _, r := range all {
		devices[r.Device] = true
	}
	for _, s := range sources {
		fmt.Fprintln(stdout, s)
	}
	if len(devices) > 1 {
		names := slices.Sorted(func(yield func(string) bool) {
			for d := range devices {
				if !yield(d) {
					return
				}
			}
		})
		fmt.Fprintf(stdout, "warning: the results come from different devices (%s); ratios compare machines, not implementations\n",
			strings.Join(names, "; "))
	}
	fmt.Fprintln(stdout)
	if err := bench.WriteComparison(stdout, all, o.Markdown); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	if err := bench.WriteTargets(stdout, bench.Targets(all)); err != nil {
		return err
	}
	for i := range all {
		if all[i].Breakdown != nil {
			fmt.Fprintln(stdout)
			if err := bench.WriteBreakdown(stdout, &all[i]); err != nil {
				return err
			}
		}
	}
	if o.PNG != "" {
		if err := bench.WriteChart(o.PNG, all); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nwrote %s\n", o.PNG)
	}
	return nil
}
