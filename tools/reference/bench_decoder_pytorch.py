#!/usr/bin/env python3
"""PyTorch reference of transformer/llama's BenchmarkDecoderStep: the same decoder training step on the same GPU.

    python3 tools/reference/bench_decoder_pytorch.py [--presets smollm2-135m,qwen2.5-0.5b,llama-3.2-1b]
        [--bt 8x2048] [--steps 10] [--warmup 3] [--lora qwen2.5-0.5b] [--attn sdpa]

For each preset (the sizes of transformer/llama/presets.go, random init, torch.manual_seed(42)):
AutoModelForCausalLM.from_config in FP32 with attn_implementation sdpa, in training mode; one synthetic batch of
B x T tokens (id i = (i*7919) mod vocab, as the Go benchmark), labels = input ids; each step under
torch.autocast("cuda", bfloat16): forward with labels (transformers' shifted cross-entropy), backward,
torch.optim.AdamW(lr 2e-5, fused=True).step(), zero_grad(set_to_none=True). Full fine-tuning, or with --lora a
preset's PEFT LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"). Timing:
--warmup untimed steps, then --steps between two CUDA events with a synchronize; memory:
torch.cuda.max_memory_allocated() from a reset before the model was built. TF32 off. Prints one JSON line per
preset: {"preset", "bt", "tuning", "tokens_per_s", "peak_gib"}.
"""

import argparse
import json

import torch
from transformers import AutoConfig, AutoModelForCausalLM

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


def run(name, b, t, steps, warmup, lora, attn):
    torch.manual_seed(42)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    d = dict(PRESETS[name])
    config = AutoConfig.for_model(d.pop("model_type"), **d)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attn).cuda().train()
    if lora:
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear",
                                                 task_type="CAUSAL_LM"))
    ids = (torch.arange(b * t, device="cuda") * 7919 % config.vocab_size).view(b, t)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-5, fused=True)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(steps):
        step()
    end.record()
    torch.cuda.synchronize()
    secs = start.elapsed_time(end) / 1000
    res = {"preset": name, "bt": f"{b}x{t}", "tuning": "lora" if lora else "full",
           "tokens_per_s": steps * b * t / secs, "peak_gib": torch.cuda.max_memory_allocated() / 2**30}
    print(json.dumps(res), flush=True)
    del model, opt
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--presets", default=",".join(PRESETS))
    p.add_argument("--bt", default="8x2048")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--lora", default="", help="comma-separated presets to run with LoRA r=16 all-linear instead")
    p.add_argument("--attn", default="sdpa")
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    b, t = (int(x) for x in a.bt.split("x"))
    lora = set(filter(None, a.lora.split(",")))
    for name in filter(None, a.presets.split(",")):
        run(name, b, t, a.steps, a.warmup, name in lora, a.attn)


if __name__ == "__main__":
    main()
