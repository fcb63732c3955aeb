// Package lora adds low-rank adapters (LoRA, Hu et al. 2021) to a model's Linear layers the way Hugging Face
// PEFT 0.21 does, so adapters move between tune and PEFT unchanged.
//
// A Config says what to adapt, with PEFT's LoraConfig names and defaults:
//
//	cfg := lora.DefaultConfig()                  // r 8, lora_alpha 8, dropout 0, bias none
//	cfg.R, cfg.LoraAlpha = 8, 16                 // scaling = lora_alpha/r = 2
//	cfg.TargetModules = lora.TargetModules{Names: []string{"query", "value"}}
//	cfg.TaskType = lora.TaskSeqCls               // Normalize adds the classifier to modules_to_save
//	warnings := cfg.Normalize()                  // PEFT's silent adjustments, reported
//	if err := cfg.Validate(); err != nil { ... } // every bad field, by name
//
// target_modules follows PEFT's two rules (CASES B27): a list matches module paths by exact name or "."+name
// suffix, a single string is a regex that must match the whole path, and "all-linear" takes every Linear but
// the classification head. Config.Select applies them to a model's Linear paths and refuses a config that
// targets nothing.
//
// Each targeted Linear becomes an adapted layer whose base weight W is frozen (it gets no weight gradient) and
// whose A (r, in) and B (out, r) are FP32 master weights:
//
//	y = x·Wᵀ + b + scaling · dropout(x)·Aᵀ·Bᵀ
//
// Under FP16/BF16 autocast A and B are cast to half for the GEMMs like every weight; their gradients are FP32.
// Merging adds scaling·B·A to W (and unmerging subtracts it), which gives a plain checkpoint.
//
// An adapter is saved as PEFT saves it: adapter_config.json (WriteAdapterConfig, ReadAdapterConfig) beside
// adapter_model.safetensors with PEFT's tensor names (FACTS §6.3). Save also writes the base model's
// config.json with the run's label names (id2label/label2id): PEFT ignores it, AutoConfig.from_pretrained reads
// it, and SavedLabels gives the names to load the base with before LoadAdapter.
package lora
