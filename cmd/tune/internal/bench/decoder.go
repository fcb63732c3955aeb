package bench

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/llama"
)

// DecoderNames lists the causal-LM preset shapes (llama.PresetNames): smollm2-135m, qwen2.5-0.5b, llama-3.2-1b.
func DecoderNames() []string { return llama.PresetNames() }

// decoderConfig returns the llama.Config of a decoder preset name, or of a config.json whose model_type is a
// Llama-family type (llama, qwen2, qwen3, mistral); ok is false when name is neither (a BERT preset or config).
func decoderConfig(name string) (cfg *llama.Config, ok bool, err error) {
	if c, err := llama.Preset(name); err == nil {
		return &c, true, nil
	}
	if !isJSONPath(name) {
		return nil, false, nil
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, false, fmt.Errorf("bench: --model %s: %w", name, err)
	}
	var head struct {
		ModelType string `json:"model_type"`
	}
	if json.Unmarshal(data, &head) != nil || !slices.Contains(llama.ModelTypes(), head.ModelType) {
		return nil, false, nil // BERT's reader reports what is wrong with it
	}
	c, err := llama.ParseConfig(data)
	if err != nil {
		return nil, false, fmt.Errorf("bench: --model %s: %w", name, err)
	}
	return &c, true, nil
}

// SyntheticCausalBatch returns a (b, t) causal-LM batch: token ids uniform in [0, vocab) from seed, no padding
// (no attention mask, as tools/reference/bench_decoder_pytorch.py passes none), labels equal to the ids (the
// model shifts them: every position but the last of each row is supervised).
func SyntheticCausalBatch(b, t, vocab int, seed uint64) *loaders.Batch {
	rng := rand.New(rand.NewPCG(seed, 0x62656e6368)) // "bench"
	batch := &loaders.Batch{B: b, T: t, InputIDs: make([]int32, b*t), Labels: make([]int64, b*t)}
	for i := range batch.InputIDs {
		batch.InputIDs[i] = int32(rng.IntN(vocab))
		batch.Labels[i] = int64(batch.InputIDs[i])
	}
	return batch
}

// buildDecoder makes the causal LM of s (s.Decoder) on b with gradient checkpointing as s says.
func buildDecoder(b tensor.Backend, s *Spec) (arenaModel, trainee, error) {
	m, err := llama.New(b, *s.Decoder, s.Seed)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: building %s: %w", s.Model, err)
	}
	m.SetGradientCheckpointing(s.GradientCheckpointing)
	return m, m, nil
}

// decoderShape is what the FLOP count needs of a causal LM beyond its projections.
func decoderShape(cfg *llama.Config) modelShape {
	return modelShape{layers: cfg.NumHiddenLayers, attnWidth: cfg.QDim(), causal: true,
		headV: cfg.VocabSize, headC: cfg.HiddenSize}
}

// headTrained reports whether the LM head's weight (lm_head, or the embedding table it is tied to) trains.
func headTrained(m trainee, cfg *llama.Config) bool {
	name := "lm_head.weight"
	if cfg.TieWordEmbeddings {
		name = "model.embed_tokens.weight"
	}
	for _, np := range m.NamedParameters() {
		if np.Name == name {
			return np.Trainable
		}
	}
	return false
}

// arenaModel is what Run and Plan need of the base model besides training it: its step arena.
type arenaModel interface {
	// Reserve carves the step arena for a b×t batch.
	Reserve(b, t int) error
	// PlanArena lists the step arena's buffers for a b×t batch without allocating them.
	PlanArena(b, t int) ([]transformer.ArenaBuffer, int64, error)
}

// loraTask returns the PEFT task type of the spec's model.
func (s *Spec) loraTask() string {
	if s.Decoder != nil {
		return "CAUSAL_LM"
	}
	return lora.TaskSeqCls
}
