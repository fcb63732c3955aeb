package tokenizers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := `{"bos_token":{"content":"<s>","lstrip":false},"eos_token":"</s>","pad_token":null,
"additional_special_tokens":["<|im_start|>"],"model_max_length":1000000000000000019884624838656,
"chat_template":[{"name":"tool_use","template":"T"},{"name":"default","template":"D"}]}`
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.BOSToken != "<s>" || c.EOSToken != "</s>" || c.PadToken != "" || c.ChatTemplate != "D" ||
		c.ModelMaxLength != 0 || len(c.AdditionalSpecialTokens) != 1 {
		t.Fatalf("%+v", c)
	}
	if err := os.WriteFile(filepath.Join(dir, "chat_template.jinja"), []byte("J"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, _ = LoadConfig(filepath.Join(dir, "tokenizer.json")); c.ChatTemplate != "J" || !strings.HasSuffix(c.ChatTemplateSource, "chat_template.jinja") {
		t.Fatalf("chat_template.jinja not preferred: %+v", c)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(`{"eos_token":3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(dir); err == nil || !strings.Contains(err.Error(), "eos_token") {
		t.Fatalf("bad eos_token: %v", err)
	}
}

func TestRealConfigs(t *testing.T) {
	for name, want := range map[string][2]string{"llama2": {"<s>", "</s>"}, "llama3": {"<|begin_of_text|>", "<|end_of_text|>"}, "qwen3": {"", "<|im_end|>"}} {
		p := tokenizerPath(t, name)
		c, err := LoadConfig(p)
		if err != nil {
			t.Fatal(err)
		}
		if c.BOSToken != want[0] || c.EOSToken != want[1] {
			t.Errorf("%s: bos %q eos %q", name, c.BOSToken, c.EOSToken)
		}
		if typ, err := ModelType(p); typ != "BPE" || err != nil {
			t.Errorf("%s: model type %q %v", name, typ, err)
		}
	}
}
