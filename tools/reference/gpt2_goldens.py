#!/usr/bin/env python3
"""Goldens for tune's GPT-2 (package transformer/gpt2) from Hugging Face transformers and PEFT.

Run on the GPU machine (torch 2.11, transformers 5.17, peft 0.21):

    python3 tools/reference/gpt2_goldens.py testdata/gpt2 [--device cuda]
    python3 tools/reference/gpt2_goldens.py --check-tune DIR      # after the Go test wrote DIR (see below)

Files written into OUT_DIR:

    tiny/            GPT2LMHeadModel.save_pretrained of a tiny random model (vocab 96, n_positions 32, n_embd 32,
                     2 layers, 4 heads, gelu_new, tied head; LayerNorm weights and all biases perturbed so every
                     parameter matters); config.json + model.safetensors (no lm_head.weight: it is tied)
    tiny_untied/     the same shapes with tie_word_embeddings false (lm_head.weight saved)
    tiny_gpt2model/  tiny's weights as an old GPT2Model checkpoint: no "transformer." prefix, with the
                     attn.bias (1, 1, P, P) and attn.masked_bias buffers older transformers saved
    peft_adapter/    a PEFT LoRA adapter on tiny (r 4, alpha 8, target_modules c_attn, fan_in_fan_out true,
                     task_type CAUSAL_LM) with non-zero lora_B
    gpt2_goldens.safetensors:
        inputs/{input_ids,attention_mask,labels}   I64 (B, T) = (2, 12); row 1 right-padded by 4 (labels −100
                                                   there) and one more label ignored
        {mode}/{tied,untied}/logits   F32 (B, T, V)   mode fp32 (eager attention, TF32 off), bf16 or fp16
                                                      (torch.autocast on the device, no GradScaler)
        {mode}/{tied,untied}/loss     F32 (1)
        {mode}/{tied,untied}/grad/<name>   F32, the .grad of every named parameter in its transformers shape
                                           (Conv1D weights (in, out)); the tied wte gradient includes lm_head's
        peft/logits                   F32 (B, T, V) tiny + peft_adapter, fp32, eval mode
      metadata: library versions, and the largest |sdpa − eager| FP32 logit difference.

--check-tune DIR: DIR/adapter is an adapter tune wrote for tiny and DIR/logits.safetensors the logits tune
computed with it (written by transformer/gpt2's TestGoldenPEFT when GPT2_TUNE_OUT=DIR is set); this loads the
adapter with PeftModel.from_pretrained on OUT_DIR/tiny and prints the largest relative logit difference.

The Go tests (transformer/gpt2/golden_test.go) skip with a message naming this script until the files exist.
"""

import argparse
import json
import os
import sys

import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import GPT2Config, GPT2LMHeadModel

B, T = 2, 12
MODES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def make_config(tied=True):
    return GPT2Config(vocab_size=96, n_positions=32, n_embd=32, n_layer=2, n_head=4, activation_function="gelu_new",
                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=tied)


def build(tied):
    torch.manual_seed(20261201)
    model = GPT2LMHeadModel(make_config(tied))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "ln_" in name or name.endswith(".bias"):
                p.add_(0.1 * torch.randn_like(p))
    return model


def set_attn(model, impl):
    """Switch the attention implementation (set_attn_implementation where transformers has it)."""
    if hasattr(model, "set_attn_implementation"):
        try:
            model.set_attn_implementation(impl)
            return
        except Exception as e:  # noqa: BLE001 - fall back to the config attribute
            print("set_attn_implementation failed:", e)
    model.config._attn_implementation = impl


def inputs(device):
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(1, 96, (B, T), generator=g)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, T - 4:] = 0
    ids[1, T - 4:] = 0
    labels = ids.clone()
    labels[mask == 0] = -100
    labels[0, 5] = -100
    return ids.to(device), mask.to(device), labels.to(device)


def run(model, device, mode, ids, mask, labels):
    model.zero_grad(set_to_none=True)
    model.train()
    dtype = MODES[mode]
    ctx = torch.autocast(device_type=device, dtype=dtype) if dtype else torch.autocast(device_type=device, enabled=False)
    with ctx:
        out = model(input_ids=ids, attention_mask=mask, labels=labels)
    out.loss.backward()
    res = {"logits": out.logits.detach().float().cpu().contiguous(), "loss": out.loss.detach().float().reshape(1).cpu()}
    for name, p in model.named_parameters():
        res["grad/" + name] = p.grad.detach().float().cpu().contiguous()
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default="testdata/gpt2")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--check-tune", default=None)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if args.check_tune:
        return check_tune(args.out, args.check_tune, args.device)
    os.makedirs(args.out, exist_ok=True)
    dev = args.device
    ids, mask, labels = inputs(dev)
    tensors = {"inputs/input_ids": ids.cpu(), "inputs/attention_mask": mask.cpu(), "inputs/labels": labels.cpu()}
    meta = {"torch": torch.__version__, "transformers": transformers.__version__}
    for variant, tied in (("tied", True), ("untied", False)):
        model = build(tied)
        model.save_pretrained(os.path.join(args.out, "tiny" if tied else "tiny_untied"))
        set_attn(model, "eager")
        model.to(dev)
        for mode in MODES:
            for k, v in run(model, dev, mode, ids, mask, labels).items():
                tensors[f"{mode}/{variant}/{k}"] = v
        if tied:
            set_attn(model, "sdpa")
            model.eval()
            with torch.no_grad():
                sdpa = model(input_ids=ids, attention_mask=mask).logits.float().cpu()
            keep = mask.cpu().bool().unsqueeze(-1)
            diff = ((sdpa - tensors["fp32/tied/logits"]).abs() * keep).max().item()
            meta["sdpa_vs_eager_max_abs"] = f"{diff:.3g}"
            print(f"sdpa vs eager FP32 logits (real tokens): max abs diff {diff:.3g}")
    # The old GPT2Model layout: no prefix, causal-mask buffers.
    sd = load_file(os.path.join(args.out, "tiny", "model.safetensors"))
    old = {k[len("transformer."):]: v for k, v in sd.items()}
    P = 32
    for i in range(2):
        old[f"h.{i}.attn.bias"] = torch.tril(torch.ones(P, P)).view(1, 1, P, P)
        old[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    d = os.path.join(args.out, "tiny_gpt2model")
    os.makedirs(d, exist_ok=True)
    save_file(old, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    cfg = json.load(open(os.path.join(args.out, "tiny", "config.json")))
    cfg["architectures"] = ["GPT2Model"]
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=2, sort_keys=True)
    # PEFT adapter with non-zero B.
    import peft
    from peft import LoraConfig, get_peft_model
    meta["peft"] = peft.__version__
    base = GPT2LMHeadModel.from_pretrained(os.path.join(args.out, "tiny"), attn_implementation="eager").to(dev)
    lc = LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn"], fan_in_fan_out=True, lora_dropout=0.0,
                    task_type="CAUSAL_LM")
    pm = get_peft_model(base, lc)
    torch.manual_seed(3)
    with torch.no_grad():
        for name, p in pm.named_parameters():
            if "lora_B" in name:
                p.copy_(0.1 * torch.randn_like(p))
    pm.eval()
    with torch.no_grad():
        tensors["peft/logits"] = pm(input_ids=ids, attention_mask=mask).logits.float().cpu().contiguous()
    pm.save_pretrained(os.path.join(args.out, "peft_adapter"))
    save_file(tensors, os.path.join(args.out, "gpt2_goldens.safetensors"), metadata=meta)
    print("wrote", args.out, json.dumps(meta))


def check_tune(out, tune_dir, dev):
    from peft import PeftModel
    base = GPT2LMHeadModel.from_pretrained(os.path.join(out, "tiny"), attn_implementation="eager").to(dev)
    pm = PeftModel.from_pretrained(base, os.path.join(tune_dir, "adapter")).to(dev)
    pm.eval()
    t = load_file(os.path.join(tune_dir, "logits.safetensors"))
    ids, mask = t["input_ids"].to(dev), t["attention_mask"].to(dev)
    with torch.no_grad():
        got = pm(input_ids=ids, attention_mask=mask).logits.float().cpu()
    want = t["logits"]
    rel = ((got - want).abs().max() / want.abs().max()).item()
    print(json.dumps({"check": "tune adapter in PeftModel.from_pretrained", "max_rel_diff": rel, "pass": rel < 1e-5,
                      "fan_in_fan_out": pm.peft_config["default"].fan_in_fan_out}))


if __name__ == "__main__":
    sys.exit(main())
