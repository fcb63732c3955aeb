// Package generate continues a prompt with a causal language model, as transformers' generate does for
// greedy search and for sampling (transformers/generation/utils.py, logits_process.py).
//
// Simplest use:
//
//	gc, _ := generate.ReadConfig(modelDir)              // generation_config.json: eos ids and defaults
//	out, err := generate.Generate(model, promptIDs, gc.Options(), func(id int32) error { ...; return nil })
//
// Greedy search (DoSample false) takes the arg-max of the last position's logits (the lowest id among equal
// maxima, as torch.argmax does). Sampling applies, in transformers' order, the temperature (logits / T), top-k
// (logits below the k-th largest become −Inf; ties with it are kept) and top-p (the smallest set of the most
// likely tokens whose probability reaches p, keeping at least one), then draws from the softmax with a
// seeded generator; the draws are reproducible for a seed but not PyTorch's (torch.multinomial uses
// another generator). Generation stops after MaxNewTokens tokens or at any of the EOS ids, which is kept in
// the output, as transformers keeps it.
//
// With Options.UseCache (Config.Options sets it, as transformers' use_cache defaults to true) a model that is
// a transformer.IncrementalDecoder (the Llama family and GPT-2, with or without LoRA adapters) decodes with a
// key/value cache sized by the request (prompt + MaxNewTokens − 1 positions): the prompt in one pass, then
// one token per pass. Without it each step runs the whole sequence again; both give the same tokens
// (TestCachedGreedyEqualsUncached), and BenchmarkGenerate measures the two. Stream (StreamText) prints the
// text of the tokens as they come, holding back an incomplete UTF-8 character.
package generate
