// Package recipes reads tune's YAML recipes: what to train (a Hugging Face checkpoint or a new model), on
// which data, with or without LoRA, with which TrainingArguments, on which device. It is the one place where a
// configuration reaches into layers: everything below it takes plain Go values.
//
// # Simplest use
//
// Load a recipe, build it, train; this is what `tune finetune` does:
//
//	r, err := recipes.Load("recipes/bert.yaml", []string{"training.learning_rate=2e-5", "lora.r=16"})
//	if err == nil {
//		err = r.CheckFiles()                         // every input exists; every problem at once
//	}
//	b, err := recipes.OpenDevice(r.Device)            // "auto", "cpu", "cuda" or "cuda:N"
//	run, err := recipes.Build(r, b)                   // tokenizer, datasets, model (LoRA-adapted or not), Trainer
//	for _, n := range run.Notices { log.Print(n) }    // freshly initialised head, unused checkpoint tensors
//	out, err := run.Trainer.Train(ctx)
//	err = run.SaveModel(r.Training.OutputDir) // config.json + model.safetensors (or the PEFT adapter) + tokenizer
//
// A recipe is a file or the name of one embedded in the binary (List, Lookup): Load("tiny", nil) runs the
// bundled tiny recipe from any directory, its data unpacked into the user's cache directory. Each embedded
// recipe's Info says which inputs (Needs) it expects as overrides.
//
// # Decoding and validation
//
// Load decodes strictly: an unknown key is an error naming the file, the line, the key and the closest valid
// key ("recipes/x.yaml:12: unknown key 'learnig_rate' in training; did you mean 'learning_rate'?"), a value of
// the wrong type names its line, and the whole recipe is validated (trainer.TrainingArguments.Validate,
// lora.Config.Validate, the model, data and device sections) before anything is created. Each problem is a
// *Problem (Pos, Key, Msg) wrapping ErrInvalid, and all are reported at once. Overrides are dotted key=value
// pairs whose values are parsed as YAML. Relative paths written in a recipe resolve against the recipe's
// directory; paths given in overrides resolve against the working directory. CheckFiles then checks that the
// inputs exist, that a new model's vocab_size covers the tokenizer, and that output_dir does not hold the
// inputs.
//
// Numbers follow YAML 1.2 (go.yaml.in/yaml/v3): 1e-5, 2e-5, 5E-4, 3.e-4 and .5e-3 are floats (PyYAML reads
// some of them as strings, YAML 1.2 floats such as 1e-5, yaml.v3; PyYAML's YAML 1.1 reads them as strings); a quoted "1e-5" is a string and is an error in a number field.
//
// # The sections
//
// model: a checkpoint directory (model.path, loaded with bert.LoadPretrained) or a new model
// (model.config, a ModelConfig with transformers' BertConfig keys, initialised from training.seed).
// tokenizer: a directory or file for loaders.LoadTokenizer, by default the model's directory. data: the
// train, eval and test files and how to read and batch them (Data: columns, format, max_length,
// pad_to_multiple_of, group_by_length). lora: PEFT's LoraConfig (lora.Config); its presence, even empty,
// selects LoRA. training: trainer.TrainingArguments under HF's names. device: where to run.
//
// # Full control
//
// Build returns a Run whose parts can be used alone: Run.Model (the model the Trainer trains: the BERT itself
// or a *lora.Model), Run.Base (the BERT), Run.Tokenizer, Run.Train/Eval/Test (datasets.Text: a
// loaders.Dataset with its Collator, satisfying trainer.Dataset) and Run.Trainer. OpenModel loads a trained
// model (and optionally a PEFT adapter on top) for evaluation and prediction, with its labels final, as
// `tune eval` and `tune predict` do. Decode reads a recipe from bytes, Marshal writes one back.
package recipes
