// Package loaders reads what users bring: safetensors checkpoints (single and sharded), Hugging Face config.json,
// tokenizers (tokenizer.json or vocab.txt, with Hugging Face parity), and labelled text datasets (TSV, CSV,
// JSONL), and turns examples into padded Batches. Everything here is host-side: no backend, no tensors on a
// device. bert.LoadPretrained and the recipes package put the pieces together; this is the tour of the
// pieces.
//
// # Checkpoints
//
// A checkpoint is read in four steps: open it, read its config, match its tensor names with what the model
// expects, and copy each tensor out.
//
//	ckpt, err := loaders.OpenCheckpoint(dir)       // model.safetensors, a shard index, or a .safetensors file
//	defer ckpt.Close()                             // memory-mapped: every header validated, no data read yet
//	cfg, err := loaders.ReadBertConfig(dir)        // config.json with transformers' defaults for absent keys
//	want := loaders.BertSequenceClassificationTensors(cfg)              // canonical names and shapes
//	source, report := loaders.MapBertCheckpoint(want, ckpt.Infos(), cfg) // expected name → checkpoint key
//	if err := report.Err(); err != nil { ... }     // missing or mis-shaped tensors, each named
//	for _, spec := range want {
//		key, ok := source[spec.Name] // absent for a tied tensor (the model re-ties it)
//		t, err := ckpt.Get(key)      // zero-copy HostTensor over the mapped file, valid until Close
//		err = t.Float32Into(dst)     // F32, F16 or BF16 widened exactly into dst (len t.NumElements())
//	}
//
// MapBertCheckpoint accepts what transformers accepts: keys with or without the "bert." prefix, legacy
// LayerNorm gamma/beta, tied MLM decoders; the LoadReport says what matched, what was renamed, ignored as
// harmless (position_ids buffers, pretraining heads), tied, missing, unexpected, mis-shaped or of a dtype that is
// not F32, F16 or BF16, and String prints it for people; Err wraps ErrMissingTensors, ErrShapeMismatch or
// ErrDTypeMismatch. SummarizeNames shortens long name
// lists by module ("bert.encoder.layer.2.* (16 tensors)").
//
// Writing is one call: WriteSafetensors(path, tensors, nil) lays the file out as the reference writer does
// (header padded to 8 bytes, tensors sorted by dtype and name, {"format": "pt"} metadata), through a temporary
// file renamed into place, and refuses tensors that share memory (ErrSharedMemory). NewHostTensor encodes
// []float32 values as F32, F16 or BF16 (round to nearest even).
//
// # Config
//
// BertConfig is config.json with transformers' field meanings and defaults (DefaultBertConfig is
// bert-base-uncased's). ReadBertConfig and ParseBertConfig check JSON types and label consistency, naming the
// file and key; judging the sizes as a model is bert.BertConfigFromHF's job. SetLabels names the classes
// (id2label and label2id), and WriteFile writes the file back as transformers does (sorted keys, indent 2),
// keeping the keys tune does not interpret (Extra) unchanged.
//
// # Tokenizers
//
//	tok, err := loaders.LoadTokenizer(dir)         // tokenizer.json, else vocab.txt (+ tokenizer_config.json)
//	enc, err := tok.Encode("a gripping film", loaders.EncodeOptions{MaxLength: 128})
//	enc.IDs, enc.TypeIDs, enc.AttentionMask        // [CLS] ... [SEP], as tokenizers 0.23 gives them
//	enc, err = tok.EncodePair("premise", "hypothesis", loaders.EncodeOptions{MaxLength: 128})
//
// The zero EncodeOptions is HF's default call (special tokens, no truncation, no padding); Truncation,
// TruncationSide, Padding, PadToMultipleOf and PaddingSide take HF's strategies. EncodeBatch encodes many
// inputs (with Padding PadLongest, padded to the longest). Ids match Hugging Face tokenizers 0.23 for
// BERT-family WordPiece tokenizers, normalization and added tokens included; github.com/sugarme/tokenizer v0.3.0's source lists where the
// underlying github.com/sugarme/tokenizer differs and tune does its own work.
//
// # Datasets and batches
//
//	ds, err := loaders.LoadDataset("train.tsv", loaders.DatasetOptions{})    // SST-2/GLUE columns by default
//	coll, err := loaders.NewCollator(tok, ds, loaders.CollatorOptions{MaxLength: 128, Cache: true})
//	order, err := loaders.EpochOrder(ds.Len(), epoch, loaders.SamplerOptions{Shuffle: true, Seed: 42})
//	for _, idx := range loaders.Batches(order, 32, false) {                 // the last batch may be short
//		b, err := coll.Collate(idx)              // *Batch: InputIDs, TokenTypeIDs, AttentionMask (B, T), Labels (B)
//	}
//
// DatasetOptions names the columns (by header or 0-based index), the format (by extension otherwise), the
// header, regression targets and a model's label2id; each malformed row is an error naming file:line. The
// Collator pads dynamically to the batch's longest example (DataCollatorWithPadding), rounded up to
// PadToMultipleOf. EpochOrder's shuffle is a function of (Seed, epoch) alone, so a resumed run draws the same
// order; GroupByLength orders examples as transformers' group_by_length does (Collator.Lengths gives the
// lengths).
package loaders
