// Package sft turns JSONL files of supervised fine-tuning data into token ids, labels and batches for a
// causal language model, the way TRL's SFTTrainer prepares them (trl/trainer/sft_trainer.py), so that a
// decoder fine-tuned by tune sees what it would see under TRL.
//
// Simplest use:
//
//	tok, _ := tokenizers.LoadForTransformers(dir)
//	cfg, _ := tokenizers.LoadConfig(dir)
//	tmpl, _ := chat.FromConfig(cfg) // only needed for conversational data
//	ds, err := sft.Load("train.jsonl", sft.Tokenizer{Tok: tok, Config: cfg, Template: tmpl}, sft.Options{})
//	rows := ds.Rows(opts)                       // one example per row, or packed
//	batch := sft.Collate(rows[:8], padID)        // a loaders.Batch for the model contract
//
// The three formats are TRL's, chosen by Options.Format or detected from the first record's keys:
//   - {"text": "..."}: language modelling; every token is supervised. EOS is appended when the text does
//     not already end with it.
//   - {"prompt": "...", "completion": "..."}: only the completion (and the EOS appended to it) is supervised
//     (completion_only_loss, TRL's default); the prompt is the ids of the prompt alone, and the full
//     example is the prompt and completion tokenized together, as TRL does. Prompt and completion may also
//     be lists of messages (conversational prompt-completion): the prompt is rendered with the chat
//     template and add_generation_prompt, the whole with the completion appended.
//   - {"messages": [{"role", "content"}, ...]}: the conversation rendered with the chat template and
//     tokenized without added special tokens (apply_chat_template(tokenize=True)); with assistant_only_loss
//     (the default here, see Options) only the assistant turns are supervised. The turns are found by
//     rendering conversation prefixes: the tokens of messages[:i] with add_generation_prompt are the part
//     before assistant turn i, those of messages[:i+1] end it; no {% generation %} markers are needed.
//
// Labels are the input ids where supervised and −100 elsewhere. The EOS id is always supervised, also when
// the pad token is the EOS token (padding is marked by the attention mask and −100 labels, never by
// comparing ids with the pad id). Examples longer than max_length (1024 by default, TRL's) are cut at the
// end; the count of cut examples is reported, and an example left with no supervised token is an error
// naming its file and line.
//
// Packing (best-fit decreasing, TRL's "bfd" strategy) puts several examples into one row of at most
// max_length tokens: examples are taken longest first and each goes into the row with the least room left
// that still fits it. Position ids restart at 0 for each example and segment ids (1, 2, ... per row; 0 for
// padding) confine attention to the example, so a packed example's loss equals its unpacked loss; the
// first label of every packed example is −100, so no example is trained to predict the next one's start.
package sft
