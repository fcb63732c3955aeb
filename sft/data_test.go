package sft

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/chat"
	"github.com/tune-ml/tune/tokenizers"
)

// tiny is the tiny GPT-2-style tokenizer of testdata/bpe with a template of testdata/chat.
func tiny(t *testing.T, template string) Tokenizer {
	t.Helper()
	return withTokenizer(t, filepath.Join("..", "testdata", "bpe", "tiny-gpt2", "tokenizer.json"), template)
}

func withTokenizer(t *testing.T, path, template string) Tokenizer {
	t.Helper()
	tok, err := tokenizers.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tokenizers.Config{EOSToken: "<|endoftext|>", PadToken: "<|endoftext|>"}
	src, err := os.ReadFile(filepath.Join("..", "testdata", "chat", template))
	if err != nil {
		t.Fatal(err)
	}
	tm, err := chat.Compile(string(src), template, map[string]string{"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"})
	if err != nil {
		t.Fatal(err)
	}
	return Tokenizer{Tok: tok, Config: cfg, Template: tm}
}

func read(t *testing.T, tk Tokenizer, jsonl string, opts Options) (*Dataset, error) {
	t.Helper()
	return Read(strings.NewReader(jsonl), "data.jsonl", tk, opts)
}

// supervised decodes the supervised runs of an example, one string per run.
func supervised(tk Tokenizer, e Example) (runs []string, rest string) {
	var cur, other []int32
	flush := func() {
		if len(cur) > 0 {
			runs = append(runs, tk.Tok.Decode(cur, false))
			cur = nil
		}
	}
	for i, l := range e.Labels {
		if l == IgnoreIndex {
			flush()
			other = append(other, e.InputIDs[i])
			continue
		}
		if l != e.InputIDs[i] {
			panic("label differs from its input id")
		}
		cur = append(cur, e.InputIDs[i])
	}
	flush()
	return runs, tk.Tok.Decode(other, false)
}

func TestMessagesAssistantOnly(t *testing.T) {
	tk := tiny(t, "smollm2-style.jinja")
	ds, err := read(t, tk, `{"messages":[{"role":"user","content":"Name a colour."},{"role":"assistant","content":"Blue."},{"role":"user","content":"Another?"},{"role":"assistant","content":"Red, 42."}]}`+"\n", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Format != FormatMessages {
		t.Fatalf("format %q", ds.Format)
	}
	runs, rest := supervised(tk, ds.Examples[0])
	// The template writes a newline after every {{ }}: its generation prompt ends "assistant\n\n", the turn
	// "assistant\nBlue.<|im_end|>\n\n", so the span starts where they part.
	if want := []string{"Blue.<|im_end|>\n\n", "Red, 42.<|im_end|>\n\n"}; !slices.Equal(runs, want) {
		t.Errorf("supervised %q, want %q", runs, want)
	}
	wantRest := "<|im_start|>system\nYou are a small helpful assistant.<|im_end|>\n\n<|im_start|>user\nName a colour.<|im_end|>\n\n<|im_start|>assistant\n<|im_start|>user\nAnother?<|im_end|>\n\n<|im_start|>assistant\n"
	if rest != wantRest {
		t.Errorf("unsupervised %q\nwant %q", rest, wantRest)
	}
	// assistant_only_loss false supervises everything.
	no := false
	ds, err = read(t, tk, `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}`, Options{AssistantOnlyLoss: &no})
	if err != nil || slices.Contains(ds.Examples[0].Labels, IgnoreIndex) {
		t.Fatalf("assistant_only_loss false: %v %v", ds, err)
	}
}

func TestPromptCompletion(t *testing.T) {
	tk := tiny(t, "smollm2-style.jinja")
	ds, err := read(t, tk, `{"prompt":"The quick brown","completion":" fox jumps."}`+"\n", Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := ds.Examples[0]
	runs, rest := supervised(tk, e)
	if want := []string{" fox jumps.<|endoftext|>"}; !slices.Equal(runs, want) {
		t.Errorf("supervised %q, want %q (rest %q)", runs, want, rest)
	}
	if e.InputIDs[len(e.InputIDs)-1] != tk.PadID() {
		t.Errorf("the last id should be EOS, which is also the pad id here")
	}
	// Conversational prompt-completion: the prompt is rendered with the generation prompt.
	ds, err = read(t, tk, `{"prompt":[{"role":"user","content":"Hi"}],"completion":[{"role":"assistant","content":"Hello!"}]}`, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if runs, _ := supervised(tk, ds.Examples[0]); !slices.Equal(runs, []string{"Hello!<|im_end|>\n\n"}) {
		t.Errorf("conversational completion %q", runs)
	}
}

func TestText(t *testing.T) {
	tk := tiny(t, "smollm2-style.jinja")
	ds, err := read(t, tk, `{"text":"hello world"}`+"\n\n"+`{"text":"x<|endoftext|>"}`, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Format != FormatText || len(ds.Examples) != 2 || ds.Examples[1].Line != 3 {
		t.Fatalf("%+v", ds)
	}
	for _, e := range ds.Examples {
		if slices.Contains(e.Labels, IgnoreIndex) || e.InputIDs[len(e.InputIDs)-1] != tk.PadID() {
			t.Errorf("text example %v %v", e.InputIDs, e.Labels)
		}
	}
}

func TestErrors(t *testing.T) {
	tk := tiny(t, "smollm2-style.jinja")
	mistral := tiny(t, "mistral-style.jinja")
	ok := `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}` + "\n"
	for _, c := range []struct {
		tk   Tokenizer
		data string
		opts Options
		want string
	}{
		{tk, ok + "{not json\n", Options{}, "data.jsonl:2: not a JSON object"},
		{tk, ok + `{"messages":[{"role":"user","content":"a"},{"role":"narrator","content":"b"}]}`, Options{}, `data.jsonl:2: messages[1]: unknown role "narrator"`},
		{tk, `{"messages":[{"role":"user","content":["part"]}]}`, Options{}, `data.jsonl:1: messages[0]: "content" must be a string`},
		{mistral, `{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`, Options{}, "data.jsonl:1: chat template mistral-style.jinja: After the optional system message, roles must alternate"},
		{tk, `{"messages":[{"role":"user","content":"only a question"}]}`, Options{}, "data.jsonl:1: the conversation has no assistant message"},
		{tk, `{"prompt":"a long prompt of many many words","completion":" x"}`, Options{MaxLength: 4}, "data.jsonl:1: the example has no supervised token after truncation to max_length 4"},
		{tk, `{"question":"?"}`, Options{}, `cannot tell the data format`},
		{tk, ok, Options{Format: "chat"}, `data format "chat" is not`},
		{tk, "\n\n", Options{}, "holds no examples"},
		{tk, ok + "{\"text\":\"bad \xff byte\"}\n", Options{}, "data.jsonl:2: invalid UTF-8"},
		{Tokenizer{Tok: tk.Tok}, ok, Options{}, "data.jsonl:1: conversational data needs a chat template"},
		// A record of another format than the one detected from line 1 (tester2: it said '"messages" must be a
		// list of messages').
		{tk, ok + `{"text":"plain"}` + "\n", Options{}, `data.jsonl:2: the record has no "messages" (keys: "text"), but the file's format is messages, detected from line 1`},
		{tk, `{"text":"plain"}` + "\n" + `{"prompt":"a","completion":"b"}`, Options{}, `data.jsonl:2: the record has no "text" (keys: "completion", "prompt"), but the file's format is text, detected from line 1`},
		{tk, `{"text":"plain"}`, Options{Format: FormatMessages}, `data.jsonl:1: the record has no "messages" (keys: "text"), but the file's format is messages, as the data format says`},
	} {
		_, err := read(t, c.tk, c.data, c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.data, err, c.want)
		}
	}
}

func TestTruncationSummary(t *testing.T) {
	tk := tiny(t, "smollm2-style.jinja")
	ds, err := read(t, tk, `{"text":"one two three four five six seven"}`+"\n"+`{"text":"a"}`, Options{MaxLength: 5})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Truncated != 1 || len(ds.Examples[0].InputIDs) != 5 || !strings.Contains(ds.Summary(), "1 cut to max_length 5") {
		t.Fatalf("%s %v", ds.Summary(), ds.Examples[0].InputIDs)
	}
}

// TestQwen3Messages uses the real Qwen3 tokenizer and chat template (scripts/fetch-tokenizers.sh).
func TestQwen3Messages(t *testing.T) {
	dir := filepath.Join("..", ".tokenizers", "qwen3")
	if d := os.Getenv("TUNE_TOKENIZERS"); d != "" {
		dir = filepath.Join(d, "qwen3")
	}
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Skipf("%s is absent: run scripts/fetch-tokenizers.sh", dir)
	}
	tok, err := tokenizers.LoadForTransformers(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := tokenizers.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := chat.FromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tk := Tokenizer{Tok: tok, Config: cfg, Template: tm}
	ds, err := read(t, tk, `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Name a colour."},{"role":"assistant","content":"Blue."},{"role":"user","content":"Another?"},{"role":"assistant","content":"Red."}]}`, Options{})
	if err != nil {
		t.Fatal(err)
	}
	runs, rest := supervised(tk, ds.Examples[0])
	// Qwen3's template gives the last assistant turn (after the last user message) an empty think block.
	if want := []string{"Blue.<|im_end|>\n", "<think>\n\n</think>\n\nRed.<|im_end|>\n"}; !slices.Equal(runs, want) {
		t.Errorf("supervised %q, want %q", runs, want)
	}
	if want := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\n<|im_start|>user\nAnother?<|im_end|>\n<|im_start|>assistant\n"; rest != want {
		t.Errorf("unsupervised %q", rest)
	}
	if tk.PadID() != 151643 { // <|endoftext|>
		t.Errorf("pad id %d", tk.PadID())
	}
}

// TestPrefixBreakingTemplatesAreRefused: a template that renders a conversation's beginning differently when
// later turns follow made the inexact span start at the first difference, supervising user and system text
// without a word (findings5 #16: a Mistral-v0.3-style template, which puts the system message into the LAST
// user turn, supervised "What colour is a lime?[/INST]"; so did templates that render the messages reversed,
// start with {{ messages|length }}, or render the last message only). Each is refused naming the turn and
// where the renderings part; the same conversation without a system message, whose prefixes agree, is
// supervised exactly.
func TestPrefixBreakingTemplatesAreRefused(t *testing.T) {
	tok, err := tokenizers.Load(filepath.Join("..", "testdata", "bpe", "tiny-gpt2", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	compile := func(src string) Tokenizer {
		tm, err := chat.Compile(src, "t/tokenizer_config.json (chat_template)", map[string]string{"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"})
		if err != nil {
			t.Fatal(err)
		}
		return Tokenizer{Tok: tok, Config: &tokenizers.Config{EOSToken: "<|endoftext|>"}, Template: tm}
	}
	mistralLast := `{%- if messages[0]["role"] == "system" %}{%- set system_message = messages[0]["content"] %}{%- set loop_messages = messages[1:] %}{%- else %}{%- set loop_messages = messages %}{%- endif %}{{- bos_token }}{%- for message in loop_messages %}{%- if message["role"] == "user" %}{%- if loop.last and system_message is defined %}{{- "[INST] " + system_message + "\n\n" + message["content"] + "[/INST]" }}{%- else %}{{- "[INST] " + message["content"] + "[/INST]" }}{%- endif %}{%- elif message["role"] == "assistant" %}{{- " " + message["content"] + eos_token}}{%- endif %}{%- endfor %}`
	withSystem := `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"What colour is a lime?"},{"role":"assistant","content":"A lime is green."}]}`
	for name, src := range map[string]string{
		"system in the last user turn": mistralLast,
		"reversed":                     `{% for m in messages|reverse %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}`,
		"length first":                 `{{ messages|length }}{% for m in messages %} {{ m.role }}: {{ m.content }}{% endfor %}{% if add_generation_prompt %} assistant:{% endif %}`,
		"last message only":            `{{ messages[-1].role }}: {{ messages[-1].content }}{% if add_generation_prompt %} assistant:{% endif %}`,
	} {
		_, err := read(t, compile(src), withSystem, Options{})
		if err == nil || !strings.Contains(err.Error(), "data.jsonl:1: messages[2]: the chat template renders the conversation before this assistant turn differently") ||
			!strings.Contains(err.Error(), "set assistant_only_loss false") {
			t.Errorf("%s: got %v", name, err)
		}
	}
	// findings5 #16b: the same template with conversational prompt/completion data.
	_, err = read(t, compile(mistralLast), `{"prompt":[{"role":"system","content":"Be brief."},{"role":"user","content":"What colour is a lime?"}],"completion":[{"role":"assistant","content":"Green."}]}`, Options{})
	if err == nil || !strings.Contains(err.Error(), "data.jsonl:1: completion: the chat template renders the conversation before this assistant turn differently") {
		t.Errorf("prompt/completion: got %v", err)
	}
	tk := compile(mistralLast)
	ds, err := read(t, tk, `{"messages":[{"role":"user","content":"What colour is a lime?"},{"role":"assistant","content":"A lime is green."}]}`, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if runs, _ := supervised(tk, ds.Examples[0]); !slices.Equal(runs, []string{" A lime is green.<|endoftext|>"}) {
		t.Errorf("without a system message: supervised %q", runs)
	}
}

// TestLongPromptsAreLeftOut: one conversation whose prompt passes max_length stopped a run of 1200 good ones
// ("the example has no supervised token after truncation", exit 1; findings5 #22), where TRL trains on it
// without a loss. Such examples are left out and counted in the summary; when they are at least half the
// file, it is still an error.
func TestLongPromptsAreLeftOut(t *testing.T) {
	tk := tiny(t, "smollm2-style.jinja")
	good := `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}` + "\n"
	long := `{"messages":[{"role":"user","content":"` + strings.Repeat("word ", 200) + `"},{"role":"assistant","content":"b"}]}` + "\n"
	ds, err := read(t, tk, good+good+long+good, Options{MaxLength: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Examples) != 3 || ds.Unsupervised != 1 || ds.UnsupervisedLine != 3 ||
		!strings.Contains(ds.Summary(), "1 left out: their supervised part starts beyond max_length 100 (the first at data.jsonl:3") {
		t.Errorf("%d examples, summary %q", len(ds.Examples), ds.Summary())
	}
	_, err = read(t, tk, good+long+long, Options{MaxLength: 100})
	if err == nil || !strings.Contains(err.Error(), "data.jsonl:2: the example has no supervised token after truncation to max_length 100") ||
		!strings.Contains(err.Error(), "so have 2 of the file's 3 examples") {
		t.Errorf("mostly long prompts: %v", err)
	}
}
