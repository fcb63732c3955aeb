package errctx

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

func TestWrap(t *testing.T) {
	base := fmt.Errorf("loaders: dataset: %w", fs.ErrNotExist)
	tests := []struct {
		name    string
		context string
		err     error
		want    string
	}{
		{"an inner package prefix is dropped", "recipes: data.train", base, "recipes: data.train: dataset: file does not exist"},
		{"stacked prefixes are all dropped", "recipes: lora", errors.New("lora: transformer: r must be > 0"), "recipes: lora: r must be > 0"},
		{"a message without a prefix is kept", "merge: --model", errors.New("no such directory"), "merge: --model: no such directory"},
		{"a prefix-like word inside the message is kept", "recipes", errors.New("load x: loaders: y"), "recipes: load x: loaders: y"},
		{"a name that merely starts like a package is kept", "recipes", errors.New("lorax: y"), "recipes: lorax: y"},
		{"the prefixes of the decoder-side packages are dropped too", "recipes: tokenizer.path", errors.New("tokenizers: sft: tokenizer.json: x"), "recipes: tokenizer.path: tokenizer.json: x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Wrap(tt.context, tt.err)
			if got.Error() != tt.want {
				t.Errorf("Wrap = %q, want %q", got, tt.want)
			}
			if !errors.Is(got, tt.err) {
				t.Errorf("errors.Is(Wrap(...), err) is false")
			}
		})
	}
	if !errors.Is(Wrap("recipes", base), fs.ErrNotExist) {
		t.Error("the wrapped chain does not reach fs.ErrNotExist")
	}
	if Wrap("recipes", nil) != nil || Wrapf(nil, "recipes: %s", "x") != nil {
		t.Error("wrapping nil is not nil")
	}
	if got := Wrapf(base, "recipes: %s", "data.eval").Error(); got != "recipes: data.eval: dataset: file does not exist" {
		t.Errorf("Wrapf = %q", got)
	}
}
