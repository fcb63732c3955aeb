// Command tune fine-tunes Transformer models (fully or with LoRA adapters) in FP32, FP16 or BF16 mixed
// precision. Run `tune --help` for the commands.
//
// The main job trains a recipe and writes a Hugging Face model or a PEFT adapter into its output_dir:
//
//	tune finetune tiny                                      # the embedded tiny recipe, on the CPU
//	tune finetune recipes/bert.yaml model.path=checkpoints/bert-base-uncased lora.r=16
//	tune eval --model runs/bert-full --data dev.tsv         # loss, accuracy, F1, Matthews correlation
//	tune predict --model checkpoints/bert-base-uncased --adapter runs/bert-lora --input test.tsv --output preds.jsonl
//
// model.path, --model, --adapter and --tokenizer also take Hub ids (bert-base-uncased), read from the Hugging
// Face cache; download fills it from the Hub. Other commands: ls and cp list and copy the embedded recipes, validate checks a recipe and prints it
// resolved, inspect shows a checkpoint's or an adapter's tensors and config, tokenize prints token ids as
// Hugging Face tokenizers would, merge folds a LoRA adapter into its base model, bench times training steps
// per precision (bench report lines results up with PyTorch's), and env shows the machine and CUDA devices.
//
// Each command lives in its own file with an options struct, so its flags are parsed and checked without
// running it; main only calls run. Exit status: 0 success, 1 the command failed while running, 2 the input is
// wrong (flags, arguments, recipe keys or values, or the contents of a file it read: errors marked by
// internal/badinput, typed in the loaders, never matched by their text), 3 the requested device is not
// available, 130 interrupted by SIGINT, 143 by SIGTERM (128 + the signal).
package main
