package tokenizers

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tune-ml/tune/internal/badinput"
)

// edited returns minimal with edit applied to its decoded JSON.
func edited(t *testing.T, edit func(map[string]any)) []byte {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal([]byte(minimal), &d); err != nil {
		t.Fatal(err)
	}
	edit(d)
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSparseIDsAreRefused: one token with id 1,000,000,000 made Parse allocate a 16 GB id table (findings5
// #5, a fatal out-of-memory); it is refused from the ids alone, naming the largest id and the count.
func TestSparseIDsAreRefused(t *testing.T) {
	for name, edit := range map[string]func(map[string]any){
		"model.vocab": func(d map[string]any) {
			d["model"].(map[string]any)["vocab"].(map[string]any)["zzzbig"] = 1_000_000_000
		},
		"added_tokens": func(d map[string]any) {
			d["added_tokens"] = append(d["added_tokens"].([]any), map[string]any{"id": 1_000_000_000, "content": "<big>",
				"single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true})
		},
	} {
		_, err := Parse(edited(t, edit), "big/tokenizer.json")
		if err == nil || !strings.Contains(err.Error(), "big/tokenizer.json: the largest token id is 1000000000 but model.vocab and added_tokens hold") ||
			!badinput.Is(err) {
			t.Errorf("%s: got %v", name, err)
		}
	}
	// A gap of a few ids (Qwen-style added tokens past the vocabulary) is fine.
	if _, err := Parse(edited(t, func(d map[string]any) { d["model"].(map[string]any)["vocab"].(map[string]any)["zz"] = 1000 }), "gap"); err != nil {
		t.Errorf("a small gap: %v", err)
	}
}

// TestNormalizerGrowthIsBounded: a Sequence of 40 Replace steps doubling "a" wanted 2^40 bytes (a fatal
// out-of-memory), and a 10 MB Prepend made every text 10 MB (findings5 #6); both stop with an error naming the
// file and the step, before the text is built, within a few MB.
func TestNormalizerGrowthIsBounded(t *testing.T) {
	doubling := make([]any, 40)
	for i := range doubling {
		doubling[i] = map[string]any{"type": "Replace", "pattern": map[string]any{"String": "a"}, "content": "aa"}
	}
	cases := map[string]any{
		"doubling Replace": map[string]any{"type": "Sequence", "normalizers": doubling},
		"doubling regex Replace": map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "Replace",
			"pattern": map[string]any{"Regex": "a"}, "content": strings.Repeat("a", 100)}, map[string]any{"type": "Replace",
			"pattern": map[string]any{"Regex": "a"}, "content": strings.Repeat("a", 100)}}},
		"10 MB Prepend": map[string]any{"type": "Prepend", "prepend": strings.Repeat("x", 10_000_000)},
	}
	for name, norm := range cases {
		tok, err := Parse(edited(t, func(d map[string]any) { d["normalizer"] = norm }), "grow/tokenizer.json")
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err = tok.Encode("a banana", false)
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "grow/tokenizer.json: the normalizer's ") || !badinput.Is(err) {
			t.Errorf("%s: got %v", name, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
			t.Errorf("%s: allocated %d MB", name, alloc>>20)
		}
	}
	// Within the bound, the steps apply as before: "a" → "aa" twice is "aaaa", four tokens "a".
	tok, err := Parse(edited(t, func(d map[string]any) {
		d["normalizer"] = map[string]any{"type": "Sequence", "normalizers": doubling[:2]}
	}), "ok")
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := tok.Encode("a", false); err != nil || !equal(ids, []int32{0, 0, 0, 0}) {
		t.Errorf("two doublings: %v, %v; want [0 0 0 0]", ids, err)
	}
}

// TestRegexBacktrackingIsBounded: a Split pre_tokenizer "(a+)+$" took exponential time on a short line
// (findings5 #7: 4.6 s for 27 characters, days for 40); each match is bounded by MatchTimeout, and the
// error names the file and the pattern.
func TestRegexBacktrackingIsBounded(t *testing.T) {
	defer func(d time.Duration) { MatchTimeout = d }(MatchTimeout)
	MatchTimeout = 50 * time.Millisecond
	tok, err := Parse(edited(t, func(d map[string]any) {
		d["pre_tokenizer"] = map[string]any{"type": "Split", "pattern": map[string]any{"Regex": "(a+)+$"}, "behavior": "Isolated", "invert": false}
	}), "slow/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = tok.Encode(strings.Repeat("a", 40)+"!", false)
	if err == nil || !strings.Contains(err.Error(), `slow/tokenizer.json: the regex "(a+)+$" takes more than 50ms`) || !badinput.Is(err) {
		t.Errorf("got %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
	if _, err := tok.Encode("aaa b", false); err != nil {
		t.Errorf("a line the pattern matches quickly: %v", err)
	}
}

// withAddedTokens is minimal with n added tokens "tok00000x", "tok00001x", ... after its own.
func withAddedTokens(t testing.TB, n int) *Tokenizer {
	var d map[string]any
	if err := json.Unmarshal([]byte(minimal), &d); err != nil {
		t.Fatal(err)
	}
	added := d["added_tokens"].([]any)
	for i := 0; i < n; i++ {
		added = append(added, map[string]any{"id": 6 + i, "content": fmt.Sprintf("tok%05dx", i), "single_word": false,
			"lstrip": false, "rstrip": false, "normalized": false, "special": false})
	}
	d["added_tokens"] = added
	b, _ := json.Marshal(d)
	tok, err := Parse(b, "added")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestManyAddedTokens: with 50,000 added tokens sharing their first bytes, the matcher still finds the longest
// token at each position (a trie walk; it tried every token at every byte: 365 s for a 1 MB row, findings5
// #28), and an added token longer than MaxAddedTokenBytes is refused at Parse.
func TestManyAddedTokens(t *testing.T) {
	tok := withAddedTokens(t, 50_000)
	ids, err := tok.Encode("tok00042xab tok49999x tok0", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) < 3 || ids[0] != 6+42 || !slices.Contains(ids, 6+49999) {
		t.Errorf("ids %v", ids)
	}
	long := edited(t, func(d map[string]any) {
		d["added_tokens"] = append(d["added_tokens"].([]any), map[string]any{"id": 9, "content": strings.Repeat("a", MaxAddedTokenBytes+1),
			"single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": false})
	})
	if _, err := Parse(long, "long"); err == nil || !strings.Contains(err.Error(), "added_tokens[1]: the content has 257 bytes") {
		t.Errorf("a long added token: %v", err)
	}
}

// BenchmarkAddedTokens encodes 100 kB of text against 50,000 added tokens (findings5 #28: 365 s per MB
// before the trie); b.ReportMetric gives ns per byte of text.
func BenchmarkAddedTokens(b *testing.B) {
	tok := withAddedTokens(b, 50_000)
	text := strings.Repeat("tok0 ", 20_000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := tok.Encode(text, false); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(text)), "ns/byte")
}
