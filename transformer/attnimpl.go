package transformer

import (
	"fmt"
	"log/slog"

	"github.com/tune-ml/tune/tensor"
)

// AttnChoice is a model's attention implementation: the one asked for (Set: the Go API, LoadOptions, the
// recipe's model.attn_implementation; the zero value means AttnSDPA) and, per head size and dtype, whether the
// backend's fused kernel covers it (Resolve). Model families keep one and carve their step arena for what
// Resolve returns.
type AttnChoice struct {
	want   string
	probes map[attnProbeKey]error // the probe's answer: nil (covered) or the backend's ErrUnsupported error
	logged bool                   // the fallback was logged once
	reason string                 // why the last Resolve fell back to eager ("" when it did not)
	logger *slog.Logger           // where the fallback is logged (nil: slog.Default())
}

// attnProbeKey is what a backend's fused kernel decides on (the head size and dtype; the sequence length is
// probed once, at the first shape, so a steady state of changing batch shapes allocates nothing).
type attnProbeKey struct {
	h, d    int
	dt      tensor.DType
	dropout bool
}

// Set asks for implementation impl ("" means AttnSDPA) and reports whether that changed the choice (the
// caller then re-carves its arena); an unknown name is an error naming the accepted ones.
func (c *AttnChoice) Set(impl string) (changed bool, err error) {
	if err := CheckAttnImplementation(impl); err != nil {
		return false, fmt.Errorf("transformer: %w", err)
	}
	if impl == "" {
		impl = AttnSDPA
	}
	changed = impl != c.Want()
	c.want = impl
	return changed, nil
}

// Want returns the implementation asked for: AttnSDPA (the default) or AttnEager.
func (c *AttnChoice) Want() string {
	if c.want == "" {
		return AttnSDPA
	}
	return c.want
}

// Fallback returns why the last Resolve chose eager although sdpa was asked for (the backend's ErrUnsupported
// message), or "".
func (c *AttnChoice) Fallback() string { return c.reason }

// SetLogger sets where the fallback is logged; nil means slog.Default().
func (c *AttnChoice) SetLogger(l *slog.Logger) { c.logger = l }

// Resolve returns the implementation a pass of sequence length t with h heads of size d in dtype dt and
// attention dropout dropout uses on backend b: AttnEager when asked; else AttnSDPA when the backend's fused op
// accepts the shape (asked once per head size and dtype, with a one-head probe of length t), else AttnEager,
// logging the backend's reason the first time. An error other than tensor.ErrUnsupported from the probe is
// returned. On a meta backend (tensor.IsMeta) the probe runs on the backend it stands in for.
func (c *AttnChoice) Resolve(b tensor.Backend, h, d, t int, dt tensor.DType, dropout float32) (string, error) {
	c.reason = ""
	if c.Want() == AttnEager {
		return AttnEager, nil
	}
	if tensor.IsMeta(b) { // a plan (tensor/meta): the backend it stands in for answers, or sdpa when none
		if b = tensor.MetaTarget(b); b == nil {
			return AttnSDPA, nil
		}
	}
	key := attnProbeKey{h, d, dt, dropout > 0}
	err, seen := c.probes[key]
	if !seen {
		err = probeAttention(b, d, t, dt, dropout)
		if err != nil && !errUnsupported(err) {
			return "", fmt.Errorf("transformer: probing fused attention (attn_implementation %q): %w", AttnSDPA, err)
		}
		if c.probes == nil {
			c.probes = map[attnProbeKey]error{}
		}
		c.probes[key] = err
	}
	if err == nil {
		return AttnSDPA, nil
	}
	c.reason = err.Error()
	if !c.logged {
		c.logged = true
		l := c.logger
		if l == nil {
			l = slog.Default()
		}
		l.Warn(fmt.Sprintf("attention: the %s backend's fused attention does not cover this shape; using attn_implementation %q (the two-pass path) instead: %v",
			b.Name(), AttnEager, err))
	}
	return AttnEager, nil
}

// probeAttention runs the fused forward and backward once on one head of the pass's T, D and dtype with a key
// mask and the dropout, and returns the backend's error (nil when it covers them).
func probeAttention(b tensor.Backend, d, t int, dt tensor.DType, dropout float32) (err error) {
	var ts []*tensor.Tensor
	defer func() {
		for _, x := range ts {
			b.Free(x)
		}
	}()
	alloc := func(dt tensor.DType, shape ...int) *tensor.Tensor {
		if err != nil {
			return nil
		}
		var x *tensor.Tensor
		if x, err = b.Alloc(dt, shape...); err == nil {
			ts = append(ts, x)
		}
		return x
	}
	op := func() tensor.AttnOperand { return tensor.AttnOperand{T: alloc(dt, 1, 1, t, d)} }
	a := tensor.AttentionArgs{B: 1, Hq: 1, Hkv: 1, Tq: t, Tk: t, D: d, Q: op(), K: op(), V: op(), O: op(),
		LSE: alloc(tensor.F32, 1, 1, t), Mask: alloc(tensor.F32, 1, t), Scale: 1, DropoutP: dropout}
	ba := tensor.AttentionBackwardArgs{AttentionArgs: a, DO: op(), DQ: op(), DK: op(), DV: op()}
	if err != nil {
		return err
	}
	if err = b.Attention(a); err != nil {
		return err
	}
	return b.AttentionBackward(ba)
}
