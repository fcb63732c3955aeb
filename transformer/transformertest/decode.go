package transformertest

import (
	"slices"
	"testing"

	"github.com/tune-ml/tune/generate"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
)

// Decoder is a causal LM with an incremental decode path, what CheckDecode checks.
type Decoder interface {
	transformer.Model
	transformer.IncrementalDecoder
}

// CheckDecode compares m's incremental decoding with its full forward on ids (one sequence) under the
// model's current policy: a prefill of ids[:prefill] asking for every position's logits, then each further
// token decoded alone; at every position the logits must be within tol (max|Δ|/max|ref| over the position's
// V logits) of Forward's. With greedy > 0, greedy generation of that many tokens from ids[:prefill] with and
// without the cache must also give the same tokens. It returns the worst position's error.
func CheckDecode(t *testing.T, m Decoder, ids []int32, prefill int, tol float64, greedy int) float64 {
	t.Helper()
	n := len(ids)
	full, err := m.Forward(&loaders.Batch{B: 1, T: n, InputIDs: ids, AttentionMask: ones(n)}, transformer.ForwardOptions{HostLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	v := full.NumLabels
	cache, err := m.NewKVCache(n)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Free()
	got, err := m.Decode(cache, ids[:prefill], true)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != prefill*v {
		t.Fatalf("prefill of %d tokens returned %d logits, want %d", prefill, len(got), prefill*v)
	}
	for _, id := range ids[prefill:] {
		last, err := m.Decode(cache, []int32{id}, false)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, last...)
	}
	if cache.Len != n {
		t.Errorf("cache holds %d positions after decoding %d", cache.Len, n)
	}
	worst := 0.0
	for p := range n {
		e, i := tensortest.RelErr(got[p*v:(p+1)*v], full.Logits[p*v:(p+1)*v])
		if !(e <= tol) {
			t.Errorf("position %d (prefill %d): cached logits off by %.3g relative (> %.0e) at vocabulary index %d", p, prefill, e, tol, i)
		}
		worst = max(worst, e)
	}
	if _, err := m.Decode(cache, ids[:1], false); err == nil {
		t.Error("decoding past the cache's positions did not fail")
	}
	if greedy > 0 {
		o := generate.Options{MaxNewTokens: greedy}
		plain, err := generate.Generate(m, ids[:prefill], o, nil)
		if err != nil {
			t.Fatal(err)
		}
		o.UseCache = true
		cached, err := generate.Generate(m, ids[:prefill], o, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(plain, cached) {
			t.Errorf("greedy: cached %v, uncached %v", cached, plain)
		}
	}
	return worst
}

func ones(n int) []int32 {
	v := make([]int32, n)
	for i := range v {
		v[i] = 1
	}
	return v
}
