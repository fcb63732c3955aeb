#!/usr/bin/env python3
"""Goldens for tune's BERT (package transformer) from Hugging Face transformers.

Run on the GPU machine (torch 2.11, transformers 5.17, safetensors 0.8):

    python3 tools/reference/bert_goldens.py testdata/bert \\
        [--tiny-bert-random ../shared/data/tiny-bert-random] [--device cuda]

Every model but tiny-bert-random gets its weights from detweights.py (splitmix64 of the parameter name; Go's
transformer/detweights computes the same bits), so the files hold only inputs and outputs. For each case it runs
BertForSequenceClassification with attn_implementation="eager" in train mode with dropout 0, in FP32 (TF32 off),
then under torch.autocast(bfloat16) and torch.autocast(float16) (no GradScaler), and records the logits, the loss
and the FP32 .grad of every parameter. The same FP32 run with attn_implementation="sdpa" is compared with eager and
the largest difference is recorded in the metadata (and printed).

Files written into OUT_DIR (safetensors, written by the safetensors package; "__metadata__" carries the HF config
as JSON, the seed and the library versions):

    tiny_v128.safetensors       2 layers, hidden 64, 4 heads, intermediate 128, vocab 128, 3 labels (one row -100)
    tiny_regression.safetensors the same shape with num_labels 1 (MSE)
    tiny_v30522.safetensors     the same shape with the real 30,522 vocabulary, 2 labels; the word-embedding
                                gradient is stored only for the rows the inputs touch (word_rows) plus its norm
    base_shape.safetensors      the bert-base shape (12 layers, 768, 12 heads, 3072), batch 2 x 16: logits, loss
                                and the norm of every parameter's gradient
    tiny_bert_random.safetensors ../shared/data/tiny-bert-random on fixed inputs: logits and loss
    saved_by_tune_check.json    what from_pretrained reported (missing/unexpected/mis-shaped keys) loading
                                OUT_DIR/saved_by_tune, a checkpoint written by tune's Save, and the relative error
                                of its logits against the ones tune computed

Tensor names: inputs/{input_ids,token_type_ids,attention_mask} (I64, (B, T)), inputs/labels (I64, (B)) or
inputs/targets (F32, (B)); {mode}/logits (F32, (B, L)), {mode}/loss (F32, (1)), {mode}/grad/<param> (F32),
{mode}/gradnorm/<param> (F32, (1)); check/<param> (F32, (2)): sum and sum of squares of the weights as loaded,
so the Go test can confirm it generated the same weights. mode is fp32, bf16 or fp16.

The Go tests (transformer/bert/golden_test.go) skip with a message naming this script until the files exist.
"""

import argparse
import contextlib
import json
import os
import sys

import numpy as np
import torch
import transformers
from safetensors.numpy import save_file
from transformers import BertConfig, BertForSequenceClassification

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import detweights  # noqa: E402

SEED = 20261129  # the detweights seed of every generated model
MODES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def make_config(vocab, labels, layers=2, hidden=64, heads=4, inter=128, max_pos=64):
    return BertConfig(
        vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=inter, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        max_position_embeddings=max_pos, num_labels=labels,
    )


CONFIG_KEYS = ["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
               "hidden_act", "hidden_dropout_prob", "attention_probs_dropout_prob", "max_position_embeddings",
               "type_vocab_size", "initializer_range", "layer_norm_eps", "pad_token_id", "classifier_dropout",
               "problem_type", "id2label", "label2id", "model_type"]


def config_json(config):
    """The config.json keys tune reads (problem_type as the model resolved it on the first forward)."""
    d = config.to_dict()
    return json.dumps({k: d.get(k) for k in CONFIG_KEYS}, sort_keys=True)


def build(config, impl, device):
    """A BertForSequenceClassification with the given attention implementation and detweights weights."""
    config = BertConfig.from_dict(config.to_dict())
    config._attn_implementation = impl
    model = BertForSequenceClassification(config)
    if getattr(model.config, "_attn_implementation", impl) != impl and hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(impl)
    got = getattr(model.config, "_attn_implementation", None)
    if got != impl:
        raise SystemExit(f"could not select attn_implementation={impl!r} (model uses {got!r})")
    detweights.load_into(model, SEED)
    return model.float().to(device).train()


def make_inputs(vocab, lengths, t, rng):
    """ids uniform in [1, vocab) for real tokens, pad id 0 after; token type 1 on the second half of each row."""
    b = len(lengths)
    ids = np.zeros((b, t), np.int64)
    types = np.zeros((b, t), np.int64)
    mask = np.zeros((b, t), np.int64)
    for i, n in enumerate(lengths):
        ids[i, :n] = rng.integers(1, vocab, size=n)
        mask[i, :n] = 1
        types[i, n // 2:n] = 1
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}


def run(model, inputs, labels, mode, device):
    """One forward + backward; returns logits (F32), loss and {name: FP32 grad}."""
    model.zero_grad(set_to_none=True)
    feed = {k: torch.from_numpy(v).to(device) for k, v in inputs.items()}
    lab = torch.from_numpy(labels).to(device)
    ctx = contextlib.nullcontext() if MODES[mode] is None else torch.autocast(device.type, dtype=MODES[mode])
    with ctx:
        out = model(**feed, labels=lab)
    out.loss.backward()
    grads = {n: p.grad.detach().float().cpu().numpy() for n, p in model.named_parameters()}
    return out.logits.detach().float().cpu().numpy(), float(out.loss.detach().float()), grads


def rel_err(a, b):
    """max|a-b| / max|b| (absolute when b is all zeros)."""
    ref = float(np.max(np.abs(b))) if b.size else 0.0
    diff = float(np.max(np.abs(a - b))) if b.size else 0.0
    return diff / ref if ref > 0 else diff


def labels_array(kind, b, num_labels):
    if kind == "regression":
        return np.array([0.5, -1.25, 2.0, 0.75][:b], np.float32)
    lab = np.arange(b, dtype=np.int64) % num_labels
    if kind == "ignore":
        lab[1] = -100
    return lab


def golden_case(path, config, lengths, t, label_kind, device, modes=("fp32", "bf16", "fp16"), word_rows=False,
                norms_only=False):
    rng = np.random.default_rng(1234)
    inputs = make_inputs(config.vocab_size, lengths, t, rng)
    labels = labels_array(label_kind, len(lengths), config.num_labels)
    model = build(config, "eager", device)
    out = {f"inputs/{k}": v for k, v in inputs.items()}
    out["inputs/targets" if label_kind == "regression" else "inputs/labels"] = labels
    for name, p in model.named_parameters():
        w = p.detach().double().cpu().numpy()
        out[f"check/{name}"] = np.array([w.sum(), (w * w).sum()], np.float32)
    rows = np.unique(inputs["input_ids"]) if word_rows else None
    if rows is not None:
        out["word_rows"] = rows.astype(np.int64)
    results = {}
    for mode in modes:
        logits, loss, grads = run(model, inputs, labels, mode, device)
        results[mode] = (logits, grads)
        out[f"{mode}/logits"] = logits
        out[f"{mode}/loss"] = np.array([loss], np.float32)
        for name, g in grads.items():
            out[f"{mode}/gradnorm/{name}"] = np.array([np.linalg.norm(g.astype(np.float64))], np.float32)
            if norms_only:
                continue
            if rows is not None and name.endswith("word_embeddings.weight"):
                g = g[rows]
            out[f"{mode}/grad/{name}"] = np.ascontiguousarray(g)
        print(f"  {mode}: loss {loss:.6f}")
    # SDPA against eager, FP32: transformers' default path must give the same numbers.
    sdpa = build(config, "sdpa", device)
    s_logits, _, s_grads = run(sdpa, inputs, labels, "fp32", device)
    e_logits, e_grads = results["fp32"]
    worst = max(((rel_err(s_grads[n], e_grads[n]), n) for n in e_grads), default=(0.0, ""))
    sdpa_check = {"logits": rel_err(s_logits, e_logits), "worst_grad": worst[0], "worst_grad_name": worst[1]}
    print(f"  sdpa vs eager (fp32): {sdpa_check}")
    meta = {
        "format": "pt",
        "config": config_json(model.config),
        "seed": str(SEED),
        "modes": ",".join(modes),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": str(device),
        "attn_implementation": "eager",
        "sdpa_vs_eager": json.dumps(sdpa_check),
        "script": "tools/reference/bert_goldens.py",
    }
    save_file(out, path, metadata=meta)
    print(f"wrote {path} ({os.path.getsize(path)} bytes, {len(out)} tensors)")


def golden_tiny_bert_random(path, src, device):
    model = BertForSequenceClassification.from_pretrained(src, attn_implementation="eager").float().to(device).train()
    rng = np.random.default_rng(99)
    inputs = make_inputs(model.config.vocab_size, [10, 6], 10, rng)
    inputs["input_ids"][:, 0] = 101  # [CLS]
    inputs["input_ids"][0, 9], inputs["input_ids"][1, 5] = 102, 102  # [SEP]
    labels = np.array([1, 0], np.int64)
    out = {f"inputs/{k}": v for k, v in inputs.items()}
    out["inputs/labels"] = labels
    for mode in MODES:
        logits, loss, _ = run(model, inputs, labels, mode, device)
        out[f"{mode}/logits"] = logits
        out[f"{mode}/loss"] = np.array([loss], np.float32)
        print(f"  {mode}: loss {loss:.6f}")
    meta = {"format": "pt", "source": os.path.abspath(src), "torch": torch.__version__,
            "transformers": transformers.__version__, "device": str(device), "script": "tools/reference/bert_goldens.py"}
    save_file(out, path, metadata=meta)
    print(f"wrote {path} ({os.path.getsize(path)} bytes, {len(out)} tensors)")


def check_saved_by_tune(src, path, device):
    """Load a checkpoint tune saved (testdata/bert/saved_by_tune) with from_pretrained and record the loading
    info and how its logits compare with the ones tune computed (expected.safetensors)."""
    from safetensors.numpy import load_file

    model, info = BertForSequenceClassification.from_pretrained(src, attn_implementation="eager",
                                                                output_loading_info=True)
    model = model.float().to(device).eval()
    expected = load_file(os.path.join(src, "expected.safetensors"))
    feed = {k: torch.from_numpy(expected[f"inputs/{k}"]).to(device)
            for k in ("input_ids", "token_type_ids", "attention_mask")}
    with torch.no_grad():
        logits = model(**feed).logits.float().cpu().numpy()
    result = {
        "missing": sorted(info.get("missing_keys", [])),
        "unexpected": sorted(info.get("unexpected_keys", [])),
        "mismatched": sorted(str(m) for m in info.get("mismatched_keys", [])),
        "logits_rel_err": rel_err(logits, expected["fp32/logits"]),
        "transformers": transformers.__version__,
        "torch": torch.__version__,
    }
    with open(path, "w") as f:
        json.dump(result, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"wrote {path}: {result}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", help="directory to write into (the repository's testdata/bert)")
    ap.add_argument("--tiny-bert-random", default=os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared",
                                                               "data", "tiny-bert-random"))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    device = torch.device(args.device)
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    os.makedirs(args.out_dir, exist_ok=True)
    j = lambda name: os.path.join(args.out_dir, name)  # noqa: E731

    print("tiny_v128")
    golden_case(j("tiny_v128.safetensors"), make_config(128, 3), [12, 9, 5], 12, "ignore", device)
    print("tiny_regression")
    golden_case(j("tiny_regression.safetensors"), make_config(128, 1), [12, 9, 5], 12, "regression", device)
    print("tiny_v30522")
    golden_case(j("tiny_v30522.safetensors"), make_config(30522, 2), [12, 9, 5], 12, "plain", device,
                word_rows=True)
    print("base_shape")
    golden_case(j("base_shape.safetensors"), make_config(30522, 2, layers=12, hidden=768, heads=12, inter=3072,
                                                          max_pos=512), [16, 11], 16, "plain", device,
                norms_only=True)
    saved = j("saved_by_tune")
    if os.path.isdir(saved):
        print("saved_by_tune")
        check_saved_by_tune(saved, j("saved_by_tune_check.json"), device)
    if os.path.isdir(args.tiny_bert_random):
        print("tiny_bert_random")
        golden_tiny_bert_random(j("tiny_bert_random.safetensors"), args.tiny_bert_random, device)
    else:
        print(f"skipping tiny_bert_random: {args.tiny_bert_random} not found (pass --tiny-bert-random)")


if __name__ == "__main__":
    main()
