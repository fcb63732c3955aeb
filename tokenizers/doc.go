// Package tokenizers encodes text into token ids, and decodes ids back into text, exactly as Hugging Face
// tokenizers (0.23) does for the byte-pair-encoding tokenizer.json files of decoder models: byte-level BPE
// (GPT-2, Llama 3, Qwen2/2.5/3, SmolLM2) and SentencePiece-style BPE with byte fallback (Llama 2, Mistral).
//
// Simplest use:
//
//	tok, err := tokenizers.Load("path/to/model") // a tokenizer.json or the directory holding one
//	ids, err := tok.Encode("Hello world", true)  // true: add the post-processor's BOS/EOS
//	text := tok.Decode(ids, true)               // true: leave out special tokens
//
// The pipeline is the library's (tokenizers/src/tokenizer/mod.rs, encode_single_sequence):
//  1. added tokens (added_tokens of tokenizer.json) are split off the raw text first: those with
//     "normalized": false are matched on the raw text, leftmost-longest, honouring lstrip, rstrip and
//     single_word; the rest of the text is normalized and then searched for the "normalized": true ones;
//  2. the normalizer (NFC/NFD/NFKC/NFKD, Lowercase, Prepend, Replace, Strip, Sequence) runs on each piece;
//  3. the pre-tokenizer (Split with a regular expression or a string and any of its five behaviours,
//     ByteLevel with or without the GPT-2 regex, Metaspace, Digits, Sequence) cuts the pieces into words;
//  4. the BPE model (models/bpe/model.rs) turns each word into ids: ignore_merges, continuing_subword_prefix,
//     end_of_word_suffix, byte_fallback to <0xXX> tokens, unk_token with fuse_unk, and the merges applied
//     lowest rank first (leftmost first among equal ranks), as models/bpe/word.rs does;
//  5. the post-processor (TemplateProcessing, ByteLevel, Sequence) adds BOS/EOS and sets type ids.
//
// Decoding maps ids to tokens (unknown ids are dropped, special tokens too when asked) and runs the decoder
// chain (ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence); invalid UTF-8 that a partial
// sequence of byte tokens produces becomes U+FFFD, as the library's String::from_utf8_lossy does.
//
// tokenizer.json is decoded strictly: every key must be one the library writes for that component, and a
// component type this package does not implement is an error naming it and its place in the file
// (e.g. `pre_tokenizer.pretokenizers[1]: unsupported pre-tokenizer type "Punctuation"`). The file's
// "truncation" and "padding" blocks are read but not applied, as transformers replaces them on every call;
// callers truncate and pad. Regular expressions run on github.com/dlclark/regexp2, which has the lookahead
// (`\s+(?!\S)`) the models' patterns use and Go's regexp lacks.
//
// Input text must be valid UTF-8: Encode returns an error naming the byte offset of the first invalid byte
// (the library's Python and Rust APIs cannot even receive such text).
//
// LoadConfig reads tokenizer_config.json (special tokens, chat template, model_max_length) beside it.
package tokenizers
