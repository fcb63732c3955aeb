package generate

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/tokenizers"
	"github.com/tune-ml/tune/transformer"
	_ "github.com/tune-ml/tune/transformer/llama"
)

// fakeLM scores token (last+1) mod V highest, then (last+2), ...: a known next-token table.
type fakeLM struct {
	V     int
	calls int
}

func (f *fakeLM) Forward(b *loaders.Batch, _ transformer.ForwardOptions) (transformer.Output, error) {
	f.calls++
	out := make([]float32, b.T*f.V)
	for t := 0; t < b.T; t++ {
		last := int(b.InputIDs[t])
		for k := 0; k < f.V; k++ {
			out[t*f.V+(last+1+k)%f.V] = float32(f.V - k)
		}
	}
	return transformer.Output{Logits: out, NumLabels: f.V}, nil
}

func TestGreedyAndEOS(t *testing.T) {
	m := &fakeLM{V: 10}
	var emitted []int32
	out, err := Generate(m, []int32{3}, Options{MaxNewTokens: 4}, func(id int32) error { emitted = append(emitted, id); return nil })
	if err != nil || !slices.Equal(out, []int32{4, 5, 6, 7}) || !slices.Equal(emitted, out) {
		t.Fatalf("greedy %v %v %v", out, emitted, err)
	}
	out, _ = Generate(m, []int32{3}, Options{MaxNewTokens: 9, EOS: []int32{6}}, nil)
	if !slices.Equal(out, []int32{4, 5, 6}) {
		t.Fatalf("stops at EOS, keeping it: %v", out)
	}
	if _, err := Generate(m, []int32{3}, Options{MaxNewTokens: 0}, nil); err == nil {
		t.Fatal("max_new_tokens 0 accepted")
	}
}

// TestSamplingWarpers: top_k 1 and a tiny top_p are greedy; top_k 2 draws only the two best, both of them.
func TestSamplingWarpers(t *testing.T) {
	m := &fakeLM{V: 10}
	for _, o := range []Options{{TopK: 1, TopP: 1, Temperature: 1}, {TopK: 0, TopP: 1e-9, Temperature: 0.7}} {
		o.MaxNewTokens, o.DoSample = 3, true
		if out, err := Generate(m, []int32{0}, o, nil); err != nil || !slices.Equal(out, []int32{1, 2, 3}) {
			t.Errorf("%+v: %v %v", o, out, err)
		}
	}
	seen := map[int32]int{}
	for seed := uint64(0); seed < 200; seed++ {
		out, _ := Generate(m, []int32{0}, Options{MaxNewTokens: 1, DoSample: true, TopK: 2, TopP: 1, Temperature: 1, Seed: seed}, nil)
		seen[out[0]]++
	}
	if len(seen) != 2 || seen[1] == 0 || seen[2] == 0 || seen[1] < seen[2] {
		t.Fatalf("top_k 2 draws %v", seen)
	}
	a, _ := Generate(m, []int32{0}, Options{MaxNewTokens: 5, DoSample: true, TopK: 5, TopP: 0.9, Temperature: 2, Seed: 7}, nil)
	b, _ := Generate(m, []int32{0}, Options{MaxNewTokens: 5, DoSample: true, TopK: 5, TopP: 0.9, Temperature: 2, Seed: 7}, nil)
	if !slices.Equal(a, b) {
		t.Fatalf("same seed, different draws: %v %v", a, b)
	}
}

// TestStreamText: the streamed text equals the decoded text, also when an emoji spans several byte tokens.
func TestStreamText(t *testing.T) {
	tok, err := tokenizers.Load(filepath.Join("..", "testdata", "bpe", "tiny-gpt2", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	text := "emoji 😀 中文 ok"
	ids, _ := tok.Encode(text, false)
	var buf bytes.Buffer
	emit, flush := StreamText(&buf, tok, true)
	for i, id := range ids {
		if err := emit(id); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(buf.String(), "\uFFFD") {
			t.Fatalf("after %d tokens the stream shows a partial character: %q", i+1, buf.String())
		}
	}
	if err := flush(); err != nil || buf.String() != text {
		t.Fatalf("streamed %q, want %q (%v)", buf.String(), text, err)
	}
}

func TestReadConfig(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(`{"eos_token_id":[151645,151643],"do_sample":true,"temperature":0.6,"top_k":20,"top_p":0.95}`), 0o644)
	c, err := ReadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	o := c.Options()
	if !slices.Equal(o.EOS, []int32{151645, 151643}) || !o.DoSample || o.Temperature != 0.6 || o.TopK != 20 || o.TopP != 0.95 || o.MaxNewTokens != 20 {
		t.Fatalf("%+v", o)
	}
	c, err = ReadConfig(filepath.Join("..", "testdata", "sft", "tiny-llama"))
	if err != nil || !slices.Equal(c.EOS, []int32{2}) || c.Options().DoSample {
		t.Fatalf("%+v %v", c, err)
	}
}

// TestGreedyGolden reproduces transformers' greedy generate on the tiny random Llama of testdata/sft
// (tools/reference/decoder_sft_goldens.py) token for token, with the key/value cache and without it, on every
// backend (FP32), once a package registers model_type llama.
func TestGreedyGolden(t *testing.T) {
	dir := filepath.Join("..", "testdata", "sft", "tiny-llama")
	if _, err := transformer.Lookup(dir); err != nil {
		t.Skipf("no llama family registered yet: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "goldens.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Greedy []struct {
			Prompt    string  `json:"prompt"`
			InputIDs  []int32 `json:"input_ids"`
			OutputIDs []int32 `json:"output_ids"`
		} `json:"greedy"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	gc, _ := ReadConfig(dir)
	if !gc.Options().UseCache {
		t.Fatal("use_cache is not the default")
	}
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		m, _, err := transformer.Open(dir, b, transformer.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range g.Greedy {
			for _, cached := range []bool{true, false} {
				o := gc.Options()
				o.MaxNewTokens, o.UseCache = 20, cached
				out, err := Generate(m, c.InputIDs, o, nil)
				if err != nil || !slices.Equal(out, c.OutputIDs) {
					t.Errorf("%q (use_cache %v): got %v (%v), want %v", c.Prompt, cached, out, err, c.OutputIDs)
				}
			}
		}
	})
}

// scripted decodes the i-th prefix of ids to texts[i-1].
type scripted []string

func (s scripted) Decode(ids []int32, _ bool) string { return s[len(ids)-1] }

// TestStreamTextShrinking: a decoding that takes back written text (byte fallback turning "-" plus an
// incomplete byte into two U+FFFD), or one that is only a prefix of it, is held until it grows past what was
// written, and never makes StreamText fail; a decoding that differs is written from the first difference.
func TestStreamTextShrinking(t *testing.T) {
	for _, c := range []struct {
		texts []string
		want  string
	}{
		{[]string{"ab", "ab-", "ab\uFFFD\uFFFD", "ab-Ŭ", "ab-Ŭ!"}, "ab-Ŭ!"},
		{[]string{"ab", "ab-", "a", "", "ab-c"}, "ab-c"},
		{[]string{"x", "xy", "xz"}, "xyz"},
		{[]string{"é", "é\uFFFD", "éa"}, "éa"},
	} {
		var buf bytes.Buffer
		emit, flush := StreamText(&buf, scripted(c.texts), true)
		for i := range c.texts {
			if err := emit(int32(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := flush(); err != nil || buf.String() != c.want {
			t.Errorf("%q: streamed %q, want %q (%v)", c.texts, buf.String(), c.want, err)
		}
	}
}

// TestStreamTinyChat: 200 greedy tokens of the tiny-chat Llama after a chat prompt (byte-fallback tokens
// whose decoding takes back written text along the way) stream to the text of all of them.
func TestStreamTinyChat(t *testing.T) {
	dir := filepath.Join("..", "recipes", "data", "tiny-chat")
	tok, err := tokenizers.LoadForTransformers(dir)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := tok.Encode("<s><|user|>\nWhat colour is a lime?</s>\n<|assistant|>\n", false)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := transformer.Open(dir, cpu.New(), transformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	emit, flush := StreamText(&buf, tok, true)
	out, err := Generate(m, ids, Options{MaxNewTokens: 200, UseCache: true}, emit)
	if err != nil {
		t.Fatal(err)
	}
	if err := flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), tok.Decode(out, true); got != want {
		n := 0
		for n < len(got) && n < len(want) && got[n] == want[n] {
			n++
		}
		t.Errorf("streamed text differs from the decoding at byte %d: %q vs %q", n, got[max(0, n-20):min(len(got), n+20)], want[max(0, n-20):min(len(want), n+20)])
	}
}
