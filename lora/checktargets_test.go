package lora

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckTargets: every name of a target_modules list must match a module (a typo is refused, with the
// closest name), a list or regex that matches nothing is refused as Select refuses it, and valid lists,
// regexes and all-linear pass.
func TestCheckTargets(t *testing.T) {
	paths := []string{"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.v_proj", "model.layers.0.mlp.down_proj"}
	for _, tt := range []struct {
		name    string
		targets TargetModules
		want    []string // substrings of the error; nil: no error
	}{
		{"a valid list", TargetModules{Names: []string{"q_proj", "self_attn.v_proj"}}, nil},
		{"a valid regex", TargetModules{Regex: `.*\.(q|v)_proj`}, nil},
		{"all-linear", TargetModules{Regex: AllLinear}, nil},
		{"one typo beside a good name", TargetModules{Names: []string{"q_proj", "v_prj"}},
			[]string{`"v_prj" in [q_proj, v_prj] matches none of the model's 3 Linear modules`,
				"named q_proj, v_proj, down_proj", `did you mean "v_prj" → "v_proj"?`, "self_attn.q_proj narrows"}},
		{"two typos", TargetModules{Names: []string{"q_proj", "v_prj", "dwn_proj"}},
			[]string{`"v_prj", "dwn_proj" in [q_proj, v_prj, dwn_proj] match none`, `"dwn_proj" → "down_proj"`}},
		{"nothing matches", TargetModules{Names: []string{"query"}}, []string{"[query] matched none of the model's 3 Linear modules"}},
		{"a regex that matches nothing", TargetModules{Regex: "q_proj"}, []string{"a single string is a regex"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			c.TargetModules = tt.targets
			err := c.CheckTargets(paths)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrNoTargets) {
				t.Fatalf("got %v, want an error wrapping ErrNoTargets", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.HasPrefix(err.Error(), "lora:") {
				t.Errorf("error %q carries the package prefix; the caller names the key", err)
			}
		})
	}
}
