#!/usr/bin/env python3
"""Reference loss curves for tune's Trainer from Hugging Face's Trainer (transformers 5.17, accelerate 1.15).

Run on the GPU machine (torch 2.11, transformers 5.17):

    python3 tools/reference/trainer_compare.py testdata/trainer \\
        [--model ../shared/data/tiny-bert-random] [--data ../shared/data/sst2/train.tsv] [--device cuda]

It fine-tunes ../shared/data/tiny-bert-random (model and tokenizer, dropout 0 in its config) with the real
transformers.Trainer (not a re-implementation) on the first STEPS x BATCH rows of SST-2's train.tsv in file order
(the Trainer's RandomSampler is replaced by a SequentialSampler), with:

    per_device_train_batch_size 16, gradient_accumulation_steps 1, max_length 64 (truncation, dynamic padding
    with DataCollatorWithPadding), learning_rate 5e-4, lr_scheduler_type constant, warmup_steps 0,
    weight_decay 0, max_grad_norm 1.0, optim adamw_torch_fused (the v5 default), logging_steps 1, max_steps 30,
    seed 42, attn_implementation eager, TF32 off,

three times: FP32, bf16=True (autocast bf16, no GradScaler) and fp16=True (autocast fp16 with accelerate's
GradScaler, init_scale 65536). For each it records per optimizer step: the training loss (the value
training_step returned, unrounded, and the loss of log_history), grad_norm and learning_rate from log_history,
and for FP16 the GradScaler's scale used by that step (read in on_step_begin, before the step's update).

Gradient accumulation: with gradient_accumulation_steps 1, as here, transformers and tune compute the same loss
and gradient. For more than one micro-batch they differ on purpose: transformers 5.17 passes
num_items_in_batch to BertForSequenceClassification (whose forward takes **kwargs), which ignores it, and then
skips its 1/N division, so it accumulates the SUM of the micro-batch mean-loss gradients and logs the sum of the
means; tune normalises the window by its number of labelled examples (loss normalisation by num_items_in_batch, transformers' trainer.py). See
trainer.TrainingArguments.GradientAccumulationSteps.

Output: OUT_DIR/compare_golden.json

    {"meta": {versions, device, config}, "fp32": {"loss": [30], "log_loss": [30], "grad_norm": [30],
     "learning_rate": [30]}, "bf16": {...}, "fp16": {..., "loss_scale": [30]}}

The Go test trainer/compare_test.go runs tune's Trainer on the CPU with the same configuration and compares the
losses (1e-3 absolute for FP32, 2e-2 for BF16 and FP16) and the FP16 loss scales (exactly); it skips with a
message naming this script until testdata/trainer/compare_golden.json exists.
"""

import argparse
import csv
import json
import os
import random
import tempfile

import numpy as np
import torch
import transformers
from torch.utils.data import Dataset, SequentialSampler
from transformers import (AutoTokenizer, BertForSequenceClassification, DataCollatorWithPadding, Trainer,
                          TrainerCallback, TrainingArguments)

STEPS = 30
BATCH = 16
MAX_LENGTH = 64
LEARNING_RATE = 5e-4
SEED = 42


class RowsDataset(Dataset):
    """Pre-tokenized examples: dicts of input_ids, token_type_ids, attention_mask and labels."""

    def __init__(self, encodings, labels):
        self.encodings, self.labels = encodings, labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        item = {k: v[i] for k, v in self.encodings.items()}
        item["labels"] = self.labels[i]
        return item


class FileOrderTrainer(Trainer):
    """transformers.Trainer with the training data read in file order and the per-step loss recorded."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.step_losses = []

    def _get_train_sampler(self, *args, **kwargs):
        return SequentialSampler(self.train_dataset)

    def training_step(self, *args, **kwargs):
        loss = super().training_step(*args, **kwargs)
        self.step_losses.append(float(loss.detach().float().item()))
        return loss


class ScaleRecorder(TrainerCallback):
    """Records the GradScaler's scale at the start of every optimizer step (the scale that step uses)."""

    def __init__(self):
        self.trainer, self.scales = None, []

    def on_step_begin(self, args, state, control, **kwargs):
        scaler = getattr(self.trainer.accelerator, "scaler", None)
        self.scales.append(float(scaler.get_scale()) if scaler is not None else 1.0)


def read_rows(path, n):
    """The first n (sentence, label) rows of a GLUE TSV with a header."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader)
        ti, li = header.index("sentence"), header.index("label")
        rows = []
        for row in reader:
            rows.append((row[ti], int(row[li])))
            if len(rows) == n:
                break
    return rows


def run(mode, model_dir, rows, tokenizer, device, attn, work_dir):
    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    enc = tokenizer([r[0] for r in rows], truncation=True, max_length=MAX_LENGTH)
    ds = RowsDataset(enc, [r[1] for r in rows])
    model = BertForSequenceClassification.from_pretrained(model_dir, num_labels=2, attn_implementation=attn)
    args = TrainingArguments(
        output_dir=os.path.join(work_dir, "hf-" + mode),  # nothing is saved (save_strategy no)
        per_device_train_batch_size=BATCH,
        gradient_accumulation_steps=1,
        learning_rate=LEARNING_RATE,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=1.0,
        max_steps=STEPS,
        logging_steps=1,
        save_strategy="no",
        eval_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=SEED,
        fp16=(mode == "fp16"),
        bf16=(mode == "bf16"),
        use_cpu=(device == "cpu"),
    )
    recorder = ScaleRecorder()
    trainer = FileOrderTrainer(model=model, args=args, train_dataset=ds,
                               data_collator=DataCollatorWithPadding(tokenizer), callbacks=[recorder])
    recorder.trainer = trainer
    trainer.train()
    logs = [e for e in trainer.state.log_history if "loss" in e and "train_loss" not in e]
    assert len(logs) == STEPS, f"{mode}: {len(logs)} logged steps, want {STEPS}"
    out = {
        "loss": trainer.step_losses[:STEPS],
        "log_loss": [e["loss"] for e in logs],
        "grad_norm": [float(e.get("grad_norm", float("nan"))) for e in logs],
        "learning_rate": [e["learning_rate"] for e in logs],
    }
    if mode == "fp16":
        out["loss_scale"] = recorder.scales[:STEPS]
    print(f"{mode}: loss {out['loss'][0]:.6f} -> {out['loss'][-1]:.6f}")
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    shared = os.path.normpath(os.path.join(here, "..", "..", "..", "shared", "data"))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--model", default=os.path.join(shared, "tiny-bert-random"))
    p.add_argument("--data", default=os.path.join(shared, "sst2", "train.tsv"))
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--attn", default="eager", choices=["eager", "sdpa"])
    a = p.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(a.model)
    rows = read_rows(a.data, STEPS * BATCH)
    modes = ["fp32", "bf16", "fp16"] if a.device == "cuda" else ["fp32"]
    golden = {"meta": {
        "script": "tools/reference/trainer_compare.py",
        "torch": torch.__version__, "transformers": transformers.__version__,
        "device": torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu",
        "config": {"model": "tiny-bert-random", "data": "sst2/train.tsv", "rows": STEPS * BATCH, "order": "file",
                   "per_device_train_batch_size": BATCH, "gradient_accumulation_steps": 1,
                   "max_length": MAX_LENGTH, "learning_rate": LEARNING_RATE, "lr_scheduler_type": "constant",
                   "warmup_steps": 0, "weight_decay": 0.0, "max_grad_norm": 1.0, "max_steps": STEPS,
                   "logging_steps": 1, "seed": SEED, "optim": "adamw_torch_fused", "attn_implementation": a.attn,
                   "dropout": 0.0},
    }}
    with tempfile.TemporaryDirectory() as work:
        for mode in modes:
            golden[mode] = run(mode, a.model, rows, tokenizer, a.device, a.attn, work)
    path = os.path.join(a.out_dir, "compare_golden.json")
    with open(path, "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
