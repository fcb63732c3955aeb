package tokenizers

// LoadForTransformers loads the tokenizer.json in dir (or the file) the way transformers 5's AutoTokenizer
// builds it from the same files, which is what trainers written against transformers (TRL) feed the model.
// The two differ for one layout: a tokenizer_config.json naming tokenizer_class LlamaTokenizer or
// LlamaTokenizerFast (Llama 2, Mistral v0.1) with the SentencePiece-era pipeline of a Prepend("▁") + Replace
// normalizer and no pre-tokenizer. transformers 5 rebuilds that class around the file's vocabulary and merges
// with a Metaspace("▁", prepend_scheme "always", split false) pre-tokenizer and no normalizer, so a piece that
// already starts with a space gets no second "▁" (`<s> [INST]` is <s> ▁[ ... rather than the file's
// <s> ▁ ▁[ ...), and text right after a special token gets one (`<s>[INST]` is <s> ▁[ ...). The ids of
// testdata/chat/goldens.json (apply_chat_template(tokenize=True) for Llama 2 and Mistral-style templates) and
// testdata/bpe/goldens/transformers_autotokenizer.json pin this. Every other tokenizer is the file's own.
func LoadForTransformers(path string) (*Tokenizer, error) {
	t, err := Load(path)
	if err != nil {
		return nil, err
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		return nil, err
	}
	if (cfg.TokenizerClass == "LlamaTokenizer" || cfg.TokenizerClass == "LlamaTokenizerFast") && t.pre == nil && isPrependReplace(t.norm) {
		t.norm = nil
		t.pre = preMetaspace{replacement: "\u2581", scheme: prependAlways, split: false}
		var normToks []*addedToken
		for _, a := range t.added {
			if a.normalized {
				normToks = append(normToks, a)
			}
		}
		t.normed = newAddedMatcher(normToks, func(a *addedToken) string { return a.content })
		t.rebuilt = "transformers " + cfg.TokenizerClass + ": Metaspace(prepend_scheme always, split false) instead of the Prepend/Replace normalizer"
	}
	return t, nil
}

// isPrependReplace reports whether n is the Sequence[Prepend("▁"), Replace(" ", "▁")] of Llama 2's file.
func isPrependReplace(n normalizer) bool {
	q, ok := n.(normSequence)
	if !ok || len(q) != 2 {
		return false
	}
	p, ok1 := q[0].(normPrepend)
	r, ok2 := q[1].(normReplace)
	return ok1 && ok2 && p.prefix == "\u2581" && r.re == nil && r.literal == " " && r.content == "\u2581"
}

// Rebuilt says how LoadForTransformers changed the file's pipeline; "" when it did not.
func (t *Tokenizer) Rebuilt() string { return t.rebuilt }
