package loaders

// postProcessor adds the special tokens around the encoded sequences: HF's TemplateProcessing
// (tokenizers/src/processors/template.rs), which transformers writes for BERT as
// single "[CLS]:0 $A:0 [SEP]:0" and pair "[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1", and the older BertProcessing,
// which behaves the same when special tokens are added.
type postProcessor struct {
	single, pair []templatePiece
	specials     map[string]specialToken
	// bertProcessing: without special tokens the sequences keep the type ids the model gave them (0), as HF's
	// BertProcessing returns the encodings untouched; a template sets $B's type id even then.
	bertProcessing bool
}

// templatePiece is a special token (special != "") or sequence A (seq 0) / B (seq 1), with its type id.
type templatePiece struct {
	special string
	seq     int
	typeID  int32
}

// specialToken is an entry of TemplateProcessing's "special_tokens": one name may stand for several ids.
type specialToken struct {
	ids    []int32
	tokens []string
}

// bertPostProcessor returns the post-processor of a BERT tokenizer built from vocab.txt.
func bertPostProcessor(cls, sep string, clsID, sepID int32) *postProcessor {
	return &postProcessor{
		single: []templatePiece{{special: cls}, {seq: 0}, {special: sep}},
		pair: []templatePiece{{special: cls}, {seq: 0}, {special: sep},
			{seq: 1, typeID: 1}, {special: sep, typeID: 1}},
		specials: map[string]specialToken{
			cls: {ids: []int32{clsID}, tokens: []string{cls}},
			sep: {ids: []int32{sepID}, tokens: []string{sep}},
		},
	}
}

// numSpecial is HF's added_tokens(is_pair): how many ids the template adds.
func (p *postProcessor) numSpecial(pair bool) int {
	pieces := p.single
	if pair {
		pieces = p.pair
	}
	n := 0
	for _, pc := range pieces {
		if pc.special != "" {
			n += len(p.specials[pc.special].ids)
		}
	}
	return n
}

// postProcess builds the final encoding from the sequence encodings a and b (b nil for a single sequence).
func (t *Tokenizer) postProcess(a, b *Encoding, addSpecial bool) *Encoding {
	p := t.post
	if p == nil || (!addSpecial && p.bertProcessing) {
		out := concatEncodings(a, emptyIfNil(b))
		return &out
	}
	pieces := p.single
	if b != nil {
		pieces = p.pair
	}
	out := &Encoding{}
	for _, pc := range pieces {
		if pc.special != "" {
			if !addSpecial {
				continue
			}
			st := p.specials[pc.special]
			for i, id := range st.ids {
				out.appendToken(id, pc.typeID, 1, [2]int{}, st.tokens[i])
			}
			continue
		}
		seq := a
		if pc.seq == 1 {
			seq = b
		}
		if seq == nil {
			continue
		}
		for i := range seq.IDs {
			out.appendToken(seq.IDs[i], pc.typeID, seq.SpecialTokensMask[i], seq.Offsets[i], seq.Tokens[i])
		}
	}
	return out
}

func emptyIfNil(e *Encoding) *Encoding {
	if e == nil {
		return &Encoding{}
	}
	return e
}
