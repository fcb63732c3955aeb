package recipes

import (
	"github.com/tune-ml/tune/chat"
	"github.com/tune-ml/tune/internal/errctx"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/sft"
	"github.com/tune-ml/tune/tokenizers"
)

// CheckTokenizer loads tokenizer.path as Build does and returns what Build would refuse about it before it
// builds the model: files that do not parse, a chat template that does not compile, and for a BERT recipe a
// pad token outside the vocabulary (every batch is padded). tune validate calls it after CheckFiles, so a bad
// tokenizer is reported without a training run; the errors are Build's, under the key tokenizer.path.
func (r *Recipe) CheckTokenizer() error {
	if r.IsCausalLM() {
		_, err := loadSFTTokenizer(r)
		return err
	}
	_, err := loadTokenizer(r)
	return err
}

// loadTokenizer loads a BERT recipe's tokenizer and requires its padding token.
func loadTokenizer(r *Recipe) (*loaders.Tokenizer, error) {
	tok, err := loaders.LoadTokenizer(r.Tokenizer.Path)
	if err == nil {
		err = tok.PadError() // every batch is padded: said before the model builds
	}
	if err != nil {
		return nil, errctx.Wrap("recipes: tokenizer.path", err)
	}
	return tok, nil
}

// loadSFTTokenizer loads a causal LM recipe's tokenizer as transformers' AutoTokenizer builds it, with its
// tokenizer_config.json and the chat template when it has one.
func loadSFTTokenizer(r *Recipe) (sft.Tokenizer, error) {
	tok, err := tokenizers.LoadForTransformers(r.Tokenizer.Path)
	if err != nil {
		return sft.Tokenizer{}, errctx.Wrap("recipes: tokenizer.path", err)
	}
	cfg, err := tokenizers.LoadConfig(r.Tokenizer.Path)
	if err != nil {
		return sft.Tokenizer{}, errctx.Wrap("recipes: tokenizer.path", err)
	}
	tk := sft.Tokenizer{Tok: tok, Config: cfg}
	if cfg.ChatTemplate != "" {
		if tk.Template, err = chat.FromConfig(cfg); err != nil {
			return sft.Tokenizer{}, errctx.Wrap("recipes: tokenizer.path", err)
		}
	}
	return tk, nil
}
