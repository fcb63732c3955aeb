#!/usr/bin/env python3
"""Golden sequences of torch.amp.GradScaler for tune's amp.GradScaler (amp/golden_test.go).

Each scenario drives a real GradScaler on CUDA through a scripted pattern of optimizer steps whose scaled
gradients are clean, hold an inf, hold a NaN, or overflow only once scaled, and records after every
scaler.update(): the scale (get_scale()), _growth_tracker (state_dict()), whether the optimizer step ran,
and, for steps that ran, the unscaled gradient's FP32 bits. In the middle of a scenario the state dict is
saved through JSON and loaded into a fresh default GradScaler, which carries on (the checkpoint/resume path).

Usage (on the GPU machine, from the repository root):

    python3 tools/reference/gradscaler_golden.py testdata/amp

writes testdata/amp/gradscaler_golden.json. Deterministic: no randomness is involved. Float values that may be
inf/NaN are stored as FP32 bit patterns (uint32) because JSON has no inf/NaN.
"""

import argparse
import json
import math
import os
import struct
import sys

import torch

# Step kinds: c clean, i inf in one element, n NaN in one element, o finite gradient that overflows FP32 once
# multiplied by the scale.
SCENARIOS = [
    {
        "name": "interval3_pattern_with_reload",
        "what": "PyTorch defaults except growth_interval 3: growth, backoff on inf, NaN and scaled overflow, "
                "state dict round trip after step 20",
        "init_scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 3,
        "pattern": "cccciccnccccccoccciicccccccnccccccccoccc",
        "reload_after": 20,
        "grads": {"c": [0.5, -1.25, 3.0, 1e-3], "i": [0.5, math.inf, 3.0, 1e-3],
                  "n": [0.5, -1.25, math.nan, 1e-3], "o": [0.5, -1.25, 3e37, 1e-3]},
    },
    {
        "name": "cap_at_2pow127",
        "what": "growth_interval 1 from 2^124: the scale stops at 2^127 (growth to inf skipped, tracker reset), "
                "backs off on inf and climbs back; reload after step 5",
        "init_scale": 2.0 ** 124, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 1,
        "pattern": "ccccccicccccc",
        "reload_after": 5,
        "grads": {"c": [1e-30, -2e-31, 3e-32, 0.0], "i": [1e-30, -math.inf, 3e-32, 0.0]},
    },
    {
        "name": "non_power_of_two_factors",
        "what": "growth_factor 1.1, backoff_factor 0.3, growth_interval 2 from 1000: every update rounds "
                "float*double to FP32; reload after step 12",
        "init_scale": 1000.0, "growth_factor": 1.1, "backoff_factor": 0.3, "growth_interval": 2,
        "pattern": "ccccciccccncccccccoccccc",
        "reload_after": 12,
        "grads": {"c": [0.1, -0.7, 1.3, 2.9], "i": [0.1, -0.7, math.inf, 2.9],
                  "n": [math.nan, -0.7, 1.3, 2.9], "o": [0.1, -0.7, 1.3, 3e37]},
    },
]


def f32_bits(values):
    """FP32 bit patterns of a float32 tensor or a list of Python floats (rounded to FP32)."""
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().float().tolist()
    return [struct.unpack("<I", struct.pack("<f", v))[0] for v in values]


class CountingSGD(torch.optim.SGD):
    """SGD that counts the steps it actually took (GradScaler skips step() on inf/NaN)."""

    def __init__(self, params, lr):
        super().__init__(params, lr=lr)
        self.taken = 0

    def step(self, closure=None):
        self.taken += 1
        return super().step(closure)


def run(sc, device):
    kw = {k: sc[k] for k in ("init_scale", "growth_factor", "backoff_factor", "growth_interval")}
    scaler = torch.amp.GradScaler(device, **kw)
    p = torch.nn.Parameter(torch.zeros(4, device=device))
    opt = CountingSGD([p], lr=0.1)
    consts = {k: torch.tensor(v, dtype=torch.float32, device=device) for k, v in sc["grads"].items()}
    steps, reload_state = [], None
    for i, kind in enumerate(sc["pattern"], start=1):
        seed = scaler.get_scale()
        opt.zero_grad(set_to_none=True)
        loss = (p * consts[kind]).sum()
        scaler.scale(loss).backward()
        taken = opt.taken
        scaler.step(opt)
        ran = opt.taken > taken
        step = {"step": i, "kind": kind, "seed_scale": seed, "skipped": not ran}
        if ran:
            step["unscaled_grad_bits"] = f32_bits(p.grad)
        scaler.update()
        step["scale"] = scaler.get_scale()
        step["growth_tracker"] = int(scaler.state_dict()["_growth_tracker"])
        steps.append(step)
        if i == sc["reload_after"]:
            text = json.dumps(scaler.state_dict())
            reload_state = json.loads(text)
            scaler = torch.amp.GradScaler(device)  # defaults: everything comes from the state dict
            scaler.load_state_dict(json.loads(text))
    out = {k: sc[k] for k in ("name", "what", "init_scale", "growth_factor", "backoff_factor", "growth_interval",
                              "pattern", "reload_after")}
    out["grad_bits"] = {k: f32_bits(v) for k, v in sc["grads"].items()}
    out["reload_state"] = reload_state
    out["steps"] = steps
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir", nargs="?", default="testdata/amp", help="output directory (default testdata/amp)")
    ap.add_argument("--device", default="cuda", help="torch device (default cuda; the golden is made on CUDA)")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("gradscaler_golden.py: CUDA is not available; run it on the GPU machine (or pass --device cpu)")
    torch.manual_seed(0)
    doc = {
        "generator": "tools/reference/gradscaler_golden.py",
        "torch_version": torch.__version__,
        "device": args.device,
        "scenarios": [run(sc, args.device) for sc in SCENARIOS],
    }
    os.makedirs(args.outdir, exist_ok=True)
    path = os.path.join(args.outdir, "gradscaler_golden.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, allow_nan=False)
        f.write("\n")
    os.replace(tmp, path)
    for sc in doc["scenarios"]:
        last = sc["steps"][-1]
        skipped = sum(s["skipped"] for s in sc["steps"])
        print(f"{sc['name']}: {len(sc['steps'])} steps, {skipped} skipped, final scale {last['scale']!r} "
              f"tracker {last['growth_tracker']}")
    print(f"wrote {path} (torch {torch.__version__}, device {args.device})")


if __name__ == "__main__":
    main()
