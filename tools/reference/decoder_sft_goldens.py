#!/usr/bin/env python3
"""A tiny random Llama checkpoint with greedy-generation and masked-loss goldens from transformers.

    python3 tools/reference/decoder_sft_goldens.py --tokenizer testdata/bpe/tiny-sp --out testdata/sft/tiny-llama

Writes into --out: config.json, generation_config.json and model.safetensors of a LlamaForCausalLM (2 layers,
hidden 64, 4 heads / 2 KV heads, seed 0, FP32, untied head), a copy of the tokenizer.json, and goldens.json:
  {"greedy": [{"prompt", "input_ids", "output_ids"}],    generate(do_sample=False, max_new_tokens=20), on the CPU
   "examples": [{"input_ids", "labels", "loss", "n_supervised", "mean_token_accuracy"}],
   "batch": {"input_ids", "attention_mask", "labels", "loss"}}
loss is transformers' causal-LM loss (labels shifted inside the model, -100 ignored, mean over supervised tokens);
mean_token_accuracy is TRL's: argmax of the shifted logits equal to the label, over supervised positions. The batch
right-pads the examples with pad id 0 (labels -100, attention_mask 0) and its loss is the mean over all its
supervised tokens.
"""

import argparse
import json
import os
import shutil

import torch
import transformers
from tokenizers import Tokenizer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    tk = Tokenizer.from_file(os.path.join(a.tokenizer, "tokenizer.json"))
    os.makedirs(a.out, exist_ok=True)
    shutil.copy(os.path.join(a.tokenizer, "tokenizer.json"), os.path.join(a.out, "tokenizer.json"))
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=tk.get_vocab_size(), hidden_size=64, intermediate_size=128,
                                   num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                   max_position_embeddings=256, rms_norm_eps=1e-6, tie_word_embeddings=False,
                                   bos_token_id=1, eos_token_id=2, pad_token_id=None, rope_theta=10000.0)
    model = transformers.LlamaForCausalLM(cfg).float().eval()
    model.generation_config.eos_token_id = 2
    model.generation_config.bos_token_id = 1
    model.save_pretrained(a.out, safe_serialization=True)
    out = {"transformers_version": transformers.__version__, "torch_version": torch.__version__,
           "greedy": [], "examples": []}
    for prompt in ["Hello world", "The quick brown fox", "def f(x):"]:
        ids = tk.encode(prompt).ids
        with torch.no_grad():
            g = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                               do_sample=False, max_new_tokens=20, pad_token_id=0)
        out["greedy"].append({"prompt": prompt, "input_ids": ids, "output_ids": g[0, len(ids):].tolist()})
    texts = [("Name a colour.", " Blue, of course."), ("The quick brown fox", " jumps over the lazy dog."),
             ("hello", " world 123")]
    exs = []
    for p, c in texts:
        pi = tk.encode(p).ids
        ci = tk.encode(c, add_special_tokens=False).ids + [2]
        ids = pi + ci
        labels = [-100] * len(pi) + ci
        with torch.no_grad():
            r = model(torch.tensor([ids]), labels=torch.tensor([labels]))
        pred = r.logits[0, :-1].argmax(-1)
        lab = torch.tensor(labels[1:])
        m = lab != -100
        acc = (pred[m] == lab[m]).float().mean().item()
        exs.append((ids, labels))
        out["examples"].append({"prompt": p, "completion": c, "input_ids": ids, "labels": labels,
                                "loss": r.loss.item(), "n_supervised": int(m.sum()), "mean_token_accuracy": acc})
    T = max(len(i) for i, _ in exs)
    ids = [i + [0] * (T - len(i)) for i, _ in exs]
    att = [[1] * len(i) + [0] * (T - len(i)) for i, _ in exs]
    lab = [l + [-100] * (T - len(l)) for _, l in exs]
    with torch.no_grad():
        r = model(torch.tensor(ids), attention_mask=torch.tensor(att), labels=torch.tensor(lab))
    out["batch"] = {"input_ids": ids, "attention_mask": att, "labels": lab, "loss": r.loss.item()}
    with open(os.path.join(a.out, "goldens.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
        f.write("\n")
    print("greedy", [g["output_ids"][:6] for g in out["greedy"]], "batch loss", out["batch"]["loss"])


if __name__ == "__main__":
    main()
