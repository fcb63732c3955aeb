package gpt2

import (
	"fmt"

	"github.com/tune-ml/tune/transformer"
)

var _ transformer.IncrementalDecoder = (*GPT2LMHeadModel)(nil)

// NewKVCache allocates a key/value cache for up to maxLen positions under the current policy (per block two
// (maxLen, C) buffers in the GEMM dtype; transformer.IncrementalDecoder). maxLen may not exceed n_positions,
// the learned position table's size.
func (m *GPT2LMHeadModel) NewKVCache(maxLen int) (*transformer.KVCache, error) {
	if maxLen > m.Config.NPositions {
		return nil, fmt.Errorf("gpt2: a key/value cache of %d positions exceeds n_positions %d", maxLen, m.Config.NPositions)
	}
	return transformer.NewKVCache(m.Backend(), m, len(m.Blocks), maxLen, m.Config.NEmbd, m.Policy().GemmDType())
}

// ContextLimit returns n_positions, the learned position table's size (transformer.ContextLimiter).
func (m *GPT2LMHeadModel) ContextLimit() int { return m.Config.NPositions }

// Decode runs ids at positions cache.Len … cache.Len+len(ids)−1 (transformer.IncrementalDecoder): wte + wpe at
// those positions, the blocks on a (1, len(ids)) pass with their keys and values copied into the cache and
// the fused attention reading every cached position (also under attn_implementation "eager", whose result
// it equals), ln_f and the head. It returns the FP32 logits of every new token when all is set, else of the
// last one.
func (m *GPT2LMHeadModel) Decode(cache *transformer.KVCache, ids []int32, all bool) (logits []float32, err error) {
	defer recoverError(&err)
	m.last.ready = false
	n := len(ids)
	if err := cache.Check(m, len(m.Blocks), m.Policy().GemmDType(), n); err != nil {
		return nil, fmt.Errorf("gpt2: %w", err)
	}
	for i, id := range ids {
		if id < 0 || int(id) >= m.Config.VocabSize {
			return nil, fmt.Errorf("gpt2: token id %d at %d is outside the vocabulary [0, %d)", id, i, m.Config.VocabSize)
		}
	}
	start := cache.Len
	if err := m.carve(carveKey{b: 1, t: n, dt: m.Policy().GemmDType(), impl: transformer.AttnSDPA}); err != nil {
		return nil, err
	}
	bk, a := m.Backend(), &m.act
	pos := make([]int32, n)
	for i := range pos {
		pos[i] = int32(start + i)
	}
	if err := bk.Upload(a.ids, ids); err != nil {
		return nil, err
	}
	if err := bk.Upload(a.pos, pos); err != nil {
		return nil, err
	}
	p := m.NewPass(transformer.ForwardOptions{ReuseWeightCasts: start > 0})
	if err := bk.Embedding(a.emb, a.ids, m.WTE.Value); err != nil {
		return nil, fmt.Errorf("gpt2: wte: %w", err)
	}
	if err := bk.Embedding(a.g0, a.pos, m.WPE.Value); err != nil {
		return nil, fmt.Errorf("gpt2: wpe: %w", err)
	}
	if err := bk.Add(a.emb, a.emb, a.g0); err != nil {
		return nil, err
	}
	h := a.emb
	for i, k := range m.Blocks {
		var kv blockKV
		if kv.k, kv.v, err = cache.Rows(i, start, n); err != nil {
			return nil, err
		}
		if kv.kAll, kv.vAll, err = cache.Rows(i, 0, start+n); err != nil {
			return nil, err
		}
		if h, err = k.forward(&p, &m.sc, h, &kv); err != nil {
			return nil, fmt.Errorf("gpt2: block %d: %w", i, err)
		}
	}
	if err := m.LnF.Forward(&p, a.lnf, a.meanF, a.rstdF, h); err != nil {
		return nil, fmt.Errorf("gpt2: ln_f: %w", err)
	}
	rows, c := a.lnf, m.Config.NEmbd
	if !all {
		if rows, err = a.lnf.View((n-1)*c, 1, c); err != nil { // (1, C) h: the last token's
			return nil, err
		}
	}
	logits = make([]float32, rows.Numel()/c*m.Config.VocabSize)
	if err := m.Head.Logits(&p, rows, logits); err != nil {
		return nil, fmt.Errorf("gpt2: lm_head: %w", err)
	}
	cache.Len += n
	return logits, nil
}
