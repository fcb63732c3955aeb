// Command maketiny writes tune's tiny embedded dataset: a synthetic English sentiment task and a WordPiece
// vocabulary built for it, deterministic from a seed.
//
//	go run ./tools/maketiny -out recipes/data/tiny    (what `make data` and `go generate ./recipes` run)
//
// Files written into -out: train.tsv and dev.tsv (header "sentence<TAB>label", 1 positive, 0 negative, as
// SST-2), vocab.txt (one token a line), tokenizer.json and tokenizer_config.json (BERT's pipeline, loadable by
// Hugging Face tokenizers and transformers).
//
// The sentences are templates over ~30 sentiment adjectives with negation ("was not very good" flips the
// label), contrasts where the second clause decides ("dull, but ... wonderful"), intensifiers and neutral
// distractor clauses, so no single word gives the label. Labels are balanced and no dev sentence appears in
// train. The same seed gives byte-identical files (math/rand/v2's PCG is a fixed algorithm).
package main
