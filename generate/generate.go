package generate

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/internal/smallfile"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/transformer"
)

// ErrTooLong is wrapped by Generate's error when the prompt and max_new_tokens do not fit the model's key/value
// cache (its context length): the request, not the model, is at fault.
var ErrTooLong = errors.New("the request is longer than the model's context")

// ErrNonFinite is wrapped by Generate's error when the model's logits for a new token hold a NaN or an infinity:
// its weights (or the activations of this prompt) are not finite, and whatever token was picked would be noise.
// transformers' greedy search returns the NaN's index and its sampling fails in torch.multinomial; tune stops.
var ErrNonFinite = errors.New("the model's logits are not finite")

// Options are the generation settings; the names are transformers' GenerationConfig's.
type Options struct {
	// MaxNewTokens is the most tokens generated (max_new_tokens).
	MaxNewTokens int
	// DoSample samples instead of greedy search.
	DoSample bool
	// Temperature divides the logits before sampling; 1 leaves them.
	Temperature float64
	// TopK keeps the k most likely tokens when sampling; 0 keeps all.
	TopK int
	// TopP keeps the most likely tokens whose probability reaches it when sampling; 1 keeps all.
	TopP float64
	// Seed seeds the sampling generator.
	Seed uint64
	// EOS are the ids that end generation (eos_token_id); empty: only MaxNewTokens stops.
	EOS []int32
	// UseCache decodes with a key/value cache when the model has one (transformer.IncrementalDecoder): the
	// prompt in one pass, then one token per pass (use_cache; Config.Options sets it, as transformers
	// defaults to it). Without it every step runs the whole sequence again.
	UseCache bool
}

// Config is what generation_config.json holds that tune uses.
type Config struct {
	EOS          []int32  // eos_token_id (an int or a list)
	DoSample     bool     // do_sample
	Temperature  *float64 // temperature; nil when absent
	TopK         *int     // top_k
	TopP         *float64 // top_p
	MaxNewTokens *int     // max_new_tokens
	UseCache     *bool    // use_cache; nil when absent (true)
	Path         string   // the file read; "" when there was none
	// Unapplied lists the decoding settings of generation_config.json that transformers' generate would
	// apply and tune does not (repetition_penalty 1.5, num_beams 4, max_length 4096, ...), as "key value";
	// keys at their neutral values are not listed. The output then differs from transformers'.
	Unapplied []string
}

// unappliedKeys are generation_config.json's decoding keys tune does not implement, with the value at which
// transformers' generate (GenerationConfig's defaults) does nothing. max_length has none: when set, it bounds
// prompt + new tokens there, while tune generates max_new_tokens.
var unappliedKeys = []struct {
	key     string
	neutral func(json.RawMessage) bool
}{
	{"repetition_penalty", isNumber(1)}, {"encoder_repetition_penalty", isNumber(1)}, {"no_repeat_ngram_size", isNumber(0)},
	{"num_beams", isNumber(1)}, {"num_beam_groups", isNumber(1)}, {"penalty_alpha", isNull}, {"min_p", isNull},
	{"typical_p", isNumber(1)}, {"epsilon_cutoff", isNumber(0)}, {"eta_cutoff", isNumber(0)},
	{"min_length", isNumber(0)}, {"min_new_tokens", isNull}, {"max_length", isNull}, {"max_time", isNull},
	{"bad_words_ids", isNull}, {"suppress_tokens", isNull}, {"begin_suppress_tokens", isNull},
	{"forced_bos_token_id", isNull}, {"forced_eos_token_id", isNull}, {"sequence_bias", isNull},
	{"exponential_decay_length_penalty", isNull}, {"guidance_scale", isNull}, {"stop_strings", isNull},
}

// isNumber returns a predicate for a JSON number equal to v (or null, transformers' "unset").
func isNumber(v float64) func(json.RawMessage) bool {
	return func(raw json.RawMessage) bool {
		var f *float64
		return json.Unmarshal(raw, &f) == nil && (f == nil || *f == v)
	}
}

// isNull reports whether raw is JSON null (or empty: [] and {} set nothing either).
func isNull(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "null" || s == "[]" || s == "{}"
}

// ReadConfig reads generation_config.json from a model directory, falling back to config.json's
// eos_token_id when there is no such file (as transformers builds one from the model config).
func ReadConfig(dir string) (*Config, error) {
	c := &Config{}
	path := filepath.Join(dir, "generation_config.json")
	data, err := smallfile.Read(path)
	if errors.Is(err, os.ErrNotExist) {
		path = filepath.Join(dir, loaders.ConfigName)
		if data, err = smallfile.Read(path); errors.Is(err, os.ErrNotExist) {
			return c, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	var j struct {
		EOS          json.RawMessage `json:"eos_token_id"`
		DoSample     bool            `json:"do_sample"`
		Temperature  *float64        `json:"temperature"`
		TopK         *int            `json:"top_k"`
		TopP         *float64        `json:"top_p"`
		MaxNewTokens *int            `json:"max_new_tokens"`
		UseCache     *bool           `json:"use_cache"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, badinput.Errorf("generate: %s: invalid JSON: %w", path, loaders.DescribeJSONError(data, err))
		}
		return nil, badinput.Errorf("generate: %s: %w", path, loaders.DescribeJSONError(data, err))
	}
	c.Path = path
	// The file must change for any of these (exit 2), naming it, the key, the value and what is accepted.
	bad := func(key string, v any, want string) error {
		return badinput.Errorf("generate: %s: %s %v: want %s; fix it, or remove the key for transformers' default", path, key, v, want)
	}
	if len(j.EOS) > 0 && string(j.EOS) != "null" {
		var list []json.RawMessage
		if json.Unmarshal(j.EOS, &list) != nil {
			list = []json.RawMessage{j.EOS}
		}
		for _, raw := range list {
			var id float64
			if json.Unmarshal(raw, &id) != nil || id < 0 || id != math.Trunc(id) || id > math.MaxInt32 {
				return nil, bad("eos_token_id", clipRaw(j.EOS), "a token id (a whole number from 0, such as the "+
					"tokenizer's eos_token has) or a list of them")
			}
			c.EOS = append(c.EOS, int32(id))
		}
	}
	if strings.HasSuffix(path, "generation_config.json") {
		switch t, k, p, n := j.Temperature, j.TopK, j.TopP, j.MaxNewTokens; {
		case t != nil && !(*t >= 0 && !math.IsInf(*t, 0)):
			return nil, bad("temperature", *t, "a number ≥ 0 (sampling needs > 0; 1 leaves the logits as they are)")
		case k != nil && *k < 0:
			return nil, bad("top_k", *k, "a whole number ≥ 0 (0 keeps every token)")
		case p != nil && !(*p >= 0 && *p <= 1):
			return nil, bad("top_p", *p, "a number from 0 to 1 (1 keeps every token)")
		case n != nil && *n < 1:
			return nil, bad("max_new_tokens", *n, "a whole number ≥ 1")
		}
	}
	if strings.HasSuffix(path, "generation_config.json") {
		c.DoSample, c.Temperature, c.TopK, c.TopP, c.MaxNewTokens = j.DoSample, j.Temperature, j.TopK, j.TopP, j.MaxNewTokens
		c.UseCache = j.UseCache
		var all map[string]json.RawMessage
		if json.Unmarshal(data, &all) == nil {
			for _, k := range unappliedKeys {
				if raw, ok := all[k.key]; ok && !k.neutral(raw) {
					v := string(raw)
					if len(v) > 40 {
						v = v[:40] + "..."
					}
					c.Unapplied = append(c.Unapplied, k.key+" "+v)
				}
			}
		}
	}
	return c, nil
}

// clipRaw is a JSON value for a message, cut to 40 bytes.
func clipRaw(raw json.RawMessage) string {
	v := string(raw)
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	return v
}

// CheckVocab returns a bad-input error naming the file when an eos_token_id is not a token of a model with
// vocabSize tokens (ids 0..vocabSize-1): generation would never stop at it. nil when every id fits or vocabSize
// is unknown (≤ 0).
func (c *Config) CheckVocab(vocabSize int) error {
	for _, id := range c.EOS {
		if vocabSize > 0 && int(id) >= vocabSize {
			return badinput.Errorf("generate: %s: eos_token_id %d is not a token of the model, whose vocabulary has "+
				"ids 0 to %d (config.json's vocab_size %d): want the model's end-of-sequence id (the tokenizer's "+
				"eos_token); fix it, or use the model's own %s", c.Path, id, vocabSize-1, vocabSize, filepath.Base(c.Path))
		}
	}
	return nil
}

// Options returns the file's settings over transformers' defaults (greedy, max_new_tokens 20 when the file
// sets none, temperature 1, top_k 50, top_p 1, use_cache true).
func (c *Config) Options() Options {
	o := Options{MaxNewTokens: 20, DoSample: c.DoSample, Temperature: 1, TopK: 50, TopP: 1, EOS: c.EOS, UseCache: true}
	if c.UseCache != nil {
		o.UseCache = *c.UseCache
	}
	if c.Temperature != nil {
		o.Temperature = *c.Temperature
	}
	if c.TopK != nil {
		o.TopK = *c.TopK
	}
	if c.TopP != nil {
		o.TopP = *c.TopP
	}
	if c.MaxNewTokens != nil {
		o.MaxNewTokens = *c.MaxNewTokens
	}
	return o
}

// LM is what generation needs of a model: transformer.Model's Forward.
type LM interface {
	// Forward runs the model; generation asks for host logits (B = 1, all positions).
	Forward(b *loaders.Batch, opts transformer.ForwardOptions) (transformer.Output, error)
}

// Check validates the options.
func (o Options) Check() error {
	switch {
	case o.MaxNewTokens < 1:
		return fmt.Errorf("generate: max_new_tokens %d: want at least 1", o.MaxNewTokens)
	case o.DoSample && !(o.Temperature > 0):
		return fmt.Errorf("generate: temperature %v: want > 0 when sampling", o.Temperature)
	case o.TopK < 0:
		return fmt.Errorf("generate: top_k %d is negative", o.TopK)
	case o.DoSample && !(o.TopP > 0 && o.TopP <= 1):
		return fmt.Errorf("generate: top_p %v: want 0 < top_p <= 1", o.TopP)
	}
	return nil
}

// Generate continues prompt and returns the new ids (the EOS that ended it included). emit, when not nil,
// is called with each new id as it is chosen; an error from it stops generation and is returned. With
// opts.UseCache and a model that is a transformer.IncrementalDecoder it decodes with a key/value cache of
// len(prompt)+MaxNewTokens−1 positions; otherwise each step runs the whole sequence (the same logits).
func Generate(m LM, prompt []int32, opts Options, emit func(id int32) error) ([]int32, error) {
	if err := opts.Check(); err != nil {
		return nil, err
	}
	if len(prompt) == 0 {
		return nil, errors.New("generate: the prompt has no tokens")
	}
	total := len(prompt) + opts.MaxNewTokens - 1 // the positions the last forward sees
	limit := 0
	if l, ok := m.(transformer.ContextLimiter); ok {
		limit = l.ContextLimit()
	}
	fix := "lower max_new_tokens"
	if limit > 0 && len(prompt) > limit {
		fix = "shorten the prompt"
	}
	d, cached := m.(transformer.IncrementalDecoder)
	cached = cached && opts.UseCache
	if limit > 0 && total > limit && !cached { // the cache refuses it itself; a forward per token would run on
		return nil, fmt.Errorf("generate: %d prompt tokens + max_new_tokens %d need %d positions, more than the model's context of %d (%s): %w",
			len(prompt), opts.MaxNewTokens, total, limit, fix, ErrTooLong)
	}
	next := fullForward(m, prompt)
	if cached {
		cache, err := d.NewKVCache(total)
		if err != nil {
			return nil, fmt.Errorf("generate: %d prompt tokens + max_new_tokens %d: %w (%s): %w", len(prompt), opts.MaxNewTokens, err, fix, ErrTooLong)
		}
		defer cache.Free()
		pending := prompt
		next = func(id int32) ([]float32, error) {
			if id >= 0 {
				pending = []int32{id}
			}
			return d.Decode(cache, pending, false)
		}
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x9e3779b97f4a7c15))
	var out []int32
	last, err := next(-1)
	for err == nil {
		if err := checkFinite(last, len(out)+1); err != nil {
			return out, err
		}
		var id int32
		if opts.DoSample {
			id = sample(last, opts, rng)
		} else {
			id = argmax(last)
		}
		out = append(out, id)
		if emit != nil {
			if err := emit(id); err != nil {
				return out, err
			}
		}
		if len(out) == opts.MaxNewTokens || slices.Contains(opts.EOS, id) {
			return out, nil
		}
		last, err = next(id)
	}
	return out, err
}

// fullForward returns the step function of generation without a cache: each call appends id (none when
// negative) to the sequence, runs the whole sequence and returns the last position's logits.
func fullForward(m LM, prompt []int32) func(id int32) ([]float32, error) {
	seq := slices.Clone(prompt)
	return func(id int32) ([]float32, error) {
		if id >= 0 {
			seq = append(seq, id)
		}
		b := &loaders.Batch{B: 1, T: len(seq), InputIDs: seq, TokenTypeIDs: make([]int32, len(seq)), AttentionMask: ones(len(seq))}
		res, err := m.Forward(b, transformer.ForwardOptions{HostLogits: true})
		if err != nil {
			return nil, err
		}
		V := res.NumLabels
		if V <= 0 || len(res.Logits) != len(seq)*V {
			return nil, fmt.Errorf("generate: the model returned %d logits for %d positions (vocabulary %d)", len(res.Logits), len(seq), V)
		}
		return res.Logits[(len(seq)-1)*V:], nil
	}
}

func ones(n int) []int32 {
	v := make([]int32, n)
	for i := range v {
		v[i] = 1
	}
	return v
}

// checkFinite returns an error wrapping ErrNonFinite when logits, those of new token n (1-based), hold a NaN or
// an infinity.
func checkFinite(logits []float32, n int) error {
	bad, first := 0, -1
	for i, v := range logits {
		if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
			if bad++; first < 0 {
				first = i
			}
		}
	}
	if bad == 0 {
		return nil
	}
	return fmt.Errorf("generate: new token %d: %d of the %d logits are NaN or infinite (first: id %d = %v): the "+
		"model's weights are probably not finite (saved by a diverged run, or a damaged file): load an earlier "+
		"checkpoint or the original model: %w", n, bad, len(logits), first, logits[first], ErrNonFinite)
}

// argmax returns the first index of the largest logit (torch.argmax); NaN never wins.
func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] || math.IsNaN(float64(x[best])) {
			best = i
		}
	}
	return int32(best)
}

// sample draws a token after the temperature, top-k and top-p warpers (transformers' logits_process.py).
func sample(logits []float32, o Options, rng *rand.Rand) int32 {
	scores := make([]float64, len(logits))
	for i, v := range logits {
		scores[i] = float64(v) / o.Temperature
	}
	if k := o.TopK; k > 0 && k < len(scores) {
		sorted := append([]float64(nil), scores...)
		sort.Sort(sort.Reverse(sort.Float64Slice(sorted)))
		kth := sorted[k-1]
		for i, s := range scores {
			if s < kth {
				scores[i] = math.Inf(-1)
			}
		}
	}
	probs := softmax(scores)
	if o.TopP < 1 {
		idx := make([]int, len(probs))
		for i := range idx {
			idx[i] = i
		}
		// Ascending, as TopPLogitsWarper sorts; tokens whose cumulative probability is <= 1 - top_p go.
		sort.SliceStable(idx, func(a, b int) bool { return scores[idx[a]] < scores[idx[b]] })
		cum := 0.0
		for n, i := range idx {
			cum += probs[i]
			if cum <= 1-o.TopP && n < len(idx)-1 {
				scores[i] = math.Inf(-1)
			}
		}
		probs = softmax(scores)
	}
	r := rng.Float64()
	acc := 0.0
	lastPositive := 0
	for i, p := range probs {
		if p > 0 {
			lastPositive = i
		}
		acc += p
		if r < acc {
			return int32(i)
		}
	}
	return int32(lastPositive)
}

func softmax(s []float64) []float64 {
	m := math.Inf(-1)
	for _, v := range s {
		m = math.Max(m, v)
	}
	out := make([]float64, len(s))
	sum := 0.0
	for i, v := range s {
		out[i] = math.Exp(v - m)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}
