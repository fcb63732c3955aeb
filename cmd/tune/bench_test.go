package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/cmd/tune/internal/bench"
)

// quick returns the arguments of a short CPU benchmark of the tiny model followed by extra (a later flag
// overrides an earlier one).
func quick(extra ...string) []string {
	return append([]string{"bench", "--device", "cpu", "--model", "tiny", "--batch", "2", "--seq", "16", "--steps", "3", "--warmup", "1"}, extra...)
}

func TestBenchCPU(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name  string
		args  []string
		lines []string // modes expected in the table, in order
		want  []string
	}{
		{"full fine-tuning in three precisions", []string{"--modes", "fp32,fp16,bf16"}, []string{"fp32", "fp16", "bf16"},
			[]string{"tiny on cpu", "full fine-tuning (trainable params: 2,057,666 || all params: 2,057,666", "wall clock", "GFLOP per token"}},
		{"LoRA with a breakdown", []string{"--modes", "bf16", "--lora", "--lora-r", "4", "--breakdown"}, []string{"bf16"},
			[]string{"LoRA r=4 alpha=8 on query,value + classifier", "per-op time of tiny 2×16 bf16 LoRA r=4 (3 profiled steps", "Gemm weight-grad (bf16)", "GEMM shape"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".json")
			code, out, stderr := runTune(t, quick(append(tc.args, "--json", js)...)...)
			if code != exitOK {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
			}
			for _, w := range append(tc.want, "ms/step", "wrote "+js) {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			f, err := bench.ReadFile(js)
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Results) != len(tc.lines) || f.Tool != "tune bench" || f.Date == "" {
				t.Fatalf("results file: %d results, tool %q, date %q", len(f.Results), f.Tool, f.Date)
			}
			for i, r := range f.Results {
				if r.Mode != tc.lines[i] || r.Impl != bench.ImplTune || r.Steps != 3 || len(r.StepMS) != 3 || r.Batch != 2 || r.Seq != 16 {
					t.Errorf("result %d: %s, impl %s, %d steps %v", i, r.Key(), r.Impl, r.Steps, r.StepMS)
				}
			}
		})
	}
}

func TestBenchPlan(t *testing.T) {
	code, out, stderr := runTune(t, quick("--plan", "--modes", "fp32,bf16", "--lora")...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	for _, w := range []string{"weights", "AdamW state", "activations", "weight cache", "fp32 LoRA r=8", "bf16 LoRA r=8"} {
		if !strings.Contains(out, w) {
			t.Errorf("plan output lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "ms/step") {
		t.Errorf("--plan timed steps:\n%s", out)
	}
	if code, _, stderr := runTune(t, quick("--plan", "--breakdown")...); code != exitUsage || !strings.Contains(stderr, "runs no step") {
		t.Errorf("--plan --breakdown: exit %d, %q; want a usage error", code, stderr)
	}
	// --lora-dropout reaches the adapters: their dropout buffers (shared scratch) appear in the plan
	_, plain, _ := runTune(t, quick("--plan", "--modes", "bf16", "--lora")...)
	code, dropped, stderr := runTune(t, quick("--plan", "--modes", "bf16", "--lora", "--lora-dropout", "0.1")...)
	if code != exitOK || dropped == plain {
		t.Errorf("--lora-dropout 0.1: exit %d, %s; the plan equals the one without dropout:\n%s", code, stderr, dropped)
	}
}

func TestBenchUsageErrors(t *testing.T) {
	existing := filepath.Join(t.TempDir(), "old.json")
	if err := os.WriteFile(existing, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"an unknown precision", []string{"--modes", "fp8"}, exitUsage, `unknown precision "fp8"`},
		{"a precision twice", []string{"--modes", "bf16,BF16"}, exitUsage, "bf16 is given twice"},
		{"no timed steps", []string{"--steps", "0"}, exitUsage, "steps 0 must be positive"},
		// 2^57 × 128 wrapped to "0 tokens per step": a plan of a few MiB, then "makeslice: len out of range".
		{"batch × seq beyond 32 bits", []string{"--batch", "144115188075855872"}, exitUsage, "tokens per step, more than 2147483647"},
		{"an unknown model", []string{"--model", "gpt-9"}, exitUsage, "unknown model \"gpt-9\""},
		{"a sequence past max_position_embeddings", []string{"--seq", "1024"}, exitUsage, "seq 1024 must be in [1, 512]"},
		{"a LoRA target the model lacks", []string{"--lora", "--lora-targets", "qkv"}, exitUsage, "qkv"},
		{"a LoRA dropout of 1", []string{"--lora", "--lora-dropout", "1"}, exitUsage, "lora_dropout"},
		{"a results file that exists", []string{"--json", existing}, exitUsage, "already exists"},
		// tester7 F7: the folder was found missing only after every timed step.
		{"a results file in a missing folder", []string{"--json", filepath.Join(existing+".d", "x.json")}, exitUsage,
			"the directory " + existing + ".d does not exist"},
		// tester7 F6: a negative count other than the default's -1 ran the default.
		{"a negative step count", []string{"--steps", "-5"}, exitUsage, "--steps -5: want a number of steps (1 or more"},
		{"a negative warm-up", []string{"--warmup", "-2"}, exitUsage, "--warmup -2: want a number of steps (0 or more"},
		{"a positional argument", []string{"extra"}, exitUsage, "takes no arguments"},
		{"CUDA in a binary without it", []string{"--device", "cuda"}, exitNoDevice, "built without CUDA support"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runTune(t, quick(tc.args...)...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d mentioning %q", code, stderr, tc.code, tc.want)
			}
		})
	}
	if data, _ := os.ReadFile(existing); string(data) != "{}" {
		t.Errorf("the existing results file was changed to %q", data)
	}
}

func TestBenchReport(t *testing.T) {
	dir := t.TempDir()
	tuneJSON := filepath.Join(dir, "tune.json")
	if code, out, stderr := runTune(t, quick("--modes", "bf16", "--json", tuneJSON)...); code != exitOK {
		t.Fatalf("bench: exit %d\n%s\n%s", code, out, stderr)
	}
	f, err := bench.ReadFile(tuneJSON)
	if err != nil {
		t.Fatal(err)
	}
	// A PyTorch result of the same configuration that took twice as long and half the memory.
	ref := f.Results[0]
	ref.Impl, ref.Attention, ref.Breakdown = bench.ImplPyTorchEager, "sdpa", nil
	ref.MedianMS *= 2
	ref.PeakBytes /= 2
	torchJSON := filepath.Join(dir, "torch.json")
	if err := bench.WriteFile(torchJSON, &bench.File{Tool: "bench_pytorch.py", Date: "2026-01-01T00:00:00Z", Results: []bench.Result{ref}}); err != nil {
		t.Fatal(err)
	}
	png := filepath.Join(dir, "bench.png")
	code, out, stderr := runTune(t, "bench", "report", "--markdown", "--png", png, tuneJSON, torchJSON)
	if code != exitOK {
		t.Fatalf("report: exit %d\n%s\n%s", code, out, stderr)
	}
	for _, w := range []string{"| tiny 2×16 bf16 | tune |", "| pytorch-eager |", "| 0.50 | 2.00 |",
		"bert-base 64×512 BF16 full fine-tuning: throughput ≥ 1.0× PyTorch eager: not measured", "wrote " + png} {
		if !strings.Contains(out, w) {
			t.Errorf("report output lacks %q:\n%s", w, out)
		}
	}
	if st, err := os.Stat(png); err != nil || st.Size() == 0 {
		t.Errorf("chart: %v", err)
	}
	empty := filepath.Join(dir, "failed.json")
	if err := os.WriteFile(empty, []byte(`{"tool":"bench_pytorch.py","results":[],"errors":[{"config":"x","error":"OOM"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := runTune(t, "bench", "report", tuneJSON, empty); code != exitOK || !strings.Contains(out, "no results (skipped") {
		t.Errorf("a file without results next to one with: exit %d\n%s\n%s", code, out, stderr)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no files", []string{"bench", "report"}, exitUsage, "needs one or more results files"},
		{"a chart that exists", []string{"bench", "report", "--png", png, tuneJSON}, exitUsage, "already exists"},
		{"a file that is not results", []string{"bench", "report", png}, exitUsage, "not a results file"},
		{"only a file without results", []string{"bench", "report", empty}, exitUsage, "none of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runTune(t, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d mentioning %q", code, stderr, tc.code, tc.want)
			}
		})
	}
}

// TestBenchCPUDefaults: without --steps and --warmup, the CPU times 10 steps after 2 warm-ups per precision
// (`tune bench --device cpu` took about 3 minutes with the GPU's 30 + 5), the GPU 30 after 5.
func TestBenchCPUDefaults(t *testing.T) {
	o := &benchOptions{Modes: []string{"fp32", "bf16"}, Batch: 32, Seq: 128, Steps: -1, Warmup: -1, LR: 2e-5, Seed: 42, Attn: "sdpa"}
	for _, c := range []struct {
		gpu           bool
		steps, warmup int
	}{{false, 10, 2}, {true, 30, 5}} {
		specs, err := o.specs(c.gpu)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range specs {
			if s.Steps != c.steps || s.Warmup != c.warmup {
				t.Errorf("gpu %v: %d steps after %d warm-up, want %d after %d", c.gpu, s.Steps, s.Warmup, c.steps, c.warmup)
			}
		}
	}
	o.Steps, o.Warmup = 7, 0
	if specs, _ := o.specs(false); specs[0].Steps != 7 || specs[0].Warmup != 0 {
		t.Errorf("--steps 7 --warmup 0: %d, %d", specs[0].Steps, specs[0].Warmup)
	}
}

// TestBenchDecoder benchmarks a tiny causal LM (a config.json of model_type llama) on the CPU: LoRA r 2 on
// all-linear with a breakdown, and the memory plan of full fine-tuning with gradient checkpointing; a decoder
// preset plans too (nothing allocated, so SmolLM2's 8×2048 shape fits here).
func TestBenchDecoder(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfg, []byte(`{"model_type": "llama", "vocab_size": 64, "hidden_size": 32,
		"intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
		"tie_word_embeddings": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	dec := func(extra ...string) []string {
		return append([]string{"bench", "--device", "cpu", "--model", cfg, "--batch", "2", "--seq", "16", "--steps", "2", "--warmup", "1"}, extra...)
	}
	code, out, stderr := runTune(t, dec("--modes", "bf16", "--lora", "--lora-r", "2", "--lora-alpha", "8", "--lora-targets", "all-linear", "--breakdown")...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	for _, w := range []string{"LoRA r=2 alpha=8 on all-linear (trainable params: 1,856 ||", "per-op time of", "RMSNorm", "Attention", "CrossEntropy"} {
		if !strings.Contains(out, w) {
			t.Errorf("stdout lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "classifier") {
		t.Errorf("a causal LM's LoRA names a classifier:\n%s", out)
	}
	code, out, stderr = runTune(t, dec("--plan", "--gradient-checkpointing", "--modes", "bf16,fp32")...)
	if code != exitOK || !strings.Contains(out, "activations") || !strings.Contains(out, "fp32") {
		t.Fatalf("plan: exit %d\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = runTune(t, "bench", "--device", "cpu", "--plan", "--model", "smollm2-135m", "--batch", "8", "--seq", "2048", "--modes", "bf16")
	if code != exitOK || !strings.Contains(out, "smollm2-135m on cpu") || !strings.Contains(out, "BF16[16384 1536]") {
		t.Fatalf("smollm2-135m plan: exit %d\n%s\n%s", code, out, stderr)
	}
}

// TestBenchCPUProfileEveryMode: TUNE_BENCH_CPUPROFILE=FILE with two --modes (the default is three) ran the
// first and failed at the second, "TUNE_BENCH_CPUPROFILE: open FILE: file exists" (exit 1). The first mode
// writes FILE, each later one FILE.MODE; a FILE that was there before is still refused, before any step.
func TestBenchCPUProfileEveryMode(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "prof.out")
	t.Setenv("TUNE_BENCH_CPUPROFILE", prof)
	if code, _, stderr := runTune(t, quick("--modes", "fp32,bf16")...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, p := range []string{prof, prof + ".bf16"} {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
	}
	old := filepath.Join(dir, "old.out")
	if err := os.WriteFile(old, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TUNE_BENCH_CPUPROFILE", old)
	code, stdout, stderr := runTune(t, quick("--modes", "fp32")...)
	if code == 0 || !strings.Contains(stderr, "file exists") || strings.Contains(stderr, "ms/step") || strings.Contains(stdout, "ms/step") {
		t.Errorf("an existing FILE: exit %d, stdout %q, stderr %q; want a refusal before the steps", code, stdout, stderr)
	}
	if data, _ := os.ReadFile(old); string(data) != "mine" {
		t.Errorf("the existing file was changed to %q", data)
	}
}

// TestBenchCPUGraphsRunEagerly: --cuda-graphs on the CPU warns once and times the eager steps, as tune
// finetune's --cuda-graphs does (findings6: exit 3 after the first progress line).
func TestBenchCPUGraphsRunEagerly(t *testing.T) {
	code, out, stderr := runTune(t, quick("--modes", "fp32", "--cuda-graphs")...)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	if !strings.Contains(stderr, "warning: --cuda-graphs: the steps run eagerly: the cpu backend has no CUDA graphs") ||
		!strings.Contains(out, "ms/step") {
		t.Errorf("want the warning and a timed table\nstdout:\n%s\nstderr:\n%s", out, stderr)
	}
}
