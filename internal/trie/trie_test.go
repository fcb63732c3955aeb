package trie

import "testing"

func TestLongest(t *testing.T) {
	tr := New[byte, string]()
	for _, k := range []string{"<s>", "<s", "<|im_start|>", "<|im", "x"} {
		tr.Insert([]byte(k), k)
	}
	tr.Insert([]byte("<s>"), "second") // the first value stays
	for text, want := range map[string]string{"<s>hi": "<s>", "<sx": "<s", "<|im_start|>u": "<|im_start|>", "<|i": "", "x": "x", "y": ""} {
		v, n, ok := tr.Longest(func(i int) (byte, bool) {
			if i < len(text) {
				return text[i], true
			}
			return 0, false
		})
		if want == "" && ok || want != "" && (!ok || v != want || n != len(want)) {
			t.Errorf("%q: %q %d %v, want %q", text, v, n, ok, want)
		}
	}
	if tr.MaxLen != 12 {
		t.Errorf("MaxLen %d", tr.MaxLen)
	}
}
