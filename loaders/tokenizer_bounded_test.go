package loaders

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// longText returns about n bytes of words, punctuation, accents, CJK, added tokens and runs of whitespace of
// every kind the pre-tokenizer splits on, so that chunk boundaries fall in every context.
func longText(rng *rand.Rand, n int) string {
	words := []string{"the", "Film", "gripping", "naïve", "Café", "北京", "unaffable", "[MASK]", "[SEP]", "x,y",
		"don't", "…", "ÀÉÎ", strings.Repeat("z", 120), "e\u0301", "\u00a0", "ok."}
	spaces := []string{" ", "  ", "\t", "\n", " \r\n ", "   \t"}
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words[rng.IntN(len(words))])
		b.WriteString(spaces[rng.IntN(len(spaces))])
	}
	return b.String()
}

// TestEncodeBoundedMatchesWhole checks that truncating while tokenizing (encodeBounded, which tokenizes a long
// text in pieces and holds only what truncation keeps) gives exactly the encoding of tokenizing the whole text
// and then truncating, for single texts and pairs, every strategy and both sides.
func TestEncodeBoundedMatchesWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for name, tok := range bertTokenizers(t) {
		if !tok.chunkable {
			t.Fatalf("%s: expected a chunkable BERT tokenizer", name)
		}
		for trial := range 6 {
			a := longText(rng, 3*chunkBytes+rng.IntN(2*chunkBytes))
			b := longText(rng, rng.IntN(4*chunkBytes))
			maxLen := []int{3, 8, 64, 513, 3000, 100000}[trial%6]
			for _, side := range []Side{Right, Left} {
				for _, strat := range []TruncationStrategy{LongestFirst, OnlyFirst, OnlySecond} {
					opts := EncodeOptions{MaxLength: maxLen, TruncationSide: side, Truncation: strat}
					for _, pair := range []*string{nil, &b} {
						got, gerr := tok.EncodeBatch([]Input{{Text: a, Pair: pair}}, opts)
						want, werr := encodeWholeThenTruncate(tok, Input{Text: a, Pair: pair}, opts)
						if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) {
							t.Fatalf("%s trial %d max %d side %d strategy %d pair %v: error %v, want %v", name, trial, maxLen, side, strat, pair != nil, gerr, werr)
						}
						if gerr == nil && !reflect.DeepEqual(got[0], want) {
							t.Fatalf("%s trial %d max %d side %d strategy %d pair %v: encodings differ (%d vs %d tokens)",
								name, trial, maxLen, side, strat, pair != nil, got[0].Len(), want.Len())
						}
					}
				}
			}
		}
	}
}

// encodeWholeThenTruncate is the straightforward pipeline: every token of each sequence, then truncation.
func encodeWholeThenTruncate(tok *Tokenizer, in Input, opts EncodeOptions) (*Encoding, error) {
	a, err := tok.encodeSequence(in.Text, 0)
	if err != nil {
		return nil, err
	}
	var b *Encoding
	nb := 0
	if in.Pair != nil {
		if b, err = tok.encodeSequence(*in.Pair, 0); err != nil {
			return nil, err
		}
		nb = b.Len()
	}
	budget := opts.MaxLength - tok.post.numSpecial(b != nil)
	if budget < 0 {
		return nil, ErrTruncation
	}
	if err := truncatePair(a, b, a.Len(), nb, budget, opts.Truncation, opts.TruncationSide); err != nil {
		return nil, err
	}
	return tok.postProcess(a, b, true), nil
}

// TestEncodeBoundedMemory checks that encoding a 4 MB text with max_length 64 holds only a bounded number of
// tokens: allocations stay far below the ~100 bytes per input byte of tokenizing it whole.
func TestEncodeBoundedMemory(t *testing.T) {
	tok := bertTokenizers(t)["tokenizer.json"]
	text := longText(rand.New(rand.NewPCG(3, 4)), 4<<20)
	allocs := testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			if _, err := tok.Encode(text, EncodeOptions{MaxLength: 64}); err != nil {
				b.Fatal(err)
			}
		}
	}).AllocedBytesPerOp()
	if allocs > 4<<20 { // one 8 KiB piece costs about 1.5 MB; the whole text would cost hundreds
		t.Fatalf("Encode of 4 MB with max_length 64 allocated %d bytes; it should stop after the first piece", allocs)
	}
}
