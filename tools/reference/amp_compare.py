#!/usr/bin/env python3
"""transformers' FP32-vs-autocast logits difference, the reference for `tune debug compare`.

Run on the GPU machine (torch 2.11, transformers 5.17):

    python3 tools/reference/amp_compare.py --model ../shared/data/tiny-bert-random \\
        --input testdata/debug/amp_compare_input.tsv --out testdata/debug/amp_compare_reference.json

It loads the model with BertForSequenceClassification.from_pretrained (eval mode, so no dropout) and its
tokenizer with AutoTokenizer, reads the `sentence` column of --input in file order, and for each batch of
BATCH rows (tokenized with padding=True, truncation=True, max_length=MAX_LENGTH: dynamic padding, as tune
pads each batch) computes the logits three times on CUDA: in FP32 (TF32 off), under
torch.autocast("cuda", dtype=torch.float16) and under torch.autocast("cuda", dtype=torch.bfloat16). The autocast
logits come out of the classifier Linear in the half dtype and are widened to FP32, as accelerate's
convert_outputs_to_fp32 does. Over every logit of every batch it records max and mean |FP32 - autocast|, once
with the default attention (sdpa) and once with attn_implementation="eager" (whose attention scores are FP16
under autocast, where sdpa and tune keep them in FP32).

Output (JSON): {"meta": {...}, "fp32_logits": [first batch, row-major], "sdpa": {"fp16": {"max_abs_diff",
"mean_abs_diff", "max_abs_fp32"}, "bf16": {...}}, "eager": {...}}

The Go test internal/probe TestCompareMatchesTransformers runs tune's Compare on the same model, input, batch
size and max_length on the CPU and checks that its logits row is within 10% of the sdpa numbers here, and that
its FP32 logits equal fp32_logits to 1e-4.
"""

import argparse
import csv
import json

import torch
import transformers
from transformers import AutoTokenizer, BertForSequenceClassification

BATCH = 8
MAX_LENGTH = 128


def read_sentences(path):
    with open(path, newline="") as f:
        rows = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        return [r["sentence"] for r in rows]


def logits_diffs(model, tok, sentences, device):
    ref_all, half_all = [], {"fp16": [], "bf16": []}
    first = None
    for i in range(0, len(sentences), BATCH):
        enc = tok(sentences[i:i + BATCH], padding=True, truncation=True, max_length=MAX_LENGTH,
                  return_tensors="pt").to(device)
        with torch.no_grad():
            ref = model(**enc).logits.float()
            if first is None:
                first = ref.flatten().tolist()
            ref_all.append(ref)
            for name, dt in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
                with torch.autocast("cuda", dtype=dt):
                    out = model(**enc).logits
                half_all[name].append((out.dtype, out.float()))
    ref = torch.cat(ref_all)
    res = {}
    for name, outs in half_all.items():
        got = torch.cat([o for _, o in outs])
        d = (ref - got).abs()
        res[name] = {"max_abs_diff": d.max().item(), "mean_abs_diff": d.mean().item(),
                     "max_abs_fp32": ref.abs().max().item(), "logits_dtype": str(outs[0][0]),
                     "count": d.numel()}
    return res, first


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = "cuda"
    tok = AutoTokenizer.from_pretrained(args.model)
    sentences = read_sentences(args.input)
    result = {"meta": {"torch": torch.__version__, "transformers": transformers.__version__,
                       "device": torch.cuda.get_device_name(0), "model": args.model, "input": args.input,
                       "examples": len(sentences), "batch": BATCH, "max_length": MAX_LENGTH, "tf32": False}}
    for attn in ("sdpa", "eager"):
        model = BertForSequenceClassification.from_pretrained(args.model, attn_implementation=attn).to(device).eval()
        result[attn], first = logits_diffs(model, tok, sentences, device)
        if attn == "sdpa":
            result["fp32_logits"] = first
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
