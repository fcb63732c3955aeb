#!/usr/bin/env python3
"""Goldens for tune's decoder LLMs (transformer/llama; GPT-2 hooks in below) from transformers and PEFT.

Run on the GPU machine (torch 2.11, transformers 5.17, peft 0.21):

    python3 tools/reference/decoder_goldens.py testdata/decoder [--device cuda] [--check-tune DIR]

Every model gets its weights from detweights.py with one decoder rule added (decoder_values below: a name
ending in "norm.weight" is 1 + 0.1·f, as Go's test helper computes), so the golden files hold only inputs and
outputs. Each model is built from a transformers 4 style config dict (what Hub checkpoints hold; transformers 5
converts it) with attn_implementation="eager", TF32 off, and run in train mode (every dropout is 0) in FP32, then
under torch.autocast(bfloat16) and torch.autocast(float16) (no GradScaler).

Files written into OUT_DIR:

    <case>.safetensors   inputs/{input_ids,attention_mask,labels} (I64, (B, T)); {mode}/logits (F32, (B, T, V)),
                         {mode}/loss (F32, (1)), {mode}/grad/<param> (F32) for the modes the case records grads
                         in. __metadata__: "config" (the config.json transformers 5 writes for the model, v5
                         layout), "seed", "versions".
        llama_rope3      Llama, llama3 rope scaling, GQA 4/2 heads, explicit head_dim 16 ≠ hidden/heads, untied,
                         2 layers; grads in fp32, bf16 and fp16
        qwen2_bias       Qwen2, q/k/v biases, tied, pad_token_id 0 present in the inputs (padding_idx); fp32 grads
        qwen3_qknorm     Qwen3, q_norm/k_norm, explicit head_dim 16 (q_proj 32 → 64), GQA, tied; fp32 grads
        mistral          Mistral, untied, sliding_window 64 ≥ T; fp32 grads
    ckpt/<name>/         checkpoints saved by transformers for tune's loader: llama_v5_bf16 (save_pretrained of
                         llama_rope3 in bfloat16: v5 config.json, generation_config.json), qwen2_v4_f32
                         (qwen2_bias in FP32 with its config.json rewritten in the v4 layout: rope_theta,
                         rope_scaling, torch_dtype), mistral_sharded_f16 (mistral in float16, max_shard_size
                         20KB: model.safetensors.index.json and shards)
    checkpoints.safetensors  <name>/logits (F32, (B, T, V)) of each checkpoint as from_pretrained loads it
                         (FP32), on the inputs of its case
    peft/qv/, peft/all/  PEFT CAUSAL_LM adapters of llama_rope3: target_modules unset (PEFT's default for llama:
                         q_proj, v_proj; r 4, alpha 8) and "all-linear" (r 2, alpha 4), lora_B drawn non-zero
                         (normal, std 0.1, torch seed 7)
    peft.safetensors     qv/logits, all/logits, all/merged_logits (merge_and_unload) in FP32
    trainer_golden.json  transformers.Trainer on llama_rope3: 30 optimizer steps of batch 4 × 16 tokens in
                         dataset order (SequentialSampler), lr 1e-3 constant, AdamW fused, weight decay 0,
                         max_grad_norm 1, seed 42, in fp32, bf16 and fp16 with gradient_accumulation_steps 1,
                         and fp32 with gradient_accumulation_steps 2: per step the training_step loss, the
                         logged loss, grad_norm, learning_rate and (fp16) the GradScaler scale. The token data
                         is in the file ("data": input_ids, attention_mask, labels; labels −100 on padding and
                         on position 0, so the number of supervised tokens is the same whether counted before
                         or after the shift).

--check-tune DIR loads tune's saved adapter DIR (written by the Go test
lora/TestDecoderAdapterSavedByTune with -update-decoder) with PeftModel.from_pretrained on llama_rope3 and
writes OUT_DIR/peft_loads_tune.json: missing/unexpected keys and the relative error of its logits against
DIR/tune_logits.safetensors.

The Go tests (transformer/llama/golden_test.go, lora/decoder_golden_test.go, trainer/decoder_compare_test.go)
skip with a message naming this script until the files exist.
"""

import argparse
import contextlib
import json
import os
import random
import shutil
import sys
import tempfile

import numpy as np
import torch
import transformers
from safetensors.numpy import load_file, save_file
from torch.utils.data import Dataset, SequentialSampler
from transformers import (AutoConfig, AutoModelForCausalLM, Trainer, TrainerCallback, TrainingArguments,
                          default_data_collator)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import detweights  # noqa: E402

SEED = 20261201  # the detweights seed of every decoder model
MODES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
B, T = 2, 12
LENGTHS = [12, 9]

# transformers 4 style config.json dicts (what Hub checkpoints hold). Sizes: hidden ≤ 64, vocab ≤ 256.
CASES = {
    "llama_rope3": dict(
        grads=("fp32", "bf16", "fp16"),
        config={"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 64, "hidden_size": 32,
                "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4,
                "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 64, "rms_norm_eps": 1e-5,
                "rope_theta": 500000.0,
                "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 16},
                "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
                "bos_token_id": 1, "eos_token_id": 2}),
    "qwen2_bias": dict(
        grads=("fp32",),
        config={"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "vocab_size": 64, "hidden_size": 32,
                "intermediate_size": 48, "num_hidden_layers": 1, "num_attention_heads": 2,
                "num_key_value_heads": 1, "max_position_embeddings": 64, "rms_norm_eps": 1e-6,
                "rope_theta": 1000000.0, "rope_scaling": None, "hidden_act": "silu", "tie_word_embeddings": True,
                "use_sliding_window": False, "sliding_window": 32, "pad_token_id": 0}),
    "qwen3_qknorm": dict(
        grads=("fp32",),
        config={"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "vocab_size": 64, "hidden_size": 32,
                "intermediate_size": 48, "num_hidden_layers": 1, "num_attention_heads": 4,
                "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 64, "rms_norm_eps": 1e-6,
                "rope_theta": 1000000.0, "hidden_act": "silu", "tie_word_embeddings": True,
                "attention_bias": False, "use_sliding_window": False}),
    "mistral": dict(
        grads=("fp32",),
        config={"model_type": "mistral", "architectures": ["MistralForCausalLM"], "vocab_size": 64,
                "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 1, "num_attention_heads": 4,
                "num_key_value_heads": 2, "max_position_embeddings": 64, "rms_norm_eps": 1e-5,
                "rope_theta": 10000.0, "sliding_window": 64, "hidden_act": "silu", "tie_word_embeddings": False}),
}


def gpt2_cases():
    """Hook for the GPT-2 family (decoder-ops adds GPT2LMHeadModel cases here: name -> dict(grads, config))."""
    return {}


def decoder_values(name, shape):
    """detweights.values with the decoder rule: RMSNorm weights (…norm.weight) are 1 + 0.1·f."""
    if name.endswith("norm.weight"):
        f = detweights.uniform(SEED, name, int(np.prod(shape)))
        return (1.0 + f * 0.1).astype(np.float32).reshape(tuple(shape))
    return detweights.values(SEED, name, shape)


def build(config_dict, device):
    d = dict(config_dict)
    mt = d.pop("model_type")
    try:
        config = AutoConfig.for_model(mt, **d)
    except (AttributeError, TypeError):
        config = transformers.CONFIG_MAPPING[mt](**d)
    config._attn_implementation = "eager"
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(decoder_values(name, p.shape)))
    return model.float().to(device).train()


def make_inputs(vocab, rng, pad_id=None):
    ids = np.zeros((B, T), np.int64)
    mask = np.zeros((B, T), np.int64)
    labels = np.full((B, T), -100, np.int64)
    for i, n in enumerate(LENGTHS):
        ids[i, :n] = rng.integers(1, vocab, size=n)
        mask[i, :n] = 1
        labels[i, :n] = ids[i, :n]
    labels[1, 4] = -100  # one ignored target inside a row
    if pad_id is not None:
        ids[0, 3] = pad_id  # the padding id as a real token: its embedding row gets no lookup gradient
        labels[0, 3] = pad_id
        ids[1, LENGTHS[1]:] = pad_id
    return {"input_ids": ids, "attention_mask": mask}, labels


def run(model, inputs, labels, mode, device):
    model.zero_grad(set_to_none=True)
    feed = {k: torch.from_numpy(v).to(device) for k, v in inputs.items()}
    lab = torch.from_numpy(labels).to(device)
    ctx = contextlib.nullcontext() if MODES[mode] is None else torch.autocast(device.type, dtype=MODES[mode])
    with ctx:
        out = model(**feed, labels=lab)
    out.loss.backward()
    grads = {n: p.grad.detach().float().cpu().numpy() for n, p in model.named_parameters() if p.grad is not None}
    return out.logits.detach().float().cpu().numpy(), float(out.loss.detach().float()), grads


def rel_err(a, b):
    ref = float(np.max(np.abs(b))) if b.size else 0.0
    diff = float(np.max(np.abs(a - b))) if b.size else 0.0
    return diff / ref if ref > 0 else diff


def versions():
    import peft
    return json.dumps({"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__,
                       "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"})


def golden_case(out_dir, name, case, device):
    rng = np.random.default_rng(4321)
    pad = case["config"].get("pad_token_id")
    inputs, labels = make_inputs(case["config"]["vocab_size"], rng, pad)
    model = build(case["config"], device)
    out = {f"inputs/{k}": v for k, v in inputs.items()}
    out["inputs/labels"] = labels
    for mode in MODES:
        logits, loss, grads = run(model, inputs, labels, mode, device)
        out[f"{mode}/logits"] = logits.astype(np.float32)
        out[f"{mode}/loss"] = np.array([loss], np.float32)
        if mode in case["grads"]:
            for n, g in grads.items():
                out[f"{mode}/grad/{n}"] = g.astype(np.float32)
        print(f"{name} {mode}: loss {loss:.6f}")
    meta = {"config": model.config.to_json_string(use_diff=False), "seed": str(SEED), "versions": versions()}
    save_file(out, os.path.join(out_dir, name + ".safetensors"), metadata=meta)
    return model, inputs


def v4_layout(path):
    """Rewrite a transformers 5 config.json in the v4 layout (rope_theta/rope_scaling top level, torch_dtype)."""
    with open(path) as f:
        c = json.load(f)
    rp = c.pop("rope_parameters", None) or {}
    c["rope_theta"] = rp.pop("rope_theta", c.get("rope_theta", 10000.0))
    c["rope_scaling"] = None if rp.get("rope_type", "default") == "default" else rp
    c["torch_dtype"] = c.pop("dtype", "float32")
    with open(path, "w") as f:
        json.dump(c, f, indent=2)


def checkpoints(out_dir, models, device):
    ck_dir = os.path.join(out_dir, "ckpt")
    shutil.rmtree(ck_dir, ignore_errors=True)
    os.makedirs(ck_dir)
    specs = [("llama_v5_bf16", "llama_rope3", torch.bfloat16, None, False),
             ("qwen2_v4_f32", "qwen2_bias", torch.float32, None, True),
             ("mistral_sharded_f16", "mistral", torch.float16, "20KB", False)]
    out = {}
    for name, case, dtype, shard, v4 in specs:
        model, inputs = models[case]
        d = os.path.join(ck_dir, name)
        m = AutoModelForCausalLM.from_config(model.config, attn_implementation="eager")
        m.load_state_dict(model.state_dict())
        m = m.to(dtype)
        kw = {"max_shard_size": shard} if shard else {}
        m.save_pretrained(d, **kw)
        if v4:
            v4_layout(os.path.join(d, "config.json"))
        back = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").to(device)
        back.eval()
        with torch.no_grad():
            feed = {k: torch.from_numpy(v).to(device) for k, v in inputs.items()}
            out[f"{name}/logits"] = back(**feed).logits.float().cpu().numpy()
        print(f"checkpoint {name}: {sorted(os.listdir(d))}")
    save_file(out, os.path.join(out_dir, "checkpoints.safetensors"), metadata={"versions": versions()})


def peft_goldens(out_dir, model, inputs, device):
    from peft import LoraConfig, get_peft_model
    pdir = os.path.join(out_dir, "peft")
    shutil.rmtree(pdir, ignore_errors=True)
    out = {}
    feed = {k: torch.from_numpy(v).to(device) for k, v in inputs.items()}
    for name, cfg in [("qv", LoraConfig(task_type="CAUSAL_LM", r=4, lora_alpha=8, lora_dropout=0.0)),
                      ("all", LoraConfig(task_type="CAUSAL_LM", r=2, lora_alpha=4, lora_dropout=0.0,
                                         target_modules="all-linear"))]:
        base = build(CASES["llama_rope3"]["config"], device)
        pm = get_peft_model(base, cfg)
        g = torch.Generator().manual_seed(7)
        with torch.no_grad():
            for n, p in pm.named_parameters():
                if "lora_B" in n:
                    p.copy_(torch.randn(p.shape, generator=g) * 0.1)
        pm.eval()
        with torch.no_grad():
            out[f"{name}/logits"] = pm(**feed).logits.float().cpu().numpy()
        pm.save_pretrained(os.path.join(pdir, name))
        if name == "all":
            merged = pm.merge_and_unload()
            with torch.no_grad():
                out[f"{name}/merged_logits"] = merged(**feed).logits.float().cpu().numpy()
        print(f"peft {name}: {sorted(os.listdir(os.path.join(pdir, name)))}")
    save_file(out, os.path.join(out_dir, "peft.safetensors"), metadata={"versions": versions()})


def check_tune(out_dir, tune_dir, device):
    from peft import PeftModel
    base = build(CASES["llama_rope3"]["config"], device)
    res = {"dir": tune_dir}
    try:
        pm = PeftModel.from_pretrained(base, tune_dir)
        pm.eval()
        want = load_file(os.path.join(tune_dir, "tune_logits.safetensors"))
        inputs = {k: torch.from_numpy(want["inputs/" + k].astype(np.int64)).to(device)
                  for k in ("input_ids", "attention_mask")}
        with torch.no_grad():
            got = pm(**inputs).logits.float().cpu().numpy()
        res["logits_rel_err"] = rel_err(got, want["logits"])
        res["peft_type"] = str(pm.peft_config["default"].peft_type)
        res["task_type"] = str(pm.peft_config["default"].task_type)
        res["target_modules"] = sorted(pm.peft_config["default"].target_modules)
        res["ok"] = res["logits_rel_err"] < 1e-5
    except Exception as e:  # noqa: BLE001 - the report says what failed
        res["error"] = repr(e)
        res["ok"] = False
    print("peft loads tune:", res)
    with open(os.path.join(out_dir, "peft_loads_tune.json"), "w") as f:
        json.dump(res, f, indent=1)


class TokenDataset(Dataset):
    def __init__(self, data):
        self.data = data

    def __len__(self):
        return len(self.data["input_ids"])

    def __getitem__(self, i):
        return {k: torch.tensor(v[i]) for k, v in self.data.items()}


class OrderedTrainer(Trainer):
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
    def __init__(self):
        self.trainer, self.scales = None, []

    def on_step_begin(self, args, state, control, **kwargs):
        scaler = getattr(self.trainer.accelerator, "scaler", None)
        self.scales.append(float(scaler.get_scale()) if scaler is not None else 1.0)


def trainer_data(n, vocab=64, t=16):
    rng = np.random.default_rng(99)
    ids = np.zeros((n, t), np.int64)
    mask = np.zeros((n, t), np.int64)
    labels = np.full((n, t), -100, np.int64)
    for i in range(n):
        k = int(rng.integers(6, t + 1))
        ids[i, :k] = rng.integers(1, vocab, size=k)
        mask[i, :k] = 1
        labels[i, 1:k] = ids[i, 1:k]
    return {"input_ids": ids.tolist(), "attention_mask": mask.tolist(), "labels": labels.tolist()}


def trainer_golden(out_dir, device):
    steps, batch = 30, 4
    data = trainer_data(steps * batch * 2)
    golden = {"meta": {"script": "tools/reference/decoder_goldens.py", "versions": json.loads(versions()),
                       "model": "llama_rope3", "per_device_train_batch_size": batch, "max_steps": steps,
                       "learning_rate": 1e-3, "lr_scheduler_type": "constant", "warmup_steps": 0,
                       "weight_decay": 0.0, "max_grad_norm": 1.0, "seed": 42, "optim": "adamw_torch_fused",
                       "order": "dataset", "attn_implementation": "eager"},
              "data": data}
    runs = [("fp32", 1), ("bf16", 1), ("fp16", 1), ("fp32_ga2", 2)]
    with tempfile.TemporaryDirectory() as work:
        for key, ga in runs:
            mode = key.split("_")[0]
            random.seed(42)
            np.random.seed(42)
            torch.manual_seed(42)
            model = build(CASES["llama_rope3"]["config"], device)
            args = TrainingArguments(
                output_dir=os.path.join(work, key), per_device_train_batch_size=batch,
                gradient_accumulation_steps=ga, learning_rate=1e-3, lr_scheduler_type="constant", warmup_steps=0,
                weight_decay=0.0, max_grad_norm=1.0, max_steps=steps, logging_steps=1, save_strategy="no",
                eval_strategy="no", report_to="none", disable_tqdm=True, seed=42, fp16=(mode == "fp16"),
                bf16=(mode == "bf16"), use_cpu=(device.type == "cpu"), dataloader_drop_last=False)
            rec = ScaleRecorder()
            tr = OrderedTrainer(model=model, args=args, train_dataset=TokenDataset(data),
                                data_collator=default_data_collator, callbacks=[rec])
            rec.trainer = tr
            tr.train()
            logs = [e for e in tr.state.log_history if "loss" in e and "train_loss" not in e]
            golden[key] = {"gradient_accumulation_steps": ga, "loss": tr.step_losses,
                           "log_loss": [e["loss"] for e in logs],
                           "grad_norm": [float(e.get("grad_norm", float("nan"))) for e in logs],
                           "learning_rate": [e["learning_rate"] for e in logs]}
            if mode == "fp16":
                golden[key]["loss_scale"] = rec.scales[:steps]
            print(f"trainer {key}: loss {logs[0]['loss']:.5f} -> {logs[-1]['loss']:.5f}")
    with open(os.path.join(out_dir, "trainer_golden.json"), "w") as f:
        json.dump(golden, f)
        f.write("\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--check-tune", default="")
    p.add_argument("--skip-trainer", action="store_true")
    p.add_argument("--only-check", action="store_true", help="run --check-tune alone")
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device(a.device)
    os.makedirs(a.out_dir, exist_ok=True)
    failed = []

    def phase(name, fn, *args):
        try:
            return fn(*args)
        except Exception:  # noqa: BLE001 - report and go on with the other phases
            import traceback
            traceback.print_exc()
            failed.append(name)
            return None

    if a.only_check:
        phase("check-tune", check_tune, a.out_dir, a.check_tune, device)
    else:
        models = {}
        for name, case in {**CASES, **gpt2_cases()}.items():
            r = phase("case " + name, golden_case, a.out_dir, name, case, device)
            if r is not None:
                models[name] = r
        phase("checkpoints", checkpoints, a.out_dir, models, device)
        if "llama_rope3" in models:
            phase("peft", peft_goldens, a.out_dir, *models["llama_rope3"], device)
        if a.check_tune:
            phase("check-tune", check_tune, a.out_dir, a.check_tune, device)
        if not a.skip_trainer:
            phase("trainer", trainer_golden, a.out_dir, device)
    if failed:
        print("FAILED phases:", ", ".join(failed))
        sys.exit(1)
    print("all phases ok")


if __name__ == "__main__":
    main()
