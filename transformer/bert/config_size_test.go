package bert

import (
	"errors"
	"github.com/tune-ml/tune/transformer"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/loaders"
)

// TestNumParameters: the closed form agrees with the parameters a built model holds and with loaders' name
// table, gives transformers' 109,483,778 for bert-base with 2 labels, and saturates instead of overflowing.
func TestNumParameters(t *testing.T) {
	base := DefaultBertConfig()
	if got := base.NumParameters(); got != 109_483_778 {
		t.Errorf("bert-base: %d parameters, want 109,483,778 (transformers' num_parameters())", got)
	}
	cfg := tinyConfig()
	m := newTestModel(t, cpuBackend(), cfg, 1)
	var built int64
	for _, p := range m.NamedParameters() {
		built += int64(p.Value.Numel())
	}
	hf, err := cfg.ToHF(nil)
	if err != nil {
		t.Fatal(err)
	}
	var table int64
	for _, s := range loaders.BertSequenceClassificationTensors(hf) {
		n := int64(1)
		for _, d := range s.Shape {
			n *= int64(d)
		}
		table += n
	}
	if got := cfg.NumParameters(); got != built || got != table {
		t.Errorf("tiny: NumParameters %d, the built model %d, the name table %d", got, built, table)
	}
	huge := base
	huge.VocabSize, huge.HiddenSize, huge.NumHiddenLayers = math.MaxInt32, math.MaxInt32, math.MaxInt32
	if got := huge.NumParameters(); got != math.MaxInt64 {
		t.Errorf("a count beyond 2^62: %d, want math.MaxInt64", got)
	}
}

// TestNameTableMatchesModel: LoadPretrained checks a checkpoint against loaders' name table before it builds
// the model, so the table must list exactly the model's parameters, in order, with their shapes.
func TestNameTableMatchesModel(t *testing.T) {
	cfg := tinyConfig()
	m := newTestModel(t, cpuBackend(), cfg, 1)
	hf, err := cfg.ToHF(nil)
	if err != nil {
		t.Fatal(err)
	}
	table := loaders.BertSequenceClassificationTensors(hf)
	params := m.NamedParameters()
	if len(table) != len(params) {
		t.Fatalf("the table has %d tensors, the model %d parameters", len(table), len(params))
	}
	for i, p := range params {
		if table[i].Name != p.Name || !slices.Equal(table[i].Shape, []int(p.Value.Shape)) {
			t.Errorf("%d: table %s %v, model %s %v", i, table[i].Name, table[i].Shape, p.Name, p.Value.Shape)
		}
	}
}

// TestCheckSize: sizes beyond 32 bits or a model beyond MaxParameters are refused by Validate with a
// *SizeError naming the key to fix, before anything is allocated; real BERT shapes pass.
func TestCheckSize(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(c *BertConfig)
		key  string // "" means valid
		want string
	}{
		{"bert-base", func(*BertConfig) {}, "", ""},
		{"bert-large", func(c *BertConfig) {
			c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize = 1024, 24, 16, 4096
		}, "", ""},
		{"a multilingual vocabulary (250k)", func(c *BertConfig) { c.VocabSize = 250_002 }, "", ""},
		{"vocab_size beyond 32 bits", func(c *BertConfig) { c.VocabSize = 3_000_000_000 }, "vocab_size",
			"vocab_size: 3000000000 is more than 2147483647"},
		{"a vocab_size that fits 32 bits but not memory", func(c *BertConfig) { c.VocabSize = 100_000_000 }, "vocab_size",
			"vocab_size: 100000000 makes a model of 7.69e+10 parameters (308 GB of FP32 weights), more than tune's limit of 1e+10"},
		{"100000 layers", func(c *BertConfig) { c.NumHiddenLayers = 100_000 }, "num_hidden_layers",
			"num_hidden_layers: 100000 makes a model of 7.09e+11 parameters"},
		{"a huge hidden_size", func(c *BertConfig) { c.HiddenSize, c.NumAttentionHeads = 1<<20, 16 }, "hidden_size",
			"hidden_size: 1048576 makes a model of"},
		// Past 2^62 NumParameters saturates; the message still gives the real count (tester 12 saw 9.22e+18, 36.9 EB).
		{"hidden_size 1e9", func(c *BertConfig) { c.HiddenSize, c.NumAttentionHeads = 1_000_000_000, 16 }, "hidden_size",
			"hidden_size: 1000000000 makes a model of 4.9e+19 parameters (196 EB of FP32 weights)"},
		{"a huge max_position_embeddings", func(c *BertConfig) { c.MaxPositionEmbeddings = 1 << 30 }, "max_position_embeddings",
			"max_position_embeddings: 1073741824 makes a model of"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultBertConfig()
			c.edit(&cfg)
			err := cfg.Validate()
			if c.key == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var se *SizeError
			if !errors.As(err, &se) || se.Key != c.key || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate: %v (%T), want a *SizeError for %s containing %q", err, err, c.key, c.want)
			}
			b := &countingBackend{Backend: cpuBackend()}
			if _, err := NewBertForSequenceClassification(b, cfg, 1); err == nil || b.allocs != 0 {
				t.Errorf("NewBertForSequenceClassification: %v after %d allocations, want an error and none", err, b.allocs)
			}
		})
	}
}

// TestHostMemoryCheck: on the CPU backend a model that needs more than the memory available is an error
// before anything is allocated (instead of the Go runtime's fatal out of memory); with enough memory it builds.
func TestHostMemoryCheck(t *testing.T) {
	cfg := tinyConfig()
	need := uint64(hostBytesPerParameter * cfg.NumParameters())
	saved := memAvailable
	t.Cleanup(func() { memAvailable = saved })
	for _, c := range []struct {
		name  string
		avail uint64
		known bool
		want  string
	}{
		{"too little memory", need - 1, true, "needs about"},
		{"just enough", need, true, ""},
		{"memory unknown (no /proc/meminfo)", 0, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			memAvailable = func() (uint64, bool) { return c.avail, c.known }
			b := &countingBackend{Backend: cpuBackend()}
			_, err := NewBertForSequenceClassification(b, cfg, 1)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "is available") || b.allocs != 0 {
				t.Fatalf("error %v after %d allocations, want %q and none", err, b.allocs, c.want)
			}
		})
	}
}

func TestParseMemAvailable(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       uint64
		ok         bool
	}{
		{"a Linux meminfo", "MemTotal:       16318000 kB\nMemFree:         1000000 kB\nMemAvailable:    8000000 kB\n", 8_000_000 * 1024, true},
		{"no MemAvailable line (kernels before 3.14)", "MemTotal:       16318000 kB\n", 0, false},
		{"a unit other than kB", "MemAvailable:    8000000 MB\n", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := parseMemAvailable([]byte(c.text))
			if got != c.want || ok != c.ok {
				t.Errorf("parseMemAvailable = %d, %v; want %d, %v", got, ok, c.want, c.ok)
			}
		})
	}
}

// TestLoadPretrainedChecksShapesFirst: a config.json that disagrees with its weights (vocab_size 5000 beside
// a 50-row word embedding), or that is absurdly large, is an error naming the tensor or the key before
// LoadPretrained allocates anything.
func TestLoadPretrainedChecksShapesFirst(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(h *loaders.BertConfig)
		want string
	}{
		{"vocab_size disagrees with the word embeddings", func(h *loaders.BertConfig) { h.VocabSize = 5000 },
			"bert.embeddings.word_embeddings.weight"},
		{"intermediate_size disagrees with the feed-forward weights", func(h *loaders.BertConfig) { h.IntermediateSize = 64 },
			"intermediate.dense.weight"},
		{"vocab_size beyond 32 bits", func(h *loaders.BertConfig) { h.VocabSize = 3_000_000_000 },
			"vocab_size: 3000000000 is more than 2147483647"},
		{"a layer more than the checkpoint has", func(h *loaders.BertConfig) { h.NumHiddenLayers = 3 },
			"num_hidden_layers 3 but the checkpoint"},
		// Within the 1e10-parameter limit at hidden_size 64, but the name list it implies (3 million tensors,
		// 1.4 GB and 3.6 s before the layer count was compared first) is refused from the headers.
		{"190000 layers beside two", func(h *loaders.BertConfig) { h.NumHiddenLayers = 190_000 },
			"num_hidden_layers 190000 but the checkpoint"},
		{"100000 bert-base layers", func(h *loaders.BertConfig) {
			h.HiddenSize, h.NumAttentionHeads, h.IntermediateSize, h.NumHiddenLayers = 768, 12, 3072, 100_000
		}, "num_hidden_layers: 100000 makes a model of 7.09e+11 parameters"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := newTestModel(t, cpuBackend(), tinyConfig(), 1).Save(dir); err != nil {
				t.Fatal(err)
			}
			hf, err := loaders.ReadBertConfig(dir)
			if err != nil {
				t.Fatal(err)
			}
			c.edit(hf)
			if err := hf.WriteFile(filepath.Join(dir, loaders.ConfigName)); err != nil {
				t.Fatal(err)
			}
			b := &countingBackend{Backend: cpuBackend()}
			_, _, err = LoadPretrained(dir, b, transformer.LoadOptions{})
			if err == nil || !strings.Contains(err.Error(), c.want) || b.allocs != 0 {
				t.Fatalf("LoadPretrained: %v after %d allocations, want an error containing %q and none", err, b.allocs, c.want)
			}
			// CheckPretrained (tune inspect's check) finds the same problem from the headers.
			ck, cerr := loaders.OpenCheckpoint(dir)
			if cerr != nil {
				t.Fatal(cerr)
			}
			defer ck.Close()
			if _, cerr := CheckPretrained(dir, ck); cerr == nil || cerr.Error() != err.Error() {
				t.Errorf("CheckPretrained: %v\nwant LoadPretrained's error %v", cerr, err)
			}
		})
	}
}
