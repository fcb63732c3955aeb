package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tune-ml/tune/generate"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/tokenizers"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/gpt2"
)

// tinyGPT2 saves a random 1-layer GPT-2 with the tiny GPT-2 tokenizer of testdata/bpe into a directory.
func tinyGPT2(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("..", "..", "testdata", "bpe", "tiny-gpt2", "tokenizer.json")
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := gpt2.DefaultConfig()
	cfg.VocabSize, cfg.NPositions, cfg.NEmbd, cfg.NLayer, cfg.NHead = 702, 64, 32, 1, 2
	m, err := gpt2.NewGPT2LMHeadModel(cpu.New(), cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func runGenerate(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetArgs(append([]string{"generate", "--device", "cpu"}, args...))
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.Execute()
	return out.String(), err
}

// TestGenerateCommand: the streamed text is the decoding of the greedy ids generate.Generate returns for the
// same model, and sampling with a seed repeats.
func TestGenerateCommand(t *testing.T) {
	dir := tinyGPT2(t)
	got, err := runGenerate(t, "", "--model", dir, "--prompt", "Hello world", "--max-new-tokens", "8")
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := tokenizers.Load(dir)
	m, _, err := gpt2.LoadPretrained(dir, cpu.New(), transformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	prompt, _ := tok.Encode("Hello world", true)
	ids, err := generate.Generate(m, prompt, generate.Options{MaxNewTokens: 8}, nil)
	if err != nil || len(ids) != 8 {
		t.Fatalf("%v %v", ids, err)
	}
	if want := tok.Decode(ids, true) + "\n"; got != want {
		t.Errorf("generate printed %q, want %q", got, want)
	}
	a, err1 := runGenerate(t, "Hello", "--model", dir, "--do-sample", "--seed", "3", "--max-new-tokens", "6")
	b, err2 := runGenerate(t, "Hello", "--model", dir, "--do-sample", "--seed", "3", "--max-new-tokens", "6")
	if err1 != nil || err2 != nil || a != b {
		t.Errorf("sampling with one seed: %q %q %v %v", a, b, err1, err2)
	}
	if _, err := runGenerate(t, "", "--model", dir, "--chat", "--prompt", "hi"); err == nil || !strings.Contains(err.Error(), "no chat template") {
		t.Errorf("--chat without a template: %v", err)
	}
	if _, err := runGenerate(t, "", "--model", dir, "--prompt", "hi", "--max-new-tokens", "0"); err == nil {
		t.Error("--max-new-tokens 0 accepted")
	}
}

// TestTinyChatThenGenerate: the embedded SFT default fine-tunes (a few steps here) and tune generate --chat
// answers from the saved model with its chat template and eos.
func TestTinyChatThenGenerate(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := runTune(t, "finetune", "--device", "cpu", "tiny-chat", "training.output_dir="+out,
		"training.max_steps=6", "training.eval_strategy=no", "data.eval=null", "training.logging_steps=3")
	if code != exitOK {
		t.Fatalf("finetune exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"1200 messages examples", "data: "} {
		if !strings.Contains(stdout+stderr, want) {
			t.Errorf("finetune output lacks %q:\n%s\n%s", want, stdout, stderr)
		}
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("output lacks %s", f)
		}
	}
	got, err := runGenerate(t, "", "--model", out, "--chat", "--prompt", "What colour is a lime?", "--max-new-tokens", "5")
	if err != nil || !strings.HasSuffix(got, "\n") {
		t.Fatalf("generate --chat: %q %v", got, err)
	}
}

// TestGenerateUseCache: --use-cache=false (every step reruns the sequence) prints what the cached default
// prints, greedy and sampling, FP32 and under BF16/FP16 autocast; --fp16 with --bf16 is refused.
func TestGenerateUseCache(t *testing.T) {
	dir := tinyGPT2(t)
	if _, err := runGenerate(t, "", "--model", dir, "--prompt", "Hi", "--fp16", "--bf16"); err == nil || !strings.Contains(err.Error(), "exclusive") {
		t.Errorf("--fp16 --bf16: %v", err)
	}
	for _, extra := range [][]string{nil, {"--do-sample", "--seed", "4"}, {"--bf16"}, {"--fp16", "--do-sample"}} {
		args := append([]string{"--model", dir, "--prompt", "Hello world", "--max-new-tokens", "30"}, extra...)
		cached, err1 := runGenerate(t, "", args...)
		plain, err2 := runGenerate(t, "", append(args, "--use-cache=false")...)
		if err1 != nil || err2 != nil || cached != plain || cached == "\n" {
			t.Errorf("%v: cached %q (%v), uncached %q (%v)", extra, cached, err1, plain, err2)
		}
	}
}

// TestGenerateBeyondPositions: a prompt plus --max-new-tokens beyond GPT-2's n_positions (64 here) is refused
// before generating, naming both numbers and the limit.
func TestGenerateBeyondPositions(t *testing.T) {
	dir := tinyGPT2(t)
	_, err := runGenerate(t, "", "--model", dir, "--prompt", "Hello world", "--max-new-tokens", "100")
	if err == nil || !strings.Contains(err.Error(), "max_new_tokens 100") || !strings.Contains(err.Error(), "n_positions 64") {
		t.Fatalf("got %v", err)
	}
}

// TestGenerateBeyondContextLlama: a Llama-family max_new_tokens beyond max_position_embeddings is refused
// before the key/value cache is allocated (1e9 new tokens once died with "fatal error: out of memory").
func TestGenerateBeyondContextLlama(t *testing.T) {
	dir := filepath.Join("..", "..", "recipes", "data", "tiny-chat")
	_, err := runGenerate(t, "", "--model", dir, "--prompt", "hello", "--max-new-tokens", "1000000000")
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "max_new_tokens 1000000000") || !strings.Contains(err.Error(), "max_position_embeddings 256") {
		t.Fatalf("got %v, want a usage error (exit 2) naming both numbers", err)
	}
}

// TestGenerateChatStream: 200 tokens of the tiny-chat model after a --chat prompt stream without failing
// (byte-fallback runs that decode to U+FFFD until completed once made StreamText index past its text) and
// print the same text with the cache and without (generate.TestStreamTinyChat checks it is the decoding).
func TestGenerateChatStream(t *testing.T) {
	dir := filepath.Join("..", "..", "recipes", "data", "tiny-chat")
	var outs []string
	for _, cache := range []string{"true", "false"} {
		out, err := runGenerate(t, "", "--model", dir, "--chat", "--prompt", "What colour is a lime?", "--max-new-tokens", "200", "--use-cache="+cache)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, out)
	}
	if outs[0] != outs[1] || len(outs[0]) < 200 {
		t.Errorf("cached %q\nuncached %q", outs[0], outs[1])
	}
}

// TestGenerateAdapterPaths: a missing --adapter path and a directory without adapter_config.json (a full
// model) are usage errors naming --adapter; before, the first was exit 1 "reading the adapter config: open
// .../adapter_config.json" and the second blamed the tokenizer ("the tokenizer (no --tokenizer given): DIR has
// no byte-pair-encoding tokenizer.json").
func TestGenerateAdapterPaths(t *testing.T) {
	dir := tinyGPT2(t)
	notAdapter := t.TempDir()
	for _, c := range []struct{ adapter, want string }{
		{filepath.Join(t.TempDir(), "nosuch"), "nosuch: no such file or directory"},
		{notAdapter, "has no adapter_config.json: it is not a PEFT adapter directory"},
	} {
		_, err := runGenerate(t, "", "--model", dir, "--adapter", c.adapter, "--prompt", "Hello")
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--adapter") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--adapter %s: %v, want a usage error saying %q", c.adapter, err, c.want)
		}
	}
}

// TestGenerateFromCheckpoint: --model RUN/checkpoint-N (which holds no tokenizer) generates with the run's
// tokenizer, as eval and predict do; before, "the tokenizer (no --tokenizer given): RUN/checkpoint-4 has no
// byte-pair-encoding tokenizer.json" (exit 2).
func TestGenerateFromCheckpoint(t *testing.T) {
	run := tinyGPT2(t)
	ck := filepath.Join(run, "checkpoint-4")
	if err := os.Mkdir(ck, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(run, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ck, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := runGenerate(t, "", "--model", run, "--prompt", "Hello world", "--max-new-tokens", "4")
	if err != nil {
		t.Fatal(err)
	}
	got, err := runGenerate(t, "", "--model", ck, "--prompt", "Hello world", "--max-new-tokens", "4")
	if err != nil || got != want {
		t.Errorf("--model %s: %q, %v; want %q as from the run", ck, got, err, want)
	}
}

// TestGenerateSystemNeedsChat: --system without --chat is bad usage; before, the system message was silently
// dropped and the prompt continued as plain text.
func TestGenerateSystemNeedsChat(t *testing.T) {
	dir := tinyGPT2(t)
	_, err := runGenerate(t, "", "--model", dir, "--system", "Be brief.", "--prompt", "Hello")
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--system needs --chat") {
		t.Errorf("got %v, want a usage error saying --system needs --chat", err)
	}
}

// TestGenerateNamesTheConfigOfABadOption: generation_config.json with do_sample true and temperature 0 was
// refused as "temperature 0: want > 0 when sampling", with no --temperature given and no file named.
func TestGenerateNamesTheConfigOfABadOption(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	copyDir(t, filepath.Join("..", "..", "recipes", "data", "tiny-chat"), dir)
	gc := filepath.Join(dir, "generation_config.json")
	if err := os.WriteFile(gc, []byte(`{"do_sample": true, "temperature": 0}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := runGenerate(t, "", "--model", dir, "--prompt", "hello")
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "temperature 0") || !strings.Contains(err.Error(), gc) {
		t.Fatalf("got %v, want a usage error naming temperature and %s", err, gc)
	}
	if _, err := runGenerate(t, "", "--model", dir, "--prompt", "hello", "--temperature", "0.7", "--max-new-tokens", "2"); err != nil {
		t.Fatalf("--temperature 0.7 over the file's 0: %v", err)
	}
}

// TestGenerateLongPromptSaysShortenIt: a 400-word prompt alone past the tiny Llama's 256 positions was answered
// "... (lower max_new_tokens)", which cannot help; it now says to shorten the prompt. Without the cache
// (--use-cache=false) nothing checked the length at all: a 100,000-token prompt ran for minutes.
func TestGenerateLongPromptSaysShortenIt(t *testing.T) {
	dir := filepath.Join("..", "..", "recipes", "data", "tiny-chat")
	for _, cache := range []string{"true", "false"} {
		_, err := runGenerate(t, "", "--model", dir, "--prompt", strings.Repeat("word ", 400), "--max-new-tokens", "2", "--use-cache="+cache)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "shorten the prompt") || strings.Contains(err.Error(), "lower max_new_tokens") {
			t.Errorf("--use-cache=%s: got %v, want a usage error saying to shorten the prompt", cache, err)
		}
	}
	_, err := runGenerate(t, "", "--model", dir, "--prompt", "hello", "--max-new-tokens", "1000", "--use-cache=false")
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "lower max_new_tokens") || !strings.Contains(err.Error(), "context of 256") {
		t.Errorf("--use-cache=false, max_new_tokens 1000: got %v, want a usage error", err)
	}
}

// TestGenerateEOSFirstSaysSo (tester2): when the first new token is an end-of-sequence token, generate printed
// an empty line and nothing else; stderr now says why. Here every id of the tiny Llama's vocabulary is an
// eos_token_id, so the first token ends it.
func TestGenerateEOSFirstSaysSo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	copyDir(t, filepath.Join("..", "..", "recipes", "data", "tiny-chat"), dir)
	ids := make([]string, 756)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	gc := `{"eos_token_id": [` + strings.Join(ids, ",") + `]}`
	if err := os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(gc), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runTune(t, "generate", "--model", dir, "--prompt", "hello")
	if code != exitOK || strings.Count(strings.TrimSpace(out), "\n") != 0 ||
		!strings.Contains(errOut, "tune: note: nothing was generated: the first new token was the end-of-sequence token (id ") ||
		!strings.Contains(errOut, "--chat for a chat model") {
		t.Errorf("exit %d, stdout %q, stderr %q; want one line (the EOS token's text, if any) and the note", code, out, errOut)
	}
	code, _, errOut = runTune(t, "generate", "--model", filepath.Join("..", "..", "recipes", "data", "tiny-chat"), "--prompt", "hello", "--max-new-tokens", "3")
	if code != exitOK || strings.Contains(errOut, "nothing was generated") {
		t.Errorf("a normal answer: exit %d, stderr %q", code, errOut)
	}
}

// TestGenerateBadDecoderConfigIsUsage (tester4): a decoder config.json tune cannot build ("rms_norm_eps": 0)
// exited 2 from finetune, validate and inspect but 1 from tune generate, with the same message. generate checks
// the config (with the weights' headers) before loading, as validate does: exit 2.
func TestGenerateBadDecoderConfigIsUsage(t *testing.T) {
	src := filepath.Join("..", "..", "recipes", "data", "tiny-chat")
	dir := filepath.Join(t.TempDir(), "m")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "config.json" {
			b = []byte(strings.Replace(string(b), `"rms_norm_eps": 1e-06`, `"rms_norm_eps": 0`, 1))
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, _, errOut := runTune(t, "generate", "--model", dir, "--prompt", "hi")
	if code != exitUsage || !strings.Contains(errOut, "rms_norm_eps: 0 must be positive and finite") {
		t.Errorf("exit %d, stderr %q; want exit %d naming rms_norm_eps", code, errOut, exitUsage)
	}
}

// TestGeneratePromptNotUTF8: a prompt that is not UTF-8 is the input's fault (exit 2), named by where it came
// from, with the offset in the user's own text, with --chat too (findings6 #3: exit 1, "--prompt" for stdin,
// and with --chat an offset into the rendered template).
func TestGeneratePromptNotUTF8(t *testing.T) {
	dir := filepath.Join("..", "..", "recipes", "data", "tiny-chat")
	for _, c := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"\xff\xfe hello", nil, "standard input: invalid UTF-8 (byte 0xff at byte offset 0)"},
		{"\xff\n", []string{"--chat"}, "standard input: invalid UTF-8 (byte 0xff at byte offset 0)"},
		{"", []string{"--prompt", "ok \xe9t\xe9"}, "--prompt: invalid UTF-8 (byte 0xe9 at byte offset 3)"},
		{"", []string{"--chat", "--prompt", "hi", "--system", "\xc3("}, "--system: invalid UTF-8 (byte 0xc3 at byte offset 0)"},
	} {
		args := append([]string{"generate", "--device", "cpu", "--model", dir, "--max-new-tokens", "3"}, c.args...)
		code, _, stderr := runCLIStdin(c.stdin, args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "iconv") {
			t.Errorf("%q %q: exit %d, stderr %q; want exit %d with %q and the iconv hint", c.stdin, c.args, code, stderr, exitUsage, c.want)
		}
	}
}
