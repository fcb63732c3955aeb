#!/usr/bin/env python3
"""PyTorch reference of `tune bench --model <decoder>`: the same causal-LM training step on the same GPU.

    python3 tools/reference/bench_decoder_pytorch.py [--presets smollm2-135m,qwen2.5-0.5b,llama-3.2-1b]
        [--bt 8x2048] [--steps 10] [--warmup 3] [--lora qwen2.5-0.5b] [--lora-r 16] [--lora-alpha 32]
        [--lora-targets all-linear] [--gradient-checkpointing] [--max-grad-norm 1.0] [--attn sdpa]
        [--json OUT.json]

For each preset (the sizes of transformer/llama/presets.go, random init, torch.manual_seed(42)):
AutoModelForCausalLM.from_config in FP32 with attn_implementation sdpa, in training mode (transformers'
gradient_checkpointing_enable() with --gradient-checkpointing); one synthetic batch of B x T tokens
(id i = (i*7919) mod vocab), labels = input ids, no attention mask; each step under
torch.autocast("cuda", bfloat16): forward with labels (transformers' shifted cross-entropy), backward,
clip_grad_norm_(trainable, --max-grad-norm) (the Trainer's default 1.0, as tune bench clips; 0 skips it),
torch.optim.AdamW(lr 2e-5, fused=True).step(), zero_grad(set_to_none=True). Full fine-tuning, or for the presets
named by --lora PEFT's LoraConfig(r=--lora-r, lora_alpha=--lora-alpha (2r), lora_dropout=0,
target_modules=--lora-targets, task_type="CAUSAL_LM"). Timing: --warmup untimed steps, then --steps steps each
between two CUDA events (no host synchronisation in between); the median is the step time. Memory:
torch.cuda.max_memory_allocated() since a reset once the caches are emptied, minus memory_allocated() then.
TF32 off.

Prints one JSON line per preset: {"preset", "bt", "tuning", "tokens_per_s", "peak_gib", "median_ms"}; with
--json also writes a results file in the schema of tune's internal/bench.Result ({"tool", "version", "date",
"results": [...]}) that `tune bench report` lines up with `tune bench --json` (model = the preset name).
"""

import argparse
import datetime
import json
import math
import os
import platform
import sys

PRESETS = {
    "smollm2-135m": dict(model_type="llama", vocab_size=49152, hidden_size=576, intermediate_size=1536,
                         num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3, rope_theta=100000.0,
                         rms_norm_eps=1e-5, tie_word_embeddings=True, max_position_embeddings=8192),
    "qwen2.5-0.5b": dict(model_type="qwen2", vocab_size=151936, hidden_size=896, intermediate_size=4864,
                         num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2, rope_theta=1e6,
                         rms_norm_eps=1e-6, tie_word_embeddings=True, max_position_embeddings=32768),
    "llama-3.2-1b": dict(model_type="llama", vocab_size=128256, hidden_size=2048, intermediate_size=8192,
                         num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                         rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
                         max_position_embeddings=131072,
                         rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                       "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
}


def percentile(xs, q):
    """numpy.percentile's default (linear interpolation between the nearest ranks), as tune's bench.Percentile."""
    s = sorted(xs)
    h = (len(s) - 1) * q / 100.0
    lo = int(math.floor(h))
    if lo >= len(s) - 1:
        return s[-1]
    return s[lo] + (h - lo) * (s[lo + 1] - s[lo])


def run(torch, name, b, t, args, lora):
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(42)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    d = dict(PRESETS[name])
    config = AutoConfig.for_model(d.pop("model_type"), **d)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=args.attn).cuda().train()
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    targets = None
    if lora:
        from peft import LoraConfig, get_peft_model
        targets = args.lora_targets if args.lora_targets == "all-linear" else args.lora_targets.split(",")
        alpha = args.lora_alpha or 2 * args.lora_r
        model = get_peft_model(model, LoraConfig(r=args.lora_r, lora_alpha=alpha, lora_dropout=0.0,
                                                 target_modules=targets, task_type="CAUSAL_LM"))
        if args.gradient_checkpointing:
            model.enable_input_require_grads()
    ids = (torch.arange(b * t, device="cuda") * 7919 % config.vocab_size).view(b, t)
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=2e-5, fused=True)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        if args.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(trainable, args.max_grad_norm)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(args.steps + 1)]
    losses = []
    events[0].record()
    for i in range(args.steps):
        losses.append(step().detach())
        events[i + 1].record()
    torch.cuda.synchronize()
    ms = [events[i].elapsed_time(events[i + 1]) for i in range(args.steps)]
    med = percentile(ms, 50)
    peak = torch.cuda.max_memory_allocated() - base
    res = dict(impl="pytorch-eager", device=torch.cuda.get_device_name(), attention=args.attn, model=name, batch=b,
               seq=t, mode="bf16", lora=bool(lora), gradient_checkpointing=args.gradient_checkpointing,
               params=sum(p.numel() for p in model.parameters()), trainable_params=sum(p.numel() for p in trainable),
               warmup=args.warmup, steps=args.steps, step_ms=ms, median_ms=med, p10_ms=percentile(ms, 10),
               p90_ms=percentile(ms, 90), tokens_per_s=b * t / (med / 1e3), flops_per_step=0, tflops=0,
               peak_bytes=peak, timing="CUDA events",
               memory="torch.cuda.max_memory_allocated() minus memory_allocated() before the model",
               skipped_steps=0, loss_first=float(losses[0]), loss_last=float(losses[-1]))
    if lora:
        res.update(lora_r=args.lora_r, lora_targets=[targets] if isinstance(targets, str) else targets)
    print(json.dumps(dict(preset=name, bt=f"{b}x{t}", tuning="lora" if lora else "full",
                          tokens_per_s=res["tokens_per_s"], peak_gib=peak / 2**30, median_ms=med)), flush=True)
    del model, opt, trainable
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--presets", default=",".join(PRESETS))
    p.add_argument("--bt", default="8x2048")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--lora", default="", help="comma-separated presets to run with LoRA instead of full fine-tuning")
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--lora-alpha", type=float, default=0, help="lora_alpha (default 2r)")
    p.add_argument("--lora-targets", default="all-linear", help="all-linear or a comma-separated module list")
    p.add_argument("--gradient-checkpointing", action="store_true")
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--attn", default="sdpa")
    p.add_argument("--json", default="", help="write a results file for tune bench report (must not exist)")
    a = p.parse_args()
    if a.json and os.path.exists(a.json):
        sys.exit("bench_decoder_pytorch.py: %s already exists" % a.json)
    import torch
    import transformers

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    b, t = (int(x) for x in a.bt.split("x"))
    lora = set(filter(None, a.lora.split(",")))
    doc = dict(tool="bench_decoder_pytorch.py", version=dict(torch=torch.__version__,
               transformers=transformers.__version__, python=platform.python_version()),
               date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
               host=platform.node(), results=[], errors=[])
    for name in filter(None, a.presets.split(",")):
        try:
            doc["results"].append(run(torch, name, b, t, a, name in lora))
        except Exception as e:  # an OOM must not lose the other presets
            doc["errors"].append(dict(config=name, error="%s: %s" % (type(e).__name__, e)))
            print("%s FAILED %s: %s" % (name, type(e).__name__, str(e)[:300]), flush=True)
        torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    if doc["errors"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
