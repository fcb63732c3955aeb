package generate

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/transformer"
)

// nanLM is fakeLM whose logits turn NaN from the given new token on (1-based), in every entry or the first.
type nanLM struct {
	fakeLM
	from, prompt int
	all          bool
}

func (f *nanLM) Forward(b *loaders.Batch, o transformer.ForwardOptions) (transformer.Output, error) {
	out, err := f.fakeLM.Forward(b, o)
	if b.T-f.prompt+1 >= f.from {
		row := out.Logits[(b.T-1)*f.V:]
		for i := range row {
			if f.all || i == 0 {
				row[i] = float32(math.NaN())
			}
		}
	}
	return out, err
}

// TestNonFiniteLogits: a checkpoint with a NaN final-norm weight (every logit NaN) generated greedy nonsense,
// "Fox the while quietly jovial...", and an empty sample, both with exit status 0. Generate now stops with
// ErrNonFinite at the first new token whose logits hold a NaN or an infinity, greedy or sampled, naming it.
func TestNonFiniteLogits(t *testing.T) {
	for _, c := range []struct {
		name   string
		from   int
		all    bool
		sample bool
	}{
		{"every logit NaN, greedy", 1, true, false},
		{"every logit NaN, sampled", 1, true, true},
		{"one logit NaN at the third token", 3, false, false},
	} {
		m := &nanLM{fakeLM: fakeLM{V: 10}, from: c.from, prompt: 1, all: c.all}
		out, err := Generate(m, []int32{3}, Options{MaxNewTokens: 5, DoSample: c.sample, Temperature: 1, TopP: 1}, nil)
		if !errors.Is(err, ErrNonFinite) || len(out) != c.from-1 || !strings.Contains(err.Error(), "new token") {
			t.Errorf("%s: out %v, error %v; want ErrNonFinite after %d tokens", c.name, out, err, c.from-1)
		}
	}
}
