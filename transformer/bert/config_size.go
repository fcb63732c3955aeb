package bert

import (
	"fmt"
	"math"

	"github.com/tune-ml/tune/internal/hostmem"
	"github.com/tune-ml/tune/tensor"
)

// MaxParameters is the largest model this package builds: 1e10 parameters, 40 GB of FP32 weights before their
// gradients and AdamW's two moments (16 bytes a parameter in all). The largest BERT-class encoders have about
// 1.5e9 (DeBERTa-v2-xxlarge; bert-large has 3.4e8), so a config beyond it is a typo, and refusing it gives an
// error instead of the Go runtime's fatal "out of memory".
const MaxParameters = 10_000_000_000

// maxDim is the largest size of one dimension: token ids are I32 and the kernels' GEMM sizes are 32-bit.
const maxDim = math.MaxInt32

// SizeError reports a config whose sizes this package refuses to build a model from. Key is the config.json
// key to fix: the one out of range, or, when only the total is too large, the size furthest above bert-base's.
type SizeError struct {
	Key    string // the config.json key: "vocab_size", "num_hidden_layers"
	Reason string // the value and the bound it exceeds
}

// Error formats as "vocab_size: 3000000000 is more than 2147483647 ...", the key being config.json's.
func (e *SizeError) Error() string { return e.Key + ": " + e.Reason }

// BadInput marks the error as the input's (internal/badinput): the config must change (exit status 2).
func (e *SizeError) BadInput() bool { return true }

// sizes lists the size keys with their values and bert-base's (DefaultBertConfig), the reference for which key
// is unusually large.
func (c *BertConfig) sizes() []struct {
	key       string
	v, normal int
} {
	d := DefaultBertConfig()
	return []struct {
		key       string
		v, normal int
	}{
		{"vocab_size", c.VocabSize, d.VocabSize}, {"hidden_size", c.HiddenSize, d.HiddenSize},
		{"num_hidden_layers", c.NumHiddenLayers, d.NumHiddenLayers},
		{"num_attention_heads", c.NumAttentionHeads, d.NumAttentionHeads},
		{"intermediate_size", c.IntermediateSize, d.IntermediateSize},
		{"max_position_embeddings", c.MaxPositionEmbeddings, d.MaxPositionEmbeddings},
		{"type_vocab_size", c.TypeVocabSize, d.TypeVocabSize}, {"num_labels", c.NumLabels(), 2}, // len(id2label)
	}
}

// NumParameters returns the number of parameters of a BertForSequenceClassification with config c, counted
// without building it (as transformers' num_parameters()): with V vocab, P positions, T token types, C hidden,
// I intermediate, N layers and L labels, the embeddings hold (V+P+T)·C + 2C, each layer 4(C²+C) + C·I + I +
// I·C + C + 4C (query, key, value, attention output; intermediate; output; two LayerNorms), the pooler C²+C and
// the classifier C·L + L. bert-base with 2 labels has 109,483,778. A count beyond 2^62 returns math.MaxInt64.
func (c *BertConfig) NumParameters() int64 {
	if c.approxParameters() > 1<<62 {
		return math.MaxInt64
	}
	i := func(x int) int64 { return int64(x) }
	V, P, T, C, I, N, L := i(c.VocabSize), i(c.MaxPositionEmbeddings), i(c.TypeVocabSize), i(c.HiddenSize),
		i(c.IntermediateSize), i(c.NumHiddenLayers), i(c.NumLabels())
	return (V+P+T)*C + 2*C + N*(4*(C*C+C)+2*C*I+I+C+4*C) + C*C + C + C*L + L
}

// approxParameters is NumParameters' count in float64, which does not saturate: for messages about configs
// far beyond the limit (hidden_size 1e9 is 4.9e19 parameters, not math.MaxInt64's 9.22e18).
func (c *BertConfig) approxParameters() float64 {
	f := func(x int) float64 { return float64(x) }
	v, p, t, ch, in, n, l := f(c.VocabSize), f(c.MaxPositionEmbeddings), f(c.TypeVocabSize), f(c.HiddenSize),
		f(c.IntermediateSize), f(c.NumHiddenLayers), f(c.NumLabels())
	return (v+p+t)*ch + 2*ch + n*(4*(ch*ch+ch)+2*ch*in+in+ch+4*ch) + ch*ch + ch + ch*l + l
}

// CheckSize returns a *SizeError when a size is beyond what this package can build: one above 2^31−1 (a 32-bit
// size for the kernels), or a model of more than MaxParameters parameters. Validate calls it; sizes must
// already be positive.
func (c *BertConfig) CheckSize() error {
	worst, ratio := "", 0.0
	for _, s := range c.sizes() {
		if s.v > maxDim {
			return &SizeError{Key: s.key, Reason: fmt.Sprintf("%d is more than %d (sizes are 32-bit in the kernels)", s.v, maxDim)}
		}
		if r := float64(s.v) / float64(s.normal); r > ratio {
			worst, ratio = s.key, r
		}
	}
	if n := c.NumParameters(); n > MaxParameters {
		a := c.approxParameters()
		return &SizeError{Key: worst, Reason: fmt.Sprintf("%d makes a model of %.3g parameters (%s of FP32 weights), "+
			"more than tune's limit of %.0e; BERT-class encoders have at most about 1.5e9 (bert-base 1.1e8)",
			c.sizeOf(worst), a, formatBytes(4*a), float64(MaxParameters))}
	}
	return nil
}

// sizeOf returns the value of size key.
func (c *BertConfig) sizeOf(key string) int {
	for _, s := range c.sizes() {
		if s.key == key {
			return s.v
		}
	}
	return 0
}

// hostBytesPerParameter is what building a model takes on the host: each parameter is allocated in FP32 (4
// bytes) and then packed into flat FP32 value and gradient buffers (8 bytes) before the first copies are freed.
const hostBytesPerParameter = 12

// memAvailable returns the memory available for new allocations in bytes (hostmem.Available: MemAvailable of
// /proc/meminfo, lowered to the process's cgroup limit); ok is false where neither can be read (not Linux). A
// variable so that tests can stand in a small machine.
var memAvailable = hostmem.Available

// parseMemAvailable reads the "MemAvailable: N kB" line of /proc/meminfo's contents, in bytes.
func parseMemAvailable(data []byte) (uint64, bool) { return hostmem.Parse(data) }

// checkHostMemory returns an error when b keeps tensors in host memory (the CPU backend) and the model of cfg
// would take more than the memory available, so that the Go runtime does not abort with "out of memory". A
// GPU backend reports a failed allocation as an error itself.
func checkHostMemory(b tensor.Backend, cfg BertConfig) error {
	if b.Name() != "cpu" {
		return nil
	}
	return cfg.HostMemoryError()
}

// HostMemoryError returns the error building the model of c on the CPU backend stops with when it would take
// more than the memory available (checkHostMemory), or nil; for recipes' validation, which warns before a run
// builds it.
func (c *BertConfig) HostMemoryError() error {
	avail, ok := memAvailable()
	need := hostBytesPerParameter * float64(c.NumParameters())
	if !ok || need <= float64(avail) {
		return nil
	}
	return fmt.Errorf("transformer: a model of %.3g parameters needs about %s of memory to build on the CPU "+
		"(%d bytes a parameter), but %s is available (MemAvailable in /proc/meminfo); use a smaller config",
		float64(c.NumParameters()), formatBytes(need), hostBytesPerParameter, formatBytes(float64(avail)))
}

// formatBytes renders a byte count in decimal units: "40 GB", "9.2 TB".
func formatBytes(n float64) string {
	for _, u := range []string{"B", "kB", "MB", "GB", "TB", "PB"} {
		if n < 1000 {
			return fmt.Sprintf("%.3g %s", n, u)
		}
		n /= 1000
	}
	return fmt.Sprintf("%.3g EB", n)
}
