#!/usr/bin/env python3
"""Writes a randomly initialised bert-base-uncased-shaped BertForSequenceClassification checkpoint in Hugging Face
format, for end-to-end runs of tune on the GPU machine (no pretrained weights travel there).

    python3 tools/reference/make_bert_base_checkpoint.py OUT_DIR --tokenizer-dir .shared/data/bert-base-uncased

The config is bert-base-uncased's (config.json from --tokenizer-dir, 12 layers, hidden 768, 12 heads), 2 labels,
initialised by transformers' own _init_weights from torch.manual_seed(--seed); the tokenizer files beside that
config are copied in, so tune loads model and tokenizer from OUT_DIR.
"""
import argparse
import os
import shutil

import torch
from transformers import BertConfig, BertForSequenceClassification


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--tokenizer-dir", required=True, help="folder with config.json, tokenizer.json, vocab.txt")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    cfg = BertConfig.from_pretrained(a.tokenizer_dir, num_labels=2)
    model = BertForSequenceClassification(cfg)
    model.save_pretrained(a.out_dir)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        src = os.path.join(a.tokenizer_dir, name)
        if os.path.exists(src):
            shutil.copy(src, os.path.join(a.out_dir, name))
    n = sum(p.numel() for p in model.parameters())
    print(f"wrote {a.out_dir}: BertForSequenceClassification, {n:,} parameters, seed {a.seed}")


if __name__ == "__main__":
    main()
