// Package loaders reads what users bring: safetensors checkpoints (single and sharded), Hugging Face config.json,
// tokenizers (tokenizer.json or vocab.txt, with Hugging Face parity), and labelled text datasets (TSV, CSV,
// JSONL), and turns examples into padded Batches.
package loaders
