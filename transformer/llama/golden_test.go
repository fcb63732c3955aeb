package llama

import (
	"math"
	"os"
	"slices"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/detweights"
	"github.com/tune-ml/tune/transformer/transformertest"
)

// goldenScript makes every file these tests read.
const goldenScript = "python3 tools/reference/decoder_goldens.py testdata/decoder (on the GPU machine: torch + transformers + peft)"

// goldenSeed is decoder_goldens.py's detweights seed.
const goldenSeed = 20261201

func openGolden(t *testing.T, rel ...string) *transformertest.Golden {
	t.Helper()
	return transformertest.OpenGolden(t, goldenScript, append([]string{"decoder"}, rel...)...)
}

// goldenConfig parses the config.json (transformers 5 layout) the script stored in the metadata.
func goldenConfig(t *testing.T, g *transformertest.Golden) Config {
	t.Helper()
	cfg, err := ParseConfig([]byte(g.Metadata("config")))
	if err != nil {
		t.Fatalf("%s metadata config: %v", g.Ck.Path, err)
	}
	return cfg
}

// goldenBatch rebuilds the inputs (with labels) the script fed transformers.
func goldenBatch(g *transformertest.Golden) *loaders.Batch {
	shape := g.Shape("inputs/input_ids")
	return &loaders.Batch{B: shape[0], T: shape[1], InputIDs: g.I32("inputs/input_ids"),
		AttentionMask: g.I32("inputs/attention_mask"), Labels: g.I64("inputs/labels")}
}

// detModel builds cfg on b with DecoderValues weights.
func detModel(t testing.TB, b tensor.Backend, cfg Config) *ForCausalLM {
	t.Helper()
	m, err := build(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, np := range m.namedParameters() {
		if err := b.Upload(np.Param.Value, detweights.DecoderValues(goldenSeed, np.Name, np.Param.Value.Shape)); err != nil {
			t.Fatal(err)
		}
	}
	m.WeightsUpdated()
	return m
}

var goldenPolicies = map[string]amp.Policy{"fp32": amp.FP32, "bf16": amp.BF16, "fp16": amp.FP16}

// TestGoldens runs every case of decoder_goldens.py on the CPU backend in FP32, BF16 and FP16 and compares the
// logits (all B·T·V), the loss and, where recorded, every parameter's gradient with transformers': Llama with
// llama3 rope scaling and GQA (untied), Qwen2 with q/k/v biases and a padding id used as a token (tied),
// Qwen3 with q/k norms and explicit head_dim (tied), Mistral (untied, sliding window ≥ T).
func TestGoldens(t *testing.T) {
	for _, name := range []string{"llama_rope3", "qwen2_bias", "qwen3_qknorm", "mistral"} {
		t.Run(name, func(t *testing.T) {
			tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
				runGolden(t, b, openGolden(t, name+".safetensors"))
			})
		})
	}
}

func runGolden(t *testing.T, b tensor.Backend, g *transformertest.Golden) {
	cfg := goldenConfig(t, g)
	m := detModel(t, b, cfg)
	batch := goldenBatch(g)
	for _, mode := range []string{"fp32", "bf16", "fp16"} {
		t.Run(mode, func(t *testing.T) {
			m.SetPolicy(goldenPolicies[mode])
			out, err := m.Forward(batch, transformer.ForwardOptions{Train: true, HostLogits: true})
			if err != nil {
				t.Fatal(err)
			}
			tol := transformertest.Tolerance(mode)
			e, i := tensortest.RelErr(out.Logits, g.F32(mode+"/logits"))
			switch {
			case e <= tol:
				t.Logf("logits: relative error %.3g", e)
			case mode != "fp32":
				// As for the gradients (transformertest.CompareGrads): under autocast tune keeps the attention
				// scores in FP32 where eager attention rounds Q·Kᵀ to the half type, so the two runs round
				// differently; tune passes when it is as close to transformers-FP32 as transformers' own
				// autocast run is, within 2x.
				truth := g.F32("fp32/logits")
				mine, _ := tensortest.RelErr(out.Logits, truth)
				own, _ := tensortest.RelErr(g.F32(mode+"/logits"), truth)
				if mine > 2*own {
					t.Errorf("logits: relative error %.3g > %.0e at %d (vs FP32: tune %.3g, transformers %.3g)", e, tol, i, mine, own)
				} else {
					t.Logf("logits: relative error vs transformers-%s %.3g > %.0e, but vs FP32 tune %.3g <= 2 x transformers %.3g", mode, e, tol, mine, own)
				}
			default:
				t.Errorf("logits: relative error %.3g > %.0e at %d", e, tol, i)
			}
			want := g.F32(mode + "/loss")[0]
			if e := math.Abs(float64(out.Loss-want)) / math.Abs(float64(want)); e > tol {
				t.Errorf("loss %v, transformers %v (relative error %.3g > %.0e)", out.Loss, want, e, tol)
			}
			if err := m.ZeroGrad(); err != nil {
				t.Fatal(err)
			}
			if err := m.Backward(1); err != nil {
				t.Fatal(err)
			}
			if !g.Has(mode + "/grad/model.norm.weight") {
				return
			}
			transformertest.CompareGrads(t, g, m, mode)
		})
	}
}

// TestCheckpointsSavedByTransformers loads the checkpoints transformers saved — Llama in BF16 with a v5
// config.json and a generation_config.json, Qwen2 in F32 with a v4 config.json, Mistral in F16 in shards — and
// compares the FP32 logits with from_pretrained's, and the weights with the detweights values rounded to the
// checkpoint's dtype. Saving writes the generation config back, and the saved directory loads again to the
// same logits (sharded with a small shard limit).
func TestCheckpointsSavedByTransformers(t *testing.T) {
	logits := openGolden(t, "checkpoints.safetensors")
	for _, c := range []struct{ dir, golden string }{
		{"llama_v5_bf16", "llama_rope3"}, {"qwen2_v4_f32", "qwen2_bias"}, {"mistral_sharded_f16", "mistral"},
	} {
		t.Run(c.dir, func(t *testing.T) {
			dir := testutil.Testdata(t, "decoder", "ckpt", c.dir)
			b := cpuBackend()
			m, report, err := LoadPretrained(dir, b, transformer.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s", report.LoadReport)
			batch := goldenBatch(openGolden(t, c.golden+".safetensors"))
			out, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true})
			if err != nil {
				t.Fatal(err)
			}
			want := logits.F32(c.dir + "/logits")
			if e, i := tensortest.RelErr(out.Logits, want); e > 1e-5 {
				t.Errorf("logits: relative error %.3g > 1e-5 at %d", e, i)
			}
			saved := t.TempDir()
			if err := m.SaveSharded(saved, 8000); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(saved + "/" + loaders.SafetensorsIndexName); err != nil {
				t.Errorf("SaveSharded(8000) wrote no index: %v", err)
			}
			_, hadGen := os.Stat(dir + "/" + GenerationConfigName)
			if _, err := os.Stat(saved + "/" + GenerationConfigName); (err == nil) != (hadGen == nil) {
				t.Errorf("generation_config.json kept: %v, source has one: %v", err == nil, hadGen == nil)
			}
			back, _, err := LoadPretrained(saved, b, transformer.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if back.Config.Rope != m.Config.Rope || back.Config.RopeTheta != m.Config.RopeTheta || back.Config.TieWordEmbeddings != m.Config.TieWordEmbeddings {
				t.Errorf("config after a save round trip: %+v, want %+v", back.Config, m.Config)
			}
			again, err := back.Forward(batch, transformer.ForwardOptions{HostLogits: true})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(again.Logits, out.Logits) {
				t.Error("the saved checkpoint gives other logits")
			}
		})
	}
}
