package llama

import (
	"fmt"

	"github.com/tune-ml/tune/transformer"
)

var _ transformer.IncrementalDecoder = (*ForCausalLM)(nil)

// NewKVCache allocates a key/value cache for up to maxLen positions under the current policy (per layer two
// (maxLen, Hkv·D) buffers in the GEMM dtype; transformer.IncrementalDecoder). A config with a sliding window
// caps maxLen at it, as Forward caps the sequence length.
func (m *ForCausalLM) NewKVCache(maxLen int) (*transformer.KVCache, error) {
	if w := m.Config.SlidingWindow; w > 0 && maxLen > w {
		return nil, fmt.Errorf("llama: a key/value cache of %d positions exceeds the config's sliding_window %d; tune "+
			"computes full causal attention only, which equals the sliding window for at most %d positions", maxLen, w, w)
	}
	// The cache is allocated whole before the first token (transformers' DynamicCache grows instead), so a
	// max_new_tokens far beyond the model's context would take all memory at once: cap it at the context.
	if p := m.Config.MaxPositionEmbeddings; p > 0 && maxLen > p {
		return nil, fmt.Errorf("llama: a key/value cache of %d positions exceeds max_position_embeddings %d, the "+
			"model's context", maxLen, p)
	}
	return transformer.NewKVCache(m.Backend(), m, len(m.Layers), maxLen, m.Config.KVDim(), m.Policy().GemmDType())
}

// ContextLimit returns max_position_embeddings, or sliding_window when smaller (transformer.ContextLimiter); 0
// when neither is set.
func (m *ForCausalLM) ContextLimit() int {
	p, w := m.Config.MaxPositionEmbeddings, m.Config.SlidingWindow
	if w > 0 && (p <= 0 || w < p) {
		return w
	}
	return max(p, 0)
}

// Decode runs ids at positions cache.Len … cache.Len+len(ids)−1 (transformer.IncrementalDecoder): the same
// layers as Forward on a (1, len(ids)) pass, with k_proj and v_proj (after q/k norm and RoPE at those
// positions) written into the cache and the fused attention reading every cached position. It returns the
// FP32 logits of every new token when all is set, else of the last one.
func (m *ForCausalLM) Decode(cache *transformer.KVCache, ids []int32, all bool) (logits []float32, err error) {
	defer recoverError(&err)
	m.last.ready = false
	n := len(ids)
	if err := cache.Check(m, len(m.Layers), m.Policy().GemmDType(), n); err != nil {
		return nil, fmt.Errorf("llama: %w", err)
	}
	for i, id := range ids {
		if id < 0 || int(id) >= m.Config.VocabSize {
			return nil, fmt.Errorf("llama: token id %d at %d is outside the vocabulary [0, %d)", id, i, m.Config.VocabSize)
		}
	}
	start := cache.Len
	if err := m.carve(1, n); err != nil {
		return nil, err
	}
	a, h := &m.act, &m.host
	h.pos = grow(h.pos, n)
	for i := range h.pos {
		h.pos[i] = int32(start + i)
	}
	if err := m.ensureRope(start + n); err != nil {
		return nil, err
	}
	if err := m.Backend().Upload(a.ids, ids); err != nil {
		return nil, fmt.Errorf("llama: uploading input ids: %w", err)
	}
	if err := m.Backend().Upload(a.pos, h.pos); err != nil {
		return nil, fmt.Errorf("llama: uploading position ids: %w", err)
	}
	in := passInputs{b: 1, t: n, pos: a.pos, cos: m.rope.cos, sin: m.rope.sin}
	p := m.NewPass(transformer.ForwardOptions{ReuseWeightCasts: start > 0})
	if err := m.Backend().Embedding(a.hs[0], a.ids, m.Embed.Value); err != nil {
		return nil, fmt.Errorf("llama: embed_tokens: %w", err)
	}
	for i, l := range m.Layers {
		var kv layerKV
		if kv.k, kv.v, err = cache.Rows(i, start, n); err != nil {
			return nil, err
		}
		if kv.kAll, kv.vAll, err = cache.Rows(i, 0, start+n); err != nil {
			return nil, err
		}
		if err := l.forward(&p, &m.sc, &in, &kv, a.hs[i+1], a.hs[i], link{}); err != nil {
			return nil, fmt.Errorf("llama: layer %d: %w", i, err)
		}
	}
	if err := m.Norm.Forward(&p, a.xf, a.rstdF, a.hs[len(m.Layers)]); err != nil {
		return nil, fmt.Errorf("llama: norm: %w", err)
	}
	rows, c := a.xf, m.Config.HiddenSize
	if !all {
		rows = mustView(a.xf, (n-1)*c, 1, c) // (1, C) h: the last token's
	}
	logits = make([]float32, rows.Numel()/c*m.Config.VocabSize)
	if err := m.Head.Logits(&p, rows, logits); err != nil {
		return nil, fmt.Errorf("llama: lm_head: %w", err)
	}
	cache.Len += n
	return logits, nil
}
