// Package datasets adapts tune's data to the Trainer: Text is a labelled (or unlabelled) text-classification
// file read by loaders.LoadDataset with the loaders.Collator that tokenizes, truncates and pads its batches; SFT
// is a causal LM's supervised fine-tuning data (package sft), one row per example or per packed row. Both
// satisfy trainer.Dataset through their Len and Batch methods, and Text chooses its epoch order
// (trainer.Orderer) for group_by_length.
//
// The package sits between the loaders (files, tokenizers) and the recipes (which map a recipe's data section
// onto these options and name its keys in errors); it imports neither the trainer nor any model, so a Go
// program can read data for its own training loop:
//
//	tok, err := loaders.LoadTokenizer("testdata/tiny-bert")
//	train, err := datasets.LoadText("train.tsv", tok, datasets.TextOptions{MaxLength: 128})
//	batch, err := train.Batch([]int{0, 1, 2, 3})  // input ids, masks and labels, padded to the longest
//	order, err := train.EpochOrder(0, true, 42, 8) // what the Trainer visits in epoch 0
//	tr, err := trainer.New(model, args, train, nil) // *Text is a trainer.Dataset
//
// Labels follow Hugging Face's run_glue (transformers/examples/pytorch/text-classification/run_glue.py):
// without TextOptions.Label2ID, string labels are numbered in sorted order and integer labels are class ids;
// with it (a model's label2id), the file's labels map through the model's classes.
package datasets
