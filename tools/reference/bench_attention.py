#!/usr/bin/env python3
"""PyTorch reference of cuda's BenchmarkAttention: scaled_dot_product_attention on the same shapes and GPU.

Run on the GPU machine (torch 2.11), in the same device call as the Go benchmark:

    python3 tools/reference/bench_attention.py [--iters 50] [--json OUT.json]

For (B, H, T, D) = (64, 12, 512, 64) without a mask, (8, 32, 2048, 128) causal and not, and (8, 32, 2048, 64)
causal, BF16, (B, H, T, D) contiguous tensors, it times torch.nn.functional.scaled_dot_product_attention under
torch.nn.attention.sdpa_kernel with each of the FLASH_ATTENTION and CUDNN_ATTENTION backends: the forward
alone (no grad) and the backward alone (torch.autograd.grad of the output with a fixed dO, the forward run
before the timed region). Each is run 5 times untimed, then --iters times between torch.cuda.Event records;
the median is reported. FLOPs are counted as FlashAttention counts them (and as the Go benchmark does):
forward 4*B*H*T^2*D, halved when causal; backward 2.5x the forward.

--dtypes fp32 (or bf16,fp32) times FP32 (the Go benchmark's BenchmarkAttentionF32) on (64, 12, 512, 64) without a
mask and (8, 32, 2048, 128) causal with TF32 off (torch.backends.cuda.matmul.allow_tf32 = False, as
tools/reference/bench_pytorch.py trains FP32): "default" is sdpa with no backend restriction (PyTorch picks the
memory-efficient kernel for FP32), "efficient" EFFICIENT_ATTENTION and "math" MATH (the materialised two-pass
product).
"""
import argparse
import contextlib
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [(64, 12, 512, 64, False), (8, 32, 2048, 128, True), (8, 32, 2048, 128, False), (8, 32, 2048, 64, True)]
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
FP32_SHAPES = [(64, 12, 512, 64, False), (8, 32, 2048, 128, True)]
FP32_BACKENDS = {"default": None, "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}


def timed(fn, iters):
    for _ in range(5):
        fn()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--json")
    ap.add_argument("--dtypes", default="bf16", help="comma-separated: bf16 (flash, cudnn), fp32 (default, efficient, math)")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name())
    rows = []
    jobs = []
    for dt in args.dtypes.split(","):
        if dt == "bf16":
            jobs += [(s, torch.bfloat16, "bf16", BACKENDS) for s in SHAPES]
        elif dt == "fp32":
            jobs += [(s, torch.float32, "fp32", FP32_BACKENDS) for s in FP32_SHAPES]
        else:
            raise SystemExit(f"--dtypes: unknown {dt!r} (use bf16, fp32)")
    for (B, H, T, D, causal), dtype, dname, backends in jobs:
        q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
        do = torch.randn(B, H, T, D, device="cuda", dtype=dtype)
        fwd_flops = 4 * B * H * T * T * D / (2 if causal else 1)
        for name, be in backends.items():
            try:
                with sdpa_kernel([be]) if be is not None else contextlib.nullcontext():
                    def fwd():
                        with torch.no_grad():
                            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    ms_f = timed(fwd, args.iters)
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)

                    def bwd():
                        torch.autograd.grad(out, (q, k, v), do, retain_graph=True)
                    ms_b = timed(bwd, args.iters)
            except RuntimeError as e:
                print(f"{name} B={B} H={H} T={T} D={D} causal={causal}: unavailable: {str(e).splitlines()[0]}")
                continue
            r = dict(backend=name, dtype=dname, B=B, H=H, T=T, D=D, causal=causal, fwd_ms=ms_f, bwd_ms=ms_b,
                     fwd_tflops=fwd_flops / ms_f / 1e9, bwd_tflops=2.5 * fwd_flops / ms_b / 1e9)
            rows.append(r)
            print(f"torch {name:5s} {dname} {B}x{H}x{T}x{D} causal={causal}: fwd {ms_f*1e3:9.1f} us {r['fwd_tflops']:6.1f} TFLOP/s"
                  f"   bwd {ms_b*1e3:9.1f} us {r['bwd_tflops']:6.1f} TFLOP/s")
        del q, k, v, do
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
