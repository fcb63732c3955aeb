#!/usr/bin/env python3
"""PyTorch reference of `tune bench`: the same BERT training step, timed the same way, on the same GPU.

Run on the GPU machine (torch 2.11, transformers 5.17, peft 0.21), usually through scripts/bench-gpu.sh:

    python3 tools/reference/bench_pytorch.py OUT_DIR [--configs 32x128,64x512] [--modes fp32,fp16,bf16]
        [--tuning full,lora] [--impl eager,compile] [--compile-modes bf16] [--compile-tuning full,lora]
        [--compile-configs 32x128,64x512] [--attention sdpa|eager] [--steps 30] [--warmup 5] [--lora-r 8]
        [--sync] [--profile MODE:BxT[:lora],...] [--name pytorch]

For every configuration (batch x seq, precision, full or LoRA) it does what `tune bench` does:

  model      transformers.BertForSequenceClassification(BertConfig()) — bert-base's shape, 2 labels, dropout 0.1,
             random init (torch.manual_seed(42)), attn_implementation sdpa (or eager), in training mode.
  LoRA       peft.get_peft_model with LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0,
             target_modules=["query", "value"], task_type="SEQ_CLS"): adapters and the classifier train.
  data       one synthetic batch: token ids uniform in [1, 30522), no padding (attention_mask all 1), token
             type 0, labels uniform in {0, 1}.
  step       with torch.autocast("cuda", dtype) (FP16/BF16; FP32 without autocast): forward with labels (mean
             cross-entropy); GradScaler(enabled for FP16 only).scale(loss).backward(); scaler.unscale_;
             torch.nn.utils.clip_grad_norm_(trainable, 1.0); scaler.step(AdamW); scaler.update();
             zero_grad(set_to_none=True). AdamW is torch.optim.AdamW(lr=2e-5, betas (0.9, 0.999), eps 1e-8,
             weight_decay 0, fused=True), what transformers' Trainer uses by default (adamw_torch_fused).
  numerics   TF32 off (torch.backends.cuda.matmul.allow_tf32 = False, cudnn too, matmul precision "highest").
  timing     --warmup untimed steps, then --steps steps each between two torch.cuda.Event records; the host is
             not synchronized between steps unless --sync (tune's host waits at the end of each step, since it
             reads the loss). Median, p10 and p90 with numpy's linear interpolation.
  memory     torch.cuda.max_memory_allocated() over the warm-up and timed steps (reset_peak_memory_stats() once
             the model is on the GPU), minus torch.cuda.memory_allocated() before the model was built (models of
             earlier configurations are deleted and the cache emptied first). The model is built on the host
             and moved, so its construction leaves no peak; tune bench likewise resets its peak after building.
  FLOPs      flops_per_step below: GEMMs only, the formula of tune's internal/bench package (6 per token per
             matmul weight + 12*L*T^2*C per sequence for full fine-tuning; no weight-gradient GEMM for frozen
             weights with LoRA), so TFLOP/s compare like for like.
  impl       "pytorch-eager", and "pytorch-compile": torch.compile(model, dynamic=False) after PEFT wrapping (as
             the Trainer's torch_compile does), only for --compile-modes x --compile-tuning x --compile-configs
             (compilation takes tens of seconds per configuration).

--profile MODE:BxT[:lora],... (e.g. bf16:64x512,bf16:32x128:lora) additionally runs 3 eager steps of each such
configuration under torch.profiler and writes its per-kernel CUDA time table, for comparison with
`tune bench --breakdown`.

Output (small files; deterministic configuration, timings vary by nature):
    OUT_DIR/NAME.json          {"tool", "version", "date", "host", "results": [...], "errors": [...]} with one
                               record per configuration in the schema of tune's internal/bench.Result, read by
                               `tune bench report`
    OUT_DIR/NAME-profile-MODE-BxT[-lora].txt   torch.profiler's table per --profile entry; the kernels'
                               self CUDA time per step are also in NAME.json under "profiles"

Run `python3 tools/reference/bench_pytorch.py --help` for the options. flops_per_step and percentile need no torch
(the Go test internal/bench/pytorch_test.go checks them against tune's formula).
"""

import argparse
import datetime
import gc
import json
import math
import os
import platform
import sys
import time

VOCAB = 30522
SEED = 42
LR = 2e-5
MAX_GRAD_NORM = 1.0
BERT_BASE = dict(layers=12, hidden=768, heads=12, intermediate=3072, labels=2)
TARGET_SHAPES = {"query": ("C", "C"), "key": ("C", "C"), "value": ("C", "C")}


def flops_per_step(layers, hidden, intermediate, labels, batch, seq, lora_r=0, lora_targets=("query", "value")):
    """GEMM FLOPs of one training step, exactly as tune's internal/bench.CountFLOPs counts them.

    Per projection with `rows` input rows (B*T in the encoder, B for the pooler and the classifier):
    forward 2*rows*in*out, input gradient the same, weight gradient the same only if the weight trains; a LoRA
    adapter of rank r adds 2*rows*r*(in+out) in each of the three. Attention adds 4*B*L*T^2*C forward and twice
    that backward. Full fine-tuning trains every weight; LoRA (lora_r > 0) trains only the adapters (on
    lora_targets, each C->C) and the classifier. Over frozen embeddings (LoRA) the first layer's query, key and
    value have no input gradient (autograd does not form it; nor does tune): neither their dense product nor
    the adapter's dX += dH*A (2*rows*r*in) is counted there.
    """
    B, T, L, C, I, K = batch, seq, layers, hidden, intermediate, labels
    n = B * T
    projections = []  # (rows, in, out, trains_weight, lora_rank, input_grad)
    for layer in range(L):
        for name in ("query", "key", "value", "attention.output.dense"):
            r = lora_r if (lora_r and name in lora_targets) else 0
            input_grad = not (lora_r and layer == 0 and name != "attention.output.dense")
            projections.append((n, C, C, not lora_r, r, input_grad))
        projections.append((n, C, I, not lora_r, 0, True))
        projections.append((n, I, C, not lora_r, 0, True))
    projections.append((B, C, C, not lora_r, 0, True))  # pooler: frozen under LoRA
    projections.append((B, C, K, True, 0, True))  # classifier: trained (modules_to_save under SEQ_CLS)
    total = 0.0
    for rows, fin, fout, trains, r, input_grad in projections:
        dense = 2.0 * rows * fin * fout
        adapter = 2.0 * rows * r * (fin + fout)
        total += 2 * (dense + adapter) + (dense if trains else 0.0) + adapter
        if not input_grad:
            total -= dense + 2.0 * rows * r * fin
    total += 12.0 * B * L * T * T * C
    return total


def percentile(xs, q):
    """numpy.percentile's default (linear interpolation between the nearest ranks), as tune's bench.Percentile."""
    if not xs or not 0 <= q <= 100:
        return float("nan")
    s = sorted(xs)
    h = (len(s) - 1) * q / 100.0
    lo = int(math.floor(h))
    if lo >= len(s) - 1:
        return s[-1]
    return s[lo] + (h - lo) * (s[lo + 1] - s[lo])


def parse_shape(s):
    b, t = s.lower().split("x")
    return int(b), int(t)


def cleanup(torch):
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def build(torch, mode, tuning, attention, lora_r, compiled):
    """Returns (model, trainable params, optimizer, scaler, autocast dtype or None, counts)."""
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(SEED)
    config = BertConfig(num_labels=2)
    config._attn_implementation = attention  # as tools/reference/bert_goldens.py selects it
    model = BertForSequenceClassification(config)
    if getattr(model.config, "_attn_implementation", attention) != attention and hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(attention)
    got = getattr(model.config, "_attn_implementation", None)
    if got != attention:
        raise RuntimeError("could not select attn_implementation=%r (the model uses %r)" % (attention, got))
    if tuning == "lora":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=lora_r, lora_alpha=2 * lora_r, lora_dropout=0.0,
                                                 target_modules=["query", "value"], task_type="SEQ_CLS"))
    model = model.cuda().train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    counts = (sum(p.numel() for p in model.parameters()), sum(p.numel() for p in trainable))
    opt = torch.optim.AdamW(trainable, lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, fused=True)
    scaler = torch.amp.GradScaler("cuda", enabled=(mode == "fp16"))
    dtype = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}[mode]
    if compiled:
        torch._dynamo.reset()
        model = torch.compile(model, dynamic=False)
    return model, trainable, opt, scaler, dtype, counts


def make_batch(torch, b, t):
    g = torch.Generator(device="cpu").manual_seed(SEED)
    ids = torch.randint(1, VOCAB, (b, t), generator=g).cuda()
    labels = torch.randint(0, 2, (b,), generator=g).cuda()
    return dict(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids), labels=labels)


def make_step(torch, model, trainable, opt, scaler, dtype, batch):
    import contextlib

    def step():
        with torch.autocast("cuda", dtype=dtype) if dtype is not None else contextlib.nullcontext():
            loss = model(**batch).loss
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(trainable, MAX_GRAD_NORM)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        return loss

    return step


def run_one(torch, args, b, t, mode, tuning, impl):
    cleanup(torch)
    base = torch.cuda.memory_allocated()
    model, trainable, opt, scaler, dtype, (n_all, n_train) = build(
        torch, mode, tuning, args.attention, args.lora_r, impl == "pytorch-compile")
    batch = make_batch(torch, b, t)
    torch.cuda.reset_peak_memory_stats()  # the peak of the steps, as tune bench measures it
    step = make_step(torch, model, trainable, opt, scaler, dtype, batch)
    t0 = time.perf_counter()
    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    warmup_s = time.perf_counter() - t0
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(args.steps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(args.steps)]
    losses = []
    scale0 = scaler.get_scale() if scaler.is_enabled() else 1.0  # after the synchronize: no extra wait
    for i in range(args.steps):
        starts[i].record()
        loss = step()
        ends[i].record()
        if args.sync:
            torch.cuda.synchronize()
        losses.append(loss.detach())
    torch.cuda.synchronize()
    # Reading the scale every step would synchronize the host; within growth_interval (2000) steps the scale
    # only halves, once per skipped step, so the skips are log2 of its fall.
    skipped = round(math.log2(scale0 / scaler.get_scale())) if scaler.is_enabled() else 0
    ms = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    peak = torch.cuda.max_memory_allocated() - base
    med = percentile(ms, 50)
    flops = flops_per_step(BERT_BASE["layers"], BERT_BASE["hidden"], BERT_BASE["intermediate"], BERT_BASE["labels"],
                           b, t, args.lora_r if tuning == "lora" else 0)
    res = dict(impl=impl, device=torch.cuda.get_device_name(), backend="cuda:%d" % torch.cuda.current_device(),
               attention=args.attention, model="bert-base", batch=b, seq=t, mode=mode, lora=tuning == "lora",
               params=n_all, trainable_params=n_train, warmup=args.warmup, steps=args.steps, step_ms=ms,
               median_ms=med, p10_ms=percentile(ms, 10), p90_ms=percentile(ms, 90),
               tokens_per_s=b * t / (med / 1e3), flops_per_step=flops, tflops=flops / (med / 1e3) / 1e12,
               peak_bytes=int(peak),
               memory="torch.cuda.max_memory_allocated during the steps minus memory_allocated before the model",
               timing="CUDA events" + (", host synchronized after each step" if args.sync else ""),
               skipped_steps=skipped, loss_first=float(losses[0]), loss_last=float(losses[-1]),
               warmup_s=warmup_s)
    if tuning == "lora":
        res.update(lora_r=args.lora_r, lora_targets=["query", "value"])
    del model, trainable, opt, scaler, batch, step, losses
    return res


def profile(torch, args, spec, out_dir):
    parts = spec.split(":")
    mode, (b, t) = parts[0], parse_shape(parts[1])
    tuning = "lora" if len(parts) > 2 and parts[2] == "lora" else "full"
    cleanup(torch)
    model, trainable, opt, scaler, dtype, _ = build(torch, mode, tuning, args.attention, args.lora_r, False)
    step = make_step(torch, model, trainable, opt, scaler, dtype, make_batch(torch, b, t))
    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile as tprofile

    steps = 3
    with tprofile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    avgs = prof.key_averages()

    def dev(e, attr):
        for name in ("self_device_time_total", "self_cuda_time_total") if attr == "self" else \
                ("device_time_total", "cuda_time_total"):
            if hasattr(e, name):
                return float(getattr(e, name))
        return 0.0

    kernels = [dict(name=e.key, calls=e.count / steps, self_us_per_step=dev(e, "self") / steps)
               for e in avgs if dev(e, "self") > 0]
    kernels.sort(key=lambda k: -k["self_us_per_step"])
    try:
        table = avgs.table(sort_by="self_device_time_total", row_limit=40)
    except Exception:  # older spelling
        table = avgs.table(sort_by="self_cuda_time_total", row_limit=40)
    path = os.path.join(out_dir, "%s-profile-%s.txt" % (args.name, spec.replace(":", "-")))
    with open(path, "w") as f:
        f.write("torch.profiler, %d eager steps of bert-base %dx%d %s %s (%s attention); times are sums over the steps\n\n"
                % (steps, b, t, mode, tuning, args.attention))
        f.write(table)
    print("wrote", path, flush=True)
    del model, trainable, opt, scaler, step
    return dict(config="bert-base %dx%d %s%s" % (b, t, mode, " LoRA r=%d" % args.lora_r if tuning == "lora" else ""),
                steps=steps, total_self_ms_per_step=sum(k["self_us_per_step"] for k in kernels) / 1e3,
                kernels=kernels[:60])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out_dir")
    p.add_argument("--configs", default="32x128,64x512", help="batch x seq list")
    p.add_argument("--modes", default="fp32,fp16,bf16")
    p.add_argument("--tuning", default="full,lora", help="full and/or lora")
    p.add_argument("--impl", default="eager,compile", help="eager and/or compile")
    p.add_argument("--compile-modes", default="bf16", help="precisions that also run under torch.compile")
    p.add_argument("--compile-tuning", default="full,lora", help="fine-tunings that also run under torch.compile")
    p.add_argument("--compile-configs", default=None, help="batch x seq list for torch.compile (default --configs)")
    p.add_argument("--attention", default="sdpa", choices=["sdpa", "eager"])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--lora-r", type=int, default=8)
    p.add_argument("--sync", action="store_true", help="synchronize the host after every timed step")
    p.add_argument("--profile", default=None,
                   help="comma list of MODE:BxT[:lora] (e.g. bf16:64x512,bf16:32x128:lora): torch.profiler tables")
    p.add_argument("--name", default="pytorch", help="output file stem")
    args = p.parse_args()
    if args.steps < 1 or args.warmup < 1:
        p.error("--steps and --warmup must be at least 1")

    import torch
    import transformers

    if not torch.cuda.is_available():
        sys.exit("bench_pytorch.py: no CUDA device; this reference runs on the GPU machine")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    os.makedirs(args.out_dir, exist_ok=True)
    out_path = os.path.join(args.out_dir, args.name + ".json")
    if os.path.exists(out_path):
        sys.exit("bench_pytorch.py: %s already exists; remove it or choose another --name" % out_path)

    versions = dict(python=platform.python_version(), torch=torch.__version__, transformers=transformers.__version__,
                    cuda=str(torch.version.cuda), cudnn=str(torch.backends.cudnn.version()))
    try:
        import peft
        versions["peft"] = peft.__version__
    except ImportError:
        pass
    configs = [parse_shape(s) for s in args.configs.split(",")]
    compile_configs = [parse_shape(s) for s in (args.compile_configs or args.configs).split(",")]
    modes = args.modes.split(",")
    tunings = args.tuning.split(",")
    plan = []
    for b, t in configs:
        for tuning in tunings:
            for mode in modes:
                if "eager" in args.impl.split(","):
                    plan.append((b, t, mode, tuning, "pytorch-eager"))
    if "compile" in args.impl.split(","):
        for b, t in compile_configs:
            for tuning in args.compile_tuning.split(","):
                for mode in args.compile_modes.split(","):
                    if tuning in tunings:
                        plan.append((b, t, mode, tuning, "pytorch-compile"))
    doc = dict(tool="bench_pytorch.py", version=versions,
               date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
               host=platform.node(), results=[], errors=[])
    for b, t, mode, tuning, impl in plan:
        label = "%s bert-base %dx%d %s %s" % (impl, b, t, mode, tuning)
        t0 = time.perf_counter()
        try:
            res = run_one(torch, args, b, t, mode, tuning, impl)
        except Exception as e:  # an OOM or a compile failure must not lose the other configurations
            doc["errors"].append(dict(config=label, error="%s: %s" % (type(e).__name__, e)))
            print("%-48s FAILED %s: %s" % (label, type(e).__name__, str(e)[:200]), flush=True)
            continue
        doc["results"].append(res)
        print("%-48s %8.2f ms/step (p10 %.2f, p90 %.2f) %9.0f tokens/s %6.1f TFLOP/s peak %6.2f GiB  [%.0fs]"
              % (label, res["median_ms"], res["p10_ms"], res["p90_ms"], res["tokens_per_s"], res["tflops"],
                 res["peak_bytes"] / 2**30, time.perf_counter() - t0), flush=True)
    for spec in (args.profile.split(",") if args.profile else []):
        try:
            doc.setdefault("profiles", []).append(profile(torch, args, spec, args.out_dir))
        except Exception as e:
            doc["errors"].append(dict(config="profile " + spec, error="%s: %s" % (type(e).__name__, e)))
            print("profile %s FAILED %s: %s" % (spec, type(e).__name__, str(e)[:200]), flush=True)
    tmp = out_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, out_path)
    print("wrote", out_path, "(%d results, %d errors)" % (len(doc["results"]), len(doc["errors"])), flush=True)


if __name__ == "__main__":
    main()
