#!/usr/bin/env python3
"""Write safetensors/config fixtures with the real Hugging Face stack, for tune's loaders tests.

Usage (on the GPU machine, which has torch, transformers and safetensors; no network needed):

    python3 tools/reference/make_safetensors_fixtures.py testdata/safetensors/reference

It writes, under OUTDIR (about 0.5 MB in all), deterministically (torch.manual_seed(0)):

  b22.safetensors          safetensors.torch.save_file({"test": int32 zeros [2,2]}): the smallest valid file, 88 bytes (safetensors/src/tensor.rs)
  mixed.safetensors        one tensor of each dtype tune writes (I64, F32, empty F32, 0-dim F32, BF16, F16),
                           metadata {"format": "pt"}: the reference writer's order and offsets
  seqcls/                  BertForSequenceClassification.save_pretrained (3 labels, hidden 32, 2 layers)
  seqcls-sharded/          the same model with max_shard_size="20KB": shards + model.safetensors.index.json
  seqcls-bf16/, seqcls-fp16/  the same model cast with .to(torch.bfloat16 / torch.float16)
  mlm/                     BertForMaskedLM.save_pretrained: cls.predictions.decoder.weight is tied, not saved
  manifest.json            versions, the mixed file's values, per-tensor checks (dtype, shape, first values and
                           float64 sum of the F32 model), the shared-memory error text (B23)

The Go tests that read these files (loaders/safetensors_reference_test.go) skip, naming this script, until
OUTDIR exists in the repository.
"""

import json
import os
import sys

import safetensors
import torch
import transformers
from safetensors.torch import save_file
from transformers import BertConfig, BertForMaskedLM, BertForSequenceClassification


def tiny_config(**kw):
    return BertConfig(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        **kw,
    )


def tensor_checks(model):
    checks = {}
    for name, t in model.state_dict().items():
        flat = t.detach().reshape(-1)
        checks[name] = {
            "dtype": str(t.dtype).replace("torch.", ""),
            "shape": list(t.shape),
            "first": [float(v) for v in flat[:8].float().tolist()],
            "sum": float(flat.double().sum().item()),
        }
    return checks


def written(path):
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def main(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    manifest = {
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "safetensors": safetensors.__version__,
        }
    }

    # B22: the exact 88-byte file.
    p = os.path.join(out, "b22.safetensors")
    save_file({"test": torch.zeros(2, 2, dtype=torch.int32)}, p)
    written(p)

    # One tensor per dtype tune writes, to pin the reference order and offsets.
    mixed = {
        "w_ids": torch.tensor([-1, 0, 1 << 40], dtype=torch.int64),
        "a_f32": torch.tensor([-2.25, 3.0e-8], dtype=torch.float32),
        "b_empty": torch.zeros(0, 4, dtype=torch.float32),
        "s_scalar": torch.tensor(65520.0, dtype=torch.float32),
        "c_bf16": torch.tensor([3.0e-8], dtype=torch.float32).to(torch.bfloat16),
        "d_half": torch.tensor([1.5, -2.25], dtype=torch.float32).to(torch.float16),
    }
    p = os.path.join(out, "mixed.safetensors")
    save_file(mixed, p, metadata={"format": "pt"})
    written(p)
    with open(p, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    manifest["mixed"] = {
        "header_length": n,
        "offsets": {k: v["data_offsets"] for k, v in header.items() if k != "__metadata__"},
        "values": {k: [float(x) for x in v.reshape(-1).double().tolist()] for k, v in mixed.items()},
    }

    # B23: the reference refuses tensors that share memory.
    shared = torch.zeros(4, 4)
    refused = os.path.join(out, "never-written.safetensors")
    try:
        save_file({"a": shared, "b": shared[1:]}, refused)
        manifest["shared_memory_error"] = None
        os.remove(refused)
    except RuntimeError as e:
        manifest["shared_memory_error"] = next((l.strip() for l in str(e).splitlines() if l.strip()), "")

    # A fine-tuning model, saved whole, sharded, and cast to half precision.
    cfg = tiny_config(
        id2label={0: "NEG", 1: "NEU", 2: "POS"},
        label2id={"NEG": 0, "NEU": 1, "POS": 2},
        architectures=["BertForSequenceClassification"],
    )
    model = BertForSequenceClassification(cfg).eval()
    for sub, kwargs in [("seqcls", {}), ("seqcls-sharded", {"max_shard_size": "20KB"})]:
        d = os.path.join(out, sub)
        model.save_pretrained(d, **kwargs)
        for name in sorted(os.listdir(d)):
            written(os.path.join(d, name))
    manifest["seqcls"] = tensor_checks(model)
    for sub, dtype in [("seqcls-bf16", torch.bfloat16), ("seqcls-fp16", torch.float16)]:
        d = os.path.join(out, sub)
        half = BertForSequenceClassification(cfg).eval()
        half.load_state_dict(model.state_dict())
        half = half.to(dtype)
        half.save_pretrained(d)
        for name in sorted(os.listdir(d)):
            written(os.path.join(d, name))

    # A masked-LM model: the decoder weight is tied to the word embeddings and not written.
    mlm = BertForMaskedLM(tiny_config(architectures=["BertForMaskedLM"])).eval()
    d = os.path.join(out, "mlm")
    mlm.save_pretrained(d)
    for name in sorted(os.listdir(d)):
        written(os.path.join(d, name))
    manifest["mlm"] = {
        "state_dict_keys": sorted(mlm.state_dict().keys()),
        "tied_same_storage": mlm.cls.predictions.decoder.weight.data_ptr()
        == mlm.bert.embeddings.word_embeddings.weight.data_ptr(),
    }

    p = os.path.join(out, "manifest.json")
    with open(p, "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
    written(p)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUTDIR")
    main(sys.argv[1])
