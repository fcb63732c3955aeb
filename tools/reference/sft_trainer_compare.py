#!/usr/bin/env python3
"""Reference SFT losses for tune from transformers' Trainer on the tiny Llama of testdata/sft.

    python3 tools/reference/sft_trainer_compare.py --model recipes/data/tiny-chat \
        --inputs sft_compare_inputs.json --out testdata/sft/trainer_compare.json

--inputs is what the Go test recipes.TestWriteSFTCompareInputs writes (TUNE_WRITE_SFT_COMPARE=FILE): the
tiny-chat training conversations tokenized by tune (input ids, and labels with -100 outside the assistant
turns), and for each of 10 packed steps the examples of its 2 packed rows. The real transformers.Trainer (its
RandomSampler replaced by a SequentialSampler) trains LlamaForCausalLM from the same checkpoint on the CPU, FP32:
learning_rate 1e-3, constant, warmup 0, weight_decay 0, max_grad_norm 1.0, adamw_torch, seed 42, 10 steps, twice:

  unpacked  per_device_train_batch_size 4, the examples in file order, right-padded (labels -100 at pads);
  packed    one item per step holding the examples tune packs into that step's 2 rows, collated as one padded
            batch: the loss tune computes on packed rows (position ids restarting, attention inside each example,
            the mean over all supervised tokens) must equal this padded batch's.

Output: {"meta": {...}, "unpacked": {"loss": [10], "grad_norm": [10]}, "packed": {...}}; loss is what
training_step returned (unrounded).
"""

import argparse
import json
import os

import torch
import transformers
from torch.utils.data import Dataset, SequentialSampler


class Items(Dataset):
    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def pad(examples):
    T = max(len(e["input_ids"]) for e in examples)
    ids = [e["input_ids"] + [0] * (T - len(e["input_ids"])) for e in examples]
    lab = [e["labels"] + [-100] * (T - len(e["labels"])) for e in examples]
    att = [[1] * len(e["input_ids"]) + [0] * (T - len(e["input_ids"])) for e in examples]
    return {"input_ids": torch.tensor(ids), "labels": torch.tensor(lab), "attention_mask": torch.tensor(att)}


def collate_single(batch):
    return pad(batch)


def collate_group(batch):
    return pad([e for group in batch for e in group])


class SeqTrainer(transformers.Trainer):
    losses = None

    def _get_train_sampler(self, *args, **kwargs):
        return SequentialSampler(self.train_dataset)

    def training_step(self, *args, **kwargs):
        loss = super().training_step(*args, **kwargs)
        self.losses.append(float(loss.detach()))
        return loss


def run(model_dir, dataset, collate, bs, out_dir):
    torch.manual_seed(42)
    model = transformers.LlamaForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    args = transformers.TrainingArguments(
        output_dir=out_dir, per_device_train_batch_size=bs, gradient_accumulation_steps=1, max_steps=10,
        learning_rate=1e-3, lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0,
        optim="adamw_torch", logging_steps=1, save_strategy="no", report_to="none", seed=42, use_cpu=True,
        dataloader_num_workers=0, remove_unused_columns=False)
    tr = SeqTrainer(model=model, args=args, train_dataset=dataset, data_collator=collate)
    tr.losses = []
    tr.train()
    norms = [l["grad_norm"] for l in tr.state.log_history if "grad_norm" in l]
    return {"loss": tr.losses, "grad_norm": [float(x) for x in norms]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--inputs", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    with open(a.inputs) as f:
        inp = json.load(f)
    ex = inp["examples"]
    tmp = os.path.join(os.path.dirname(os.path.abspath(a.out)), "sft-compare-tmp")
    out = {"meta": {"transformers": transformers.__version__, "torch": torch.__version__, "device": "cpu"}}
    out["unpacked"] = run(a.model, Items(ex[:40]), collate_single, 4, tmp)
    out["packed"] = run(a.model, Items([[ex[i] for i in g] for g in inp["packed_steps"]]), collate_group, 1, tmp)
    with open(a.out, "w") as f:
        json.dump(out, f)
        f.write("\n")
    print("unpacked", out["unpacked"]["loss"][:3], "packed", out["packed"]["loss"][:3])


if __name__ == "__main__":
    main()
