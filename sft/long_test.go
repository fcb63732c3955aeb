package sft

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
)

// longConversation is one JSONL record of n user/assistant pairs (a tester's finding: 3,000 pairs took
// 62.7 s to prepare, whatever max_length was).
func longConversation(n int) []byte {
	var msgs []map[string]string
	for i := range n {
		msgs = append(msgs, map[string]string{"role": "user", "content": fmt.Sprintf("hi %d", i)},
			map[string]string{"role": "assistant", "content": fmt.Sprintf("yo %d", i)})
	}
	b, _ := json.Marshal(map[string]any{"messages": msgs})
	return b
}

// TestLongConversationBoundedByMaxLength checks that preparing a long conversation renders the chat template
// a number of times bounded by max_length, not by the conversation's turns, and gives the same example as
// preparing it whole and cutting it to max_length.
func TestLongConversationBoundedByMaxLength(t *testing.T) {
	rec := longConversation(30)
	for _, tmpl := range []string{"smollm2-style.jinja", "qwen2.5-style.jinja", "llama3.1-style.jinja", "mistral-style.jinja", "llama2-style.jinja"} {
		tk := tiny(t, tmpl)
		whole := &preparer{tk: tk, opts: Options{MaxLength: -1}}
		format := FormatMessages
		ref, _, err := whole.prepare(rec, &format)
		if err != nil {
			t.Fatalf("%s: %v", tmpl, err)
		}
		for _, m := range []int{8, 64, 200} {
			p := &preparer{tk: tk, opts: Options{MaxLength: m}}
			got, cut, err := p.prepare(rec, &format)
			if err != nil {
				t.Fatalf("%s max_length %d: %v", tmpl, m, err)
			}
			if !cut || !slices.Equal(got.InputIDs, ref.InputIDs[:m]) || !slices.Equal(got.Labels, ref.Labels[:m]) {
				t.Errorf("%s max_length %d: the example differs from the whole conversation's first %d tokens", tmpl, m, m)
			}
			// Each pair is at least 4 tokens; the loop may render a few turns past the cut.
			if limit := 2*(m/4+2) + 1; p.renders > limit {
				t.Errorf("%s max_length %d: %d renderings of the template, want at most %d (the whole conversation: %d)", tmpl, m, p.renders, limit, whole.renders)
			}
		}
	}
}
