#!/usr/bin/env python3
"""LoRA goldens and interop checks for tune's package lora, from Hugging Face PEFT.

Run on the GPU machine (torch 2.11, transformers 5.17, peft 0.21, safetensors 0.8); everything runs on the CPU
in FP32 unless --device says otherwise (TF32 is switched off on CUDA):

    python3 tools/reference/peft_goldens.py testdata/lora        (all: write, then both checks, recorded)
    python3 tools/reference/peft_goldens.py write testdata/lora
    python3 tools/reference/peft_goldens.py check-tune [DIR ...]
    python3 tools/reference/peft_goldens.py check-merged [MERGED_DIR] [--adapter DIR]

The first form (what scripts/reference-goldens.sh runs) writes the goldens, runs check-tune on
OUT_DIR/saved_by_tune/* and check-merged on OUT_DIR/merged_by_tune, prints their PASS/FAIL lines and records
them, with the sha256 of the files checked, in OUT_DIR/peft_checks.json; lora's TestPEFTChecks fails on a FAIL
there and asks for a rerun when the checked files have changed since. Its exit status is 0 once the goldens are
written, whatever the checks say; the separate check modes exit 1 on a FAIL.

The base model is built on both sides from detweights.py (splitmix64 of the parameter name; Go's
transformer/detweights computes the same bits): BertForSequenceClassification with hidden 64, 2 layers, 4 heads,
intermediate 128, vocab 128, 64 positions, 2 labels, dropout 0, attn_implementation "eager", seed SEED (the same
model as bert_goldens.py's tiny_v128 shape with 2 labels). The adapter's values (lora_A, lora_B, the classifier
copy in modules_to_save, trained biases) are detweights values from ADAPTER_SEED keyed by their saved key name
("base_model.model.bert.encoder.layer.0.attention.self.query.lora_B.weight"), so B is non-zero.

write OUT_DIR (default mode of the Go test lora/golden_test.go TestPEFTGoldens)
    Builds LoraConfig(task_type=SEQ_CLS, r=4, lora_alpha=8, lora_dropout=0, target_modules=["query","value"]) with
    get_peft_model, sets the adapter values, and writes
      OUT_DIR/peft_adapter/            adapter_config.json and adapter_model.safetensors from PEFT's save_pretrained
                                       (its README.md is removed)
      OUT_DIR/peft_goldens.safetensors inputs/{input_ids,token_type_ids,attention_mask,labels} (I64),
                                       fp32/logits (eval, no grad), fp32/loss and fp32/grad/<saved key> (the
                                       gradient of every lora_A, lora_B and of the classifier, from loss.backward()
                                       in train mode), merged/logits (after merge_and_unload); "__metadata__"
                                       holds the versions, seeds and config.

check-tune [DIR ...] (default: testdata/lora/saved_by_tune/basic and .../extended)
    Loads each adapter that tune saved (go test ./lora -run TestSavedByTuneAdapters -update-tune-adapters writes
    them) onto the detweights base with PeftModel.from_pretrained, checks that every tensor of the file landed in
    the PEFT model bit for bit and that loading warned about no missing/unexpected key, and compares PEFT's logits
    on DIR/expected.safetensors's inputs with the logits tune recorded there. Prints one PASS/FAIL line per
    adapter with the max abs and relative difference (PASS: relative <= 1e-5); exit status 1 on any FAIL.

check-merged [MERGED_DIR] [--adapter DIR] (defaults: testdata/lora/merged_by_tune, testdata/lora/saved_by_tune/basic)
    Loads MERGED_DIR (what `tune merge` wrote; cmd/tune's TestMergeFixture -update-merged keeps the checked-in
    one) with BertForSequenceClassification.from_pretrained(output_loading_info=True): FAIL on any missing,
    unexpected or mis-shaped key; then compares its logits with PEFT's (base + adapter) on the adapter's
    expected.safetensors inputs. Prints PASS/FAIL with the max difference.
"""

import argparse
import contextlib
import hashlib
import json
import os
import sys
import warnings

import numpy as np
import peft
import safetensors
import torch
import transformers
from peft import LoraConfig, PeftModel, TaskType, get_peft_model
from safetensors.numpy import load_file, save_file
from transformers import BertForSequenceClassification

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import detweights  # noqa: E402
from bert_goldens import make_config, make_inputs  # noqa: E402

SEED = 20261129  # detweights seed of the base model (Go: lora/golden_test.go goldenSeed)
ADAPTER_SEED = 6  # detweights seed of the adapter values (Go: adapterSeed)
PREFIX = "base_model.model."
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOL = 1e-5


def base_config():
    """bert_goldens.py's tiny shape with a 128-token vocabulary and 2 labels, dropout off."""
    return make_config(vocab=128, labels=2)


def build_base(device):
    """The detweights base model in FP32, eval mode, eager attention."""
    config = base_config()
    config._attn_implementation = "eager"
    model = BertForSequenceClassification(config)
    if getattr(model.config, "_attn_implementation", None) != "eager" and hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation("eager")
    detweights.load_into(model, SEED)
    return model.float().to(device).eval()


def saved_key(name):
    """PEFT's in-memory parameter name -> its key in adapter_model.safetensors (adapter name removed)."""
    name = name.replace(".modules_to_save.default.", ".")
    for ab in (".lora_A.", ".lora_B."):
        name = name.replace(ab + "default.", ab)
    return name


def memory_candidates(key):
    """The in-memory names a saved key may take in a PeftModel's state_dict."""
    out = [key]
    for ab in (".lora_A.", ".lora_B."):
        if ab in key:
            out.append(key.replace(ab, ab + "default.", 1))
    head, _, leaf = key.rpartition(".")
    out.append(f"{head}.modules_to_save.default.{leaf}")
    return out


def feed(inputs, device):
    return {k: torch.from_numpy(np.ascontiguousarray(inputs[k])).to(device)
            for k in ("input_ids", "token_type_ids", "attention_mask")}


def logits_of(model, inputs, device):
    with torch.no_grad():
        return model(**feed(inputs, device)).logits.detach().float().cpu().numpy()


def diff(a, b):
    """(max|a-b|, max|a-b| / max|b|)."""
    d = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
    ref = float(np.max(np.abs(b)))
    return d, (d / ref if ref > 0 else d)


def versions():
    return {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__,
            "safetensors": safetensors.__version__}


def write(out_dir, device):
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    config = LoraConfig(task_type=TaskType.SEQ_CLS, r=4, lora_alpha=8, lora_dropout=0.0,
                        target_modules=["query", "value"])
    model = get_peft_model(build_base(device), config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.requires_grad:  # lora_A, lora_B and the classifier's trained copy
                key = saved_key(name)
                p.copy_(torch.from_numpy(detweights.values(ADAPTER_SEED, key, tuple(p.shape))).to(device))
    model.print_trainable_parameters()

    adapter_dir = os.path.join(out_dir, "peft_adapter")
    model.save_pretrained(adapter_dir)
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(adapter_dir, "README.md"))
    keys = sorted(load_file(os.path.join(adapter_dir, "adapter_model.safetensors")))
    print(f"wrote {adapter_dir}: {len(keys)} tensors")
    for k in keys:
        print("   ", k)

    rng = np.random.default_rng(2026)
    inputs = make_inputs(128, (12, 7, 9), 12, rng)
    labels = np.array([1, 0, 1], np.int64)
    out = {f"inputs/{k}": v for k, v in inputs.items()}
    out["inputs/labels"] = labels
    model.eval()
    out["fp32/logits"] = logits_of(model, inputs, device)

    model.train()
    model.zero_grad(set_to_none=True)
    result = model(**feed(inputs, device), labels=torch.from_numpy(labels).to(device))
    result.loss.backward()
    out["fp32/loss"] = np.array([float(result.loss.detach())], np.float32)
    for name, p in model.named_parameters():
        if p.requires_grad:
            out[f"fp32/grad/{saved_key(name)}"] = p.grad.detach().float().cpu().numpy()
    print(f"  loss {out['fp32/loss'][0]:.6f}, {sum(k.startswith('fp32/grad/') for k in out)} gradients")

    model.eval()
    merged = model.merge_and_unload()
    out["merged/logits"] = logits_of(merged, inputs, device)
    d, rel = diff(out["merged/logits"], out["fp32/logits"])
    print(f"  PEFT merged vs unmerged logits: max abs {d:.3g}, relative {rel:.3g}")

    meta = {"format": "pt", "seed": str(SEED), "adapter_seed": str(ADAPTER_SEED), "device": str(device),
            "lora_config": json.dumps(config.to_dict(), default=str, sort_keys=True),
            "base_config": base_config().to_json_string(use_diff=True), "script": "tools/reference/peft_goldens.py",
            **versions()}
    path = os.path.join(out_dir, "peft_goldens.safetensors")
    save_file({k: np.ascontiguousarray(v) for k, v in out.items()}, path, metadata=meta)
    print(f"wrote {path} ({os.path.getsize(path)} bytes, {len(out)} tensors)")


def load_peft(adapter_dir, device):
    """PeftModel.from_pretrained on the detweights base, with the warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = PeftModel.from_pretrained(build_base(device), adapter_dir)
    model = model.to(device).eval()
    return model, key_warnings(caught)


def key_warnings(caught):
    """The warnings that report missing, unexpected or mis-shaped keys."""
    out = []
    for w in caught:
        msg = str(w.message).lower()
        if "key" in msg and any(s in msg for s in ("missing", "unexpected", "mismatch")):
            out.append(str(w.message))
    return out


def check_loaded(model, adapter_dir):
    """Every tensor of the adapter file must be in the PEFT model bit for bit; returns the problems."""
    state = model.state_dict()
    problems = []
    for key, value in load_file(os.path.join(adapter_dir, "adapter_model.safetensors")).items():
        name = next((c for c in memory_candidates(key) if c in state), None)
        if name is None:
            problems.append(f"{key}: no such parameter in the PEFT model")
        elif not np.array_equal(state[name].detach().float().cpu().numpy(), value.astype(np.float32)):
            problems.append(f"{key}: loaded as {name} with other values")
    return problems


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def check_tune(dirs, device):
    """PEFT loads each adapter tune saved; returns one result dict per adapter."""
    results = []
    for d in dirs:
        model, bad = load_peft(d, device)
        problems = check_loaded(model, d) + [f"warning: {w}" for w in bad]
        expected = load_file(os.path.join(d, "expected.safetensors"))
        inputs = {k.removeprefix("inputs/"): v for k, v in expected.items() if k.startswith("inputs/")}
        got = logits_of(model, inputs, device)
        absd, rel = diff(got, expected["fp32/logits"])
        cfg = model.peft_config["default"]
        scalings = sorted({float(m.scaling["default"]) for m in model.modules() if hasattr(m, "scaling")
                           and isinstance(m.scaling, dict) and "default" in m.scaling})
        passed = rel <= TOL and not problems
        name = os.path.basename(os.path.normpath(d))
        print(f"{'PASS' if passed else 'FAIL'} check-tune {name}: logits max abs diff {absd:.3g}, relative {rel:.3g} "
              f"(tolerance {TOL:g}); r {cfg.r}, lora_alpha {cfg.lora_alpha}, use_rslora {cfg.use_rslora}, "
              f"bias {cfg.bias}, scaling {scalings}, {len(load_file(os.path.join(d, 'adapter_model.safetensors')))} "
              f"tensors loaded")
        for p in problems:
            print("    ", p)
        results.append({"check": "check-tune", "adapter": name, "pass": passed, "max_abs_diff": absd,
                        "relative_diff": rel, "tolerance": TOL, "problems": problems, "scalings": scalings,
                        "sha256": {f: sha256(os.path.join(d, f)) for f in FILES}})
    return results


def check_merged(merged_dir, adapter_dir, device):
    """transformers loads the checkpoint `tune merge` wrote; returns a result dict."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        merged, info = BertForSequenceClassification.from_pretrained(
            merged_dir, output_loading_info=True, attn_implementation="eager")
    merged = merged.float().to(device).eval()
    problems = [f"{k}: {v}" for k, v in info.items() if v]
    problems += [f"warning: {w}" for w in key_warnings(caught)]
    reference, bad = load_peft(adapter_dir, device)
    problems += [f"loading the adapter: {w}" for w in bad]
    expected = load_file(os.path.join(adapter_dir, "expected.safetensors"))
    inputs = {k.removeprefix("inputs/"): v for k, v in expected.items() if k.startswith("inputs/")}
    got, want = logits_of(merged, inputs, device), logits_of(reference, inputs, device)
    absd, rel = diff(got, want)
    passed = rel <= TOL and not problems
    print(f"{'PASS' if passed else 'FAIL'} check-merged {os.path.basename(os.path.normpath(merged_dir))}: "
          f"from_pretrained missing/unexpected/mis-shaped keys: {'none' if not problems else problems}; logits vs "
          f"PEFT (base + {os.path.basename(os.path.normpath(adapter_dir))}) max abs diff {absd:.3g}, relative "
          f"{rel:.3g} (tolerance {TOL:g})")
    return {"check": "check-merged", "merged": os.path.basename(os.path.normpath(merged_dir)), "pass": passed,
            "max_abs_diff": absd, "relative_diff": rel, "tolerance": TOL, "problems": problems,
            "sha256": {f: sha256(os.path.join(merged_dir, f)) for f in ("config.json", "model.safetensors")}}


def guarded(check, kind, name):
    """Runs check(); an exception becomes a FAIL result carrying it, so the goldens are still recorded."""
    try:
        return check()
    except Exception as e:  # noqa: BLE001 - any failure of PEFT or transformers to load is a FAIL to record
        print(f"FAIL {kind} {name}: {type(e).__name__}: {e}")
        key = "merged" if kind == "check-merged" else "adapter"
        return [{"check": kind, key: name, "pass": False, "max_abs_diff": None, "relative_diff": None,
                 "problems": [f"{type(e).__name__}: {e}"], "sha256": {}}]


FILES = ("adapter_config.json", "adapter_model.safetensors", "expected.safetensors")
MODES = ("write", "check-tune", "check-merged")


def main():
    argv = sys.argv[1:]
    if not any(a in MODES for a in argv):  # `peft_goldens.py OUT_DIR`: everything (scripts/reference-goldens.sh)
        argv = ["all"] + argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda; TF32 is off either way")
    sub = ap.add_subparsers(dest="mode", required=True)
    a = sub.add_parser("all", help="write, check-tune and check-merged; the checks are recorded in "
                                   "OUT_DIR/peft_checks.json")
    a.add_argument("out_dir")
    a.add_argument("--tiny-bert-random", help="accepted for scripts/reference-goldens.sh; unused (the base model "
                                              "is built from detweights)")
    w = sub.add_parser("write", help="write the PEFT adapter and goldens into OUT_DIR")
    w.add_argument("out_dir")
    t = sub.add_parser("check-tune", help="load adapters tune saved into PEFT and compare logits")
    t.add_argument("dirs", nargs="*", default=[os.path.join(REPO, "testdata/lora/saved_by_tune", c)
                                               for c in ("basic", "extended")])
    m = sub.add_parser("check-merged", help="load a checkpoint `tune merge` wrote with transformers")
    m.add_argument("merged_dir", nargs="?", default=os.path.join(REPO, "testdata/lora/merged_by_tune"))
    m.add_argument("--adapter", default=os.path.join(REPO, "testdata/lora/saved_by_tune/basic"))
    args = ap.parse_args(argv)

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device(args.device)
    print(f"peft {peft.__version__}, transformers {transformers.__version__}, torch {torch.__version__}, "
          f"device {device}")
    if args.mode == "write":
        write(args.out_dir, device)
        return 0
    if args.mode == "check-tune":
        return 0 if all(r["pass"] for r in check_tune(args.dirs, device)) else 1
    if args.mode == "check-merged":
        return 0 if check_merged(args.merged_dir, args.adapter, device)["pass"] else 1
    write(args.out_dir, device)
    tune_dir = os.path.join(args.out_dir, "saved_by_tune")
    results = []
    for c in sorted(os.listdir(tune_dir)):
        results += guarded(lambda: check_tune([os.path.join(tune_dir, c)], device), "check-tune", c)
    results += guarded(lambda: [check_merged(os.path.join(args.out_dir, "merged_by_tune"), os.path.join(tune_dir, "basic"),
                                             device)], "check-merged", "merged_by_tune")
    path = os.path.join(args.out_dir, "peft_checks.json")
    with open(path, "w") as f:
        json.dump({"versions": versions(), "device": str(device), "results": results}, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"wrote {path}: {sum(r['pass'] for r in results)} of {len(results)} checks pass")
    return 0  # the goldens are written; the checks' verdicts are in peft_checks.json (lora TestPEFTChecks reads it)


if __name__ == "__main__":
    sys.exit(main())
