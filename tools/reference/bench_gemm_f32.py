#!/usr/bin/env python3
"""Times PyTorch's true-FP32 GEMMs of BERT-base's training step at batch 64 x seq 512 (TF32 off), the same
shapes as BenchmarkGemmF32 in cuda/bench_gemm_f32_test.go, and names the kernel each one runs.

  python3 tools/reference/bench_gemm_f32.py [--iters 10] [--json out.json]

Per shape: the op as nn.Linear's forward and autograd issue it (addmm for X.W^T + b, mm for dY.W and dY^T.X,
bmm over the 64 batch members for the attention products on (B, T, H*D) views), the median time of --iters
calls between CUDA events after 3 warm-up calls, TFLOP/s (2.M.N.K.batch), and the GEMM kernels
torch.profiler records for one call.
"""
import argparse
import json
import statistics

import torch
from torch.profiler import ProfilerActivity, profile


def shapes(dev):
    T, H, D, B, M = 512, 768, 64, 64, 32768
    g = torch.Generator(device=dev).manual_seed(0)

    def r(*s):
        return torch.randn(*s, device=dev, generator=g)

    out = []
    for fin, fout in ((768, 2304), (768, 768), (768, 3072), (3072, 768)):  # tune's QKV stack, attention output, FFN
        x, w, b, dy = r(M, fin), r(fout, fin), r(fout), r(M, fout)
        out.append((f"fwd_{M}x{fout}x{fin}", 2 * M * fout * fin, lambda x=x, w=w, b=b: torch.addmm(b, x, w.t())))
        out.append((f"dX_{M}x{fin}x{fout}", 2 * M * fout * fin, lambda dy=dy, w=w: torch.mm(dy, w)))
        out.append((f"dW_{fout}x{fin}x{M}", 2 * M * fout * fin, lambda dy=dy, x=x: torch.mm(dy.t(), x)))
    q, k, v = (r(B, T, H)[:, :, :D] for _ in range(3))  # one head of (B, T, H*D): rows H floats apart
    p = r(B, T, T)
    fl = 2 * B * T * T * D
    out.append(("attn_S=QKt_64x(512x512x64)", fl, lambda: torch.bmm(q, k.transpose(1, 2)) * 0.125))
    out.append(("attn_O=PV_64x(512x64x512)", fl, lambda: torch.bmm(p, v)))
    out.append(("attn_dV=PtdO_64x(512x64x512)", fl, lambda: torch.bmm(p.transpose(1, 2), v)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    print(f"torch {torch.__version__}, cuBLAS {torch.backends.cuda.preferred_blas_library()}, "
          f"{torch.cuda.get_device_name()}", flush=True)
    res = []
    for name, flops, fn in shapes(dev):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(a.iters):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e))
        ms = statistics.median(times)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        kernels = [f"{ev.key} {ev.device_time_total:.0f}us" for ev in prof.key_averages() if ev.device_time_total > 0]
        res.append({"shape": name, "us": ms * 1e3, "tflops": flops / (ms * 1e-3) / 1e12, "kernels": kernels})
        print(f"{name:32s} {ms * 1e3:9.1f} us {flops / (ms * 1e-3) / 1e12:6.2f} TFLOP/s  {' | '.join(kernels)}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
