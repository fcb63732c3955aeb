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
// target_modules follows PEFT's two rules (PEFT's target_modules matching, check_target_module_exists in peft/tuners/tuners_utils.py): a list matches module paths by exact name or "."+name
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
// # Adapting and training a model
//
// Apply is PEFT's get_peft_model: it normalizes and validates the config, puts a *Linear in place of every
// targeted projection (A and B drawn from seed), and freezes everything else but modules_to_save and the
// biases cfg.Bias names. The result, a *Model, is a trainer.Model, so the trainer trains the adapters alone:
//
//	base, _, err := bert.LoadPretrained(dir, b, transformer.LoadOptions{NumLabels: 2})
//	m, err := lora.Apply(base, cfg, seed)          // errors wrap ErrInvalidConfig or ErrNoTargets
//	for _, w := range m.Warnings { log.Print(w) } // what Normalize adjusted
//	fmt.Println(lora.TrainableReport(m)) // "trainable params: 296,450 || all params: ... || trainable%: 0.2700"
//	t, err := trainer.New(m, args, train, eval)    // Save and checkpoints write the adapter, not the base
//
// CheckRank makes Apply's checks of r before the model is loaded, on one built from its config on the meta
// backend (transformer.Skeleton): a rank whose adapters exceed host memory is refused, and a rank above
// min(in, out) of a targeted projection, which PEFT accepts (it checks only r > 0) and Apply too, is a
// warning: B·A has rank at most min(in, out). A recipe's Validate calls it, so tune validate and tune
// finetune agree.
//
// Model.Targets lists the adapted module paths, Model.Adapter(path) gives one adapter, and
// Model.TrainableParameters the counts TrainableReport prints (PEFT's print_trainable_parameters).
//
// # Saving, loading and merging
//
// An adapter is saved as PEFT saves it: adapter_config.json (WriteAdapterConfig, ReadAdapterConfig) beside
// adapter_model.safetensors with PEFT's tensor names (peft/utils/save_and_load.py). Save also writes the base model's
// config.json with the run's label names (id2label/label2id): PEFT ignores it, AutoConfig.from_pretrained reads
// it, and SavedLabels gives the names to load the base with before LoadAdapter, PEFT's
// PeftModel.from_pretrained:
//
//	labels, err := lora.SavedLabels(adapterDir)
//	base, _, err := bert.LoadPretrained(baseDir, b, transformer.LoadOptions{Labels: labels})
//	m, err := lora.LoadAdapter(base, adapterDir)   // strict: a missing or mis-shaped adapter tensor is an error
//
// Merge folds scaling·B·A into each base weight (merge_adapter) so inference costs the base alone, Unmerge takes
// it out again, and MergeAndUnload (merge_and_unload) returns the plain base model with transformers' names,
// whose Save writes a checkpoint that loads without PEFT:
//
//	plain, err := m.MergeAndUnload()               // m must not be used afterwards
//	err = plain.Save(outDir)                       // config.json + model.safetensors
//
// # Full control
//
// Base is the interface Apply adapts (*bert.BertForSequenceClassification implements it); NewLinear
// wraps one transformer.Linear by hand, and AddDelta applies W += alpha·B·A on a backend, the merge's kernel.
package lora
