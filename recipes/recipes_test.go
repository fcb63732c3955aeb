package recipes

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// decode decodes text as recipe file "r.yaml" in directory "dir".
func decode(text string, overrides ...string) (*Recipe, error) {
	return Decode([]byte(text), "r.yaml", "dir", overrides)
}

// minimal is the smallest valid recipe (checkpoint model, training data) plus extra lines.
func minimal(extra string) string {
	return "model:\n  path: ckpt\ndata:\n  train: train.tsv\n" + extra
}

func TestEmbeddedRecipes(t *testing.T) {
	testutil.IsolateCache(t)
	var names []string
	for _, info := range List() {
		names = append(names, info.Name)
		if info.Description == "" || strings.HasPrefix(info.Description, info.Name) {
			t.Errorf("%s: description %q should be the first comment line without the name", info.Name, info.Description)
		}
	}
	if !slices.Equal(names, []string{"bert", "bert-full", "gpt2-full", "llama-lora", "qwen-lora", "tiny", "tiny-chat"}) {
		t.Fatalf("embedded recipes %v, want [bert bert-full gpt2-full llama-lora qwen-lora tiny tiny-chat]", names)
	}
	for _, c := range []struct {
		name  string
		check func(r *Recipe) string
	}{
		{"bert", func(r *Recipe) string {
			l := r.LoRA
			if l == nil || l.R != 8 || l.LoraAlpha != 16 || l.LoraDropout != 0.1 || !slices.Equal(l.TargetModules.Names, []string{"query", "value"}) ||
				!slices.Contains(l.ModulesToSave, "classifier") || !r.Training.BF16 || r.Training.EvalStrategy != "epoch" {
				return "want LoRA r 8, alpha 16, dropout 0.1 on [query value], classifier saved, bf16, eval each epoch"
			}
			return ""
		}},
		{"bert-full", func(r *Recipe) string {
			if r.LoRA != nil || r.Training.LearningRate != 2e-5 || !r.Training.BF16 {
				return "want full fine-tuning at 2e-5 in bf16"
			}
			return ""
		}},
		{"tiny", func(r *Recipe) string {
			c := r.Model.Config
			if c == nil || c.HiddenSize != 64 || c.NumHiddenLayers != 2 || c.NumAttentionHeads != 4 || c.IntermediateSize != 128 ||
				c.MaxPositionEmbeddings != 64 || r.Device != "cpu" || r.Training.FP16 || r.Training.BF16 || r.LoRA != nil {
				return "want a 64-hidden 2-layer 4-head BERT from scratch, FP32 on the CPU"
			}
			if err := r.CheckFiles(); err != nil {
				return "its files: " + err.Error()
			}
			return ""
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := Load(c.name, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.Source != "embedded:"+c.name {
				t.Errorf("Source %q", r.Source)
			}
			if msg := c.check(r); msg != "" {
				t.Errorf("%s: %s; got %+v", c.name, msg, r)
			}
			// The file in the repository decodes to the same recipe, paths aside.
			f, err := Load(filepath.Join(".", c.name+".yaml"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.Training, r.Training) || !reflect.DeepEqual(f.LoRA, r.LoRA) {
				t.Errorf("the file and the embedded copy differ")
			}
		})
	}
}

// TestTinyFromTheRepository: recipes/tiny.yaml's relative paths resolve against its directory and exist.
func TestTinyFromTheRepository(t *testing.T) {
	r, err := Load("tiny.yaml", nil)
	if err == nil && r.Source != "tiny.yaml" {
		t.Fatalf("a tiny.yaml file in the working directory must win over the embedded name (Source %q)", r.Source)
	}
	if err != nil {
		t.Fatal(err)
	}
	if r.Data.Train != filepath.Join("data", "tiny", "train.tsv") || r.Tokenizer.Path != filepath.Join("data", "tiny") {
		t.Errorf("paths %q %q, want them under data/tiny", r.Data.Train, r.Tokenizer.Path)
	}
	if err := r.CheckFiles(); err != nil {
		t.Error(err)
	}
}

// TestUnknownKeys: an unknown key names the file, the line, the section and the closest valid key.
func TestUnknownKeys(t *testing.T) {
	for _, c := range []struct {
		name, text, want string
	}{
		{"typo in training", minimal("training:\n  num_train_epochs: 1\n  learnig_rate: 2e-5\n"),
			"r.yaml:7: unknown key 'learnig_rate' in training; did you mean 'learning_rate'?"},
		{"typo of a section", minimal("trainng:\n  seed: 1\n"),
			"r.yaml:5: unknown key 'trainng' at the top level; did you mean 'training'?"},
		{"swapped letters", minimal("lora:\n  lora_aplha: 16\n"),
			"r.yaml:6: unknown key 'lora_aplha' in lora; did you mean 'lora_alpha'?"},
		{"a key in the wrong section", minimal("lora:\n  learning_rate: 2e-4\n"),
			"r.yaml:6: unknown key 'learning_rate' in lora; it belongs in training (write training.learning_rate)"},
		{"HF's removed warmup_ratio", minimal("training:\n  warmup_ratio: 0.1\n"),
			"r.yaml:6: unknown key 'warmup_ratio' in training; transformers v5 removed it: write warmup_steps with a value below 1"},
		{"nested model config", "model:\n  config:\n    hidden_sise: 64\n",
			"r.yaml:3: unknown key 'hidden_sise' in model.config; did you mean 'hidden_size'?"},
		{"a key set twice", minimal("data:\n  train: b.tsv\n"),
			"r.yaml:5: key 'data' is set twice (first at r.yaml:3)"},
		{"nothing close lists the valid keys", minimal("device: cpu\nzzzzzzzz: 1\n"),
			"r.yaml:6: unknown key 'zzzzzzzz' at the top level; valid keys: data, device, lora, model, tokenizer, training"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decode(c.text)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error\n%v\nwant it to contain\n%s", err, c.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid")
			}
		})
	}
}

// TestNumbersB34 checks YAML 1.2 floats such as 1e-5 (yaml.v3; PyYAML's YAML 1.1 reads them as strings): 1e-5-style numbers are floats, a quoted number in a float field is an error
// naming the line, .inf parses but is rejected by validation, and fp16: yes is true.
func TestNumbersB34(t *testing.T) {
	for _, c := range []struct {
		text string
		want float64
	}{{"1e-5", 1e-5}, {"2e-5", 2e-5}, {"5E-4", 5e-4}, {"3.e-4", 3e-4}, {".5e-3", 5e-4}} {
		t.Run(c.text, func(t *testing.T) {
			r, err := decode(minimal("training:\n  learning_rate: " + c.text + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			if r.Training.LearningRate != c.want {
				t.Errorf("learning_rate: %s → %v, want %v", c.text, r.Training.LearningRate, c.want)
			}
		})
	}
	t.Run("quoted 1e-5 is an error naming the line", func(t *testing.T) {
		_, err := decode("training:\n  learning_rate: \"1e-5\"\n")
		want := `r.yaml:2: training.learning_rate: "1e-5" is quoted, so it is a string, not a number: write 1e-5 without quotes`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v, want %s", err, want)
		}
	})
	t.Run(`quoted "true" says it is quoted`, func(t *testing.T) { // findings5 #25: "true is not true or false"
		_, err := decode("training:\n  fp16: \"true\"\n")
		want := `r.yaml:2: training.fp16: "true" is quoted, so it is a string, not true or false: write true without quotes`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v, want %s", err, want)
		}
	})
	t.Run(".inf parses and is rejected by validation", func(t *testing.T) {
		_, err := decode(minimal("training:\n  learning_rate: .inf\n"))
		want := "r.yaml:6: training.learning_rate: must be a finite number (got +Inf)"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v, want %s", err, want)
		}
	})
	t.Run("fp16: yes is true", func(t *testing.T) {
		r, err := decode(minimal("training:\n  fp16: yes\n"))
		if err != nil || !r.Training.FP16 {
			t.Fatalf("fp16: yes → %v (%v), want true", r != nil && r.Training.FP16, err)
		}
	})
}

// TestFP16AndBF16B13: fp16 and bf16 both true is a validation error at startup, at the line of the section.
func TestFP16AndBF16B13(t *testing.T) {
	_, err := decode(minimal("training:\n  fp16: true\n  bf16: true\n"))
	want := "r.yaml:7: training.bf16: fp16 and bf16 are both true"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want %s", err, want)
	}
	if _, err := decode(minimal("training:\n  fp16: true\n"), "training.bf16=true"); err == nil ||
		!strings.Contains(err.Error(), "override training.bf16=true: training.bf16: fp16 and bf16 are both true") {
		t.Fatalf("an override turning on bf16 next to fp16: %v", err)
	}
}

func TestOverrides(t *testing.T) {
	base := minimal("training:\n  learning_rate: 1e-4\n")
	for _, c := range []struct {
		name      string
		overrides []string
		check     func(r *Recipe) bool
		wantErr   string
	}{
		{"a float", []string{"training.learning_rate=2e-5"}, func(r *Recipe) bool { return r.Training.LearningRate == 2e-5 }, ""},
		{"the last override wins", []string{"training.seed=1", "training.seed=7"}, func(r *Recipe) bool { return r.Training.Seed == 7 }, ""},
		{"lora.r creates the lora section with PEFT's defaults", []string{"lora.r=16"}, func(r *Recipe) bool {
			return r.LoRA != nil && r.LoRA.R == 16 && r.LoRA.LoraAlpha == 8 && r.LoRA.Bias == "none"
		}, ""},
		{"a flow list", []string{"lora.target_modules=[query, key, value]"}, func(r *Recipe) bool {
			return slices.Equal(r.LoRA.TargetModules.Names, []string{"query", "key", "value"})
		}, ""},
		{"a scalar target stays one string", []string{"lora.target_modules=all-linear"}, func(r *Recipe) bool {
			return r.LoRA.TargetModules.IsAllLinear()
		}, ""},
		{"override paths are relative to the working directory", []string{"data.train=other.tsv", "model.path=/abs/ckpt"}, func(r *Recipe) bool {
			return r.Data.Train == "other.tsv" && r.Model.Path == "/abs/ckpt" && r.Tokenizer.Path == "/abs/ckpt"
		}, ""},
		{"recipe paths are relative to the recipe", nil, func(r *Recipe) bool {
			return r.Data.Train == filepath.Join("dir", "train.tsv") && r.Model.Path == filepath.Join("dir", "ckpt")
		}, ""},
		{"an empty value clears a path", []string{"data.eval="}, func(r *Recipe) bool { return r.Data.Eval == "" }, ""},
		{"a new section key", []string{"device=cuda:1"}, func(r *Recipe) bool { return r.Device == "cuda:1" }, ""},
		{"unknown key", []string{"training.lerning_rate=1"}, nil,
			"override training.lerning_rate=1: unknown key 'lerning_rate' in training; did you mean 'learning_rate'?"},
		{"wrong type", []string{"training.learning_rate=abc"}, nil,
			"override training.learning_rate=abc: training.learning_rate: abc is not a number (such as 2e-5 or 3)"},
		{"a section given a value", []string{"model=../bert-base-uncased"}, nil,
			"override model=../bert-base-uncased: model is a section of keys, not a value (got \"../bert-base-uncased\"); did you mean 'model.path'?"},
		{"a section given a list", []string{"training=[1,2]"}, nil, // the list was printed as got ""
			"override training=[1,2]: training is a section of keys, not a value (got \"[1, 2]\")"},
		{"a value used as a section", []string{"device.id=1"}, nil, "override device.id=1: device takes a value, not a section of keys"},
		{"a value of the recipe used as a section", []string{"training.learning_rate.x=1"}, nil, "override training.learning_rate.x=1: training.learning_rate.x: 'training.learning_rate' is a value, not a section"},
		{"no equals sign", []string{"training.seed"}, nil, "override training.seed: an override must be key=value"},
		{"invalid after override", []string{"training.learning_rate=0"}, nil,
			"override training.learning_rate=0: training.learning_rate: must be > 0 (got 0)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := decode(base, c.overrides...)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error\n%v\nwant\n%s", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(r) {
				t.Errorf("overrides %v gave %+v", c.overrides, r)
			}
		})
	}
}

// TestValidation: rules that span sections, each reported with the key's line.
func TestValidation(t *testing.T) {
	for _, c := range []struct {
		name, text, want string
	}{
		{"no model", "data:\n  train: a.tsv\n", "r.yaml: model: set model.path"},
		{"both model forms", "model:\n  path: m\n  config: {}\ndata:\n  train: a.tsv\n", "r.yaml:1: model: set either model.path or model.config, not both"},
		{"eval strategy without eval data", minimal("training:\n  eval_strategy: epoch\n"),
			"data.eval: is required because training.eval_strategy is epoch"},
		{"no training data", "model:\n  path: m\n", "data.train: is required"},
		{"unknown extension", "model:\n  path: m\ndata:\n  train: a.txt\n",
			"r.yaml:4: data.train: cannot tell the format of dir/a.txt from its extension; set data.format"},
		{"format given", "model:\n  path: m\ndata:\n  train: a.txt\n  format: tsv\n", ""},
		{"bad device", minimal("device: gpu\n"), "r.yaml:5: device: must be auto, cpu, cuda or cuda:N"},
		{"lora error with its line", minimal("lora:\n  r: 0\n"), "r.yaml:6: lora.r: must be > 0 (got 0)"},
		{"scratch model needs a tokenizer", "model:\n  config:\n    hidden_size: 64\n    num_attention_heads: 4\ndata:\n  train: a.tsv\n",
			"tokenizer.path: is required when model.config"},
		{"heads must divide hidden", "model:\n  config:\n    hidden_size: 64\n    num_attention_heads: 5\ntokenizer:\n  path: v.txt\ndata:\n  train: a.tsv\n",
			"r.yaml:4: model.config.num_attention_heads: hidden_size 64 is not a multiple of num_attention_heads 5"},
		{"max_length beyond positions", "model:\n  config:\n    max_position_embeddings: 32\ntokenizer:\n  path: v.txt\ndata:\n  train: a.tsv\n  max_length: 64\n",
			"r.yaml:8: data.max_length: 64 exceeds model.config.max_position_embeddings 32"},
		{"a bad value under a default key is placed at its section", minimal("training:\n  save_strategy: steps\n  save_steps: 0\n"),
			"r.yaml:7: training.save_steps: must be > 0 when save_strategy is steps"},
		{"not a mapping", "- a\n- b\n", "a recipe is a mapping of sections"},
		{"broken YAML", "model: [\n", "not valid YAML"},
		{"empty lora section means PEFT defaults", minimal("lora:\n"), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decode(c.text)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error\n%v\nwant\n%s", err, c.want)
			}
		})
	}
}

// TestAllProblemsAtOnce: several mistakes are reported together, in file order for the decoding ones.
func TestAllProblemsAtOnce(t *testing.T) {
	_, err := decode(minimal("training:\n  learnig_rate: 1\n  seeed: 3\n"))
	if err == nil || !strings.Contains(err.Error(), "r.yaml:6: unknown key 'learnig_rate'") || !strings.Contains(err.Error(), "r.yaml:7: unknown key 'seeed'") {
		t.Fatalf("want both typos reported, got %v", err)
	}
}

// TestMarshalRoundTrip: the resolved recipe `tune validate` prints decodes to the same recipe.
func TestMarshalRoundTrip(t *testing.T) {
	testutil.IsolateCache(t)
	for _, name := range []string{"bert", "tiny"} {
		r, err := Load(name, nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := r.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decode(out, "printed", "/", nil)
		if err != nil {
			t.Fatalf("%s: the printed recipe does not decode: %v\n%s", name, err, out)
		}
		// Where the recipe and its paths came from is not printed; paths outside the embedded tree are printed
		// as the recipe writes them (TestMarshalKeepsOutsidePathsAsWritten), the others round-trip.
		back.Source, back.Warnings, back.outside = r.Source, r.Warnings, r.outside
		for _, in := range back.inputs() {
			if _, ok := r.outside[in.key]; ok {
				*in.path = ""
			}
		}
		if _, ok := r.outside["model.path"]; ok {
			back.Tokenizer.Path = ""
		}
		want := *r
		for _, in := range want.inputs() {
			if _, ok := r.outside[in.key]; ok {
				*in.path = ""
			}
		}
		if _, ok := r.outside["model.path"]; ok && r.Tokenizer.Path == r.Model.Path {
			want.Tokenizer.Path = ""
		}
		r = &want
		if !reflect.DeepEqual(back, r) {
			t.Errorf("%s: round trip differs:\n%+v\n%+v", name, back, r)
		}
	}
}

func TestModelConfigJSON(t *testing.T) {
	c := DefaultModelConfig()
	c.HiddenSize, c.NumLabels = 64, 3
	b, err := c.ConfigJSON()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["model_type"] != "bert" || m["hidden_size"] != 64.0 || len(m["id2label"].(map[string]any)) != 3 ||
		m["classifier_dropout"] != nil || m["layer_norm_eps"] != 1e-12 {
		t.Errorf("config.json %s", b)
	}
	if _, ok := m["num_labels"]; ok {
		t.Error("num_labels is not a config.json key; transformers derives it from id2label")
	}
}

func TestEmbeddedFiles(t *testing.T) {
	files, err := EmbeddedFiles("tiny")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"data/tiny/train.tsv", "data/tiny/dev.tsv", "data/tiny/vocab.txt", "data/tiny/tokenizer.json"} {
		if !slices.Contains(files, want) {
			t.Errorf("EmbeddedFiles(tiny) = %v, missing %s", files, want)
		}
	}
	if files, _ := EmbeddedFiles("bert"); len(files) != 0 {
		t.Errorf("bert points outside the embedded files, got %v", files)
	}
	if _, err := Lookup("tinyy"); err == nil || !strings.Contains(err.Error(), `did you mean "tiny"?`) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Lookup(tinyy): %v", err)
	}
}

// TestBaseModelNameOrPath: what a LoRA run records as base_model_name_or_path is a path PEFT can load: an
// embedded recipe's model.path as the absolute path of the copy tune unpacked into its cache (tester4: the
// recipe's own "data/tiny-chat" named nothing from the working directory), a model.path override or a recipe
// file's model.path made absolute.
func TestBaseModelNameOrPath(t *testing.T) {
	testutil.IsolateCache(t)
	abs, err := filepath.Abs(filepath.Join("data", "tiny-chat"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ref       string
		overrides []string
		want      string
	}{
		{"tiny-chat", nil, ""}, // "": the unpacked copy, r.Model.Path
		{"tiny-chat", []string{"model.path=" + filepath.Join("data", "tiny-chat")}, abs},
		{"tiny-chat.yaml", nil, abs},
	} {
		r, err := Load(c.ref, append(c.overrides, "lora.r=4", "training.output_dir="+t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.BaseModelNameOrPath()
		if c.want == "" {
			c.want = r.Model.Path
			if st, serr := os.Stat(got); serr != nil || !st.IsDir() || !filepath.IsAbs(got) {
				t.Errorf("%s: base_model_name_or_path %q is not an existing absolute directory (%v)", c.ref, got, serr)
			}
		}
		if err != nil || got != c.want {
			t.Errorf("%s %v: %q, %v; want %q", c.ref, c.overrides, got, err, c.want)
		}
		if rel, ok := EmbeddedDataPath(r.Model.Path); ok != (c.ref == "tiny-chat" && c.overrides == nil) || (ok && rel != "data/tiny-chat") {
			t.Errorf("%s %v: EmbeddedDataPath(%s) = %q, %v", c.ref, c.overrides, r.Model.Path, rel, ok)
		}
	}
}
