#!/usr/bin/env python3
"""transformers' greedy generate timed on the GPU, the reference for tune's generation benchmarks.

    python3 tools/reference/generate_bench.py --tiny recipes/data/tiny-chat --out generate_bench.jsonl

Two workloads, the same as tune's benchmarks:

  tiny-chat      generate.BenchmarkGenerate: the tiny-chat Llama (from --tiny), prompt ids 3 + (7*i % 700) for
                 i < 32, 64 new tokens, FP32 and BF16 autocast;
  smollm2-135m   llama.BenchmarkGenerate: a LlamaForCausalLM of SmolLM2-135M's shape with random weights (its
                 published config sizes), prompt ids (i * 7919) % 49152 for i < 128, 128 new tokens, BF16
                 autocast.

Each with use_cache True and False, greedy (do_sample False), min_new_tokens = max_new_tokens and no EOS so
every run generates all tokens; one warm-up run, then --reps timed runs (torch.cuda.synchronize around
each). Output: one JSON line per case with tokens/s = new tokens / seconds (prefill included, as tune's).
"""

import argparse
import json
import time

import torch
import transformers


def timed(model, ids, new, cache, dtype, reps):
    kw = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False, use_cache=cache, eos_token_id=None,
              pad_token_id=0)
    ctx = torch.autocast("cuda", dtype=dtype) if dtype is not None else torch.autocast("cuda", enabled=False)
    with torch.no_grad(), ctx:
        out = model.generate(ids, **kw)  # warm-up
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            out = model.generate(ids, **kw)
        torch.cuda.synchronize()
        dt = (time.perf_counter() - t0) / reps
    n = out.shape[1] - ids.shape[1]
    return n / dt, out[0, ids.shape[1]:].tolist()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    meta = {"transformers": transformers.__version__, "torch": torch.__version__,
            "device": torch.cuda.get_device_name(0)}
    with open(a.out, "w") as f:  # one line per case as soon as it is measured

        def emit(row):
            row.update(meta)
            f.write(json.dumps(row) + "\n")
            f.flush()
            print(json.dumps(row))

        cfg = transformers.LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536,
                                       num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                                       rope_parameters={"rope_type": "default", "rope_theta": 100000.0},
                                       rms_norm_eps=1e-5, tie_word_embeddings=True, max_position_embeddings=8192)
        torch.manual_seed(1)
        smol = transformers.LlamaForCausalLM(cfg).cuda().eval()
        ids = torch.tensor([[(i * 7919) % 49152 for i in range(128)]], device="cuda")
        for cache in (True, False):
            tps, _ = timed(smol, ids, 128, cache, torch.bfloat16, a.reps)
            emit({"model": "smollm2-135m", "precision": "bf16", "use_cache": cache, "tokens_per_s": tps})
        del smol
        tiny = transformers.LlamaForCausalLM.from_pretrained(a.tiny, dtype=torch.float32).cuda().eval()
        ids = torch.tensor([[3 + (7 * i) % 700 for i in range(32)]], device="cuda")
        for name, dt in (("fp32", None), ("bf16", torch.bfloat16)):
            for cache in (True, False):
                tps, toks = timed(tiny, ids, 64, cache, dt, a.reps)
                emit({"model": "tiny-chat", "precision": name, "use_cache": cache, "tokens_per_s": tps,
                      "first_tokens": toks[:16]})


if __name__ == "__main__":
    main()
