package probe

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// NaNOptions control FindNaN.
type NaNOptions struct {
	// Policy is the autocast policy of the passes (amp.FP32, amp.FP16, amp.BF16), as the run trains.
	Policy amp.Policy
	// Scale seeds the backward (the loss scale of an fp16 run's first step, PyTorch's init_scale 65536), so
	// that gradients overflow where training's would; 0 means 1.
	Scale float32
	// Forward only skips the backward (also skipped for a batch without labels).
	Forward bool
}

// BatchTrace is what one batch's passes showed.
type BatchTrace struct {
	Index    int     // the batch's position, from 0
	Rows, T  int     // its shape
	Forward  []Stat  // every observed tensor of the forward, in execution order
	Backward []Stat  // every observed tensor of the backward, in execution order (nil when it did not run)
	Grads    []Stat  // the trainable parameters' gradients after the backward, in NamedParameters order
	Loss     float32 // the mean loss (NaN without labels)
}

// NaNReport is FindNaN's result.
type NaNReport struct {
	Policy  amp.Policy   // the autocast policy of the passes
	Scale   float32      // the backward's seed
	Probes  bool         // projections were probed (the model is a transformer.Adaptable)
	Weights []Stat       // every parameter's value, NamedParameters order
	Data    []string     // problems found in the batches' inputs
	Batches []BatchTrace // the batches that ran
	First   *Stat        // the first non-finite tensor of the passes: the forward of each batch, then its backward
	FirstIn int          // the batch First was seen in
	// Upstream explains First: the module's own weights, or a finite input that overflowed.
	Upstream string
}

// Found reports whether anything non-finite (or bad data) turned up.
func (r *NaNReport) Found() bool { return r.First != nil || len(r.BadWeights()) > 0 || len(r.Data) > 0 }

// BadWeights returns the parameters whose values are not finite.
func (r *NaNReport) BadWeights() []Stat {
	var out []Stat
	for _, s := range r.Weights {
		if s.NonFinite() {
			out = append(out, s)
		}
	}
	return out
}

// FindNaN runs each batch forward (and backward, seeded with o.Scale, when it has labels) under o.Policy with
// every module output, projection input and gradient checked for inf and NaN, after scanning every parameter
// value and the batches' inputs (ids outside the vocabulary, masks other than 0/1, non-finite regression
// targets). The projection probes are removed again before it returns; the gradients are left zeroed.
func FindNaN(m transformer.Model, batches []*loaders.Batch, o NaNOptions) (rep *NaNReport, err error) {
	if o.Scale == 0 {
		o.Scale = 1
	}
	b := m.Backend()
	rep = &NaNReport{Policy: o.Policy, Scale: o.Scale}
	for _, p := range m.NamedParameters() {
		s, _, err := statOf(b, p.Name, KindWeight, p.Value)
		if err != nil {
			return nil, err
		}
		rep.Weights = append(rep.Weights, s)
	}
	skip := map[int]bool{}
	for i, bt := range batches {
		problems, fatal := checkData(m, i, bt)
		rep.Data = append(rep.Data, problems...)
		skip[i] = fatal
	}

	rec := &recorder{b: b, probes: true}
	restore, err := withProbes(m, rec)
	if err != nil {
		return nil, err
	}
	defer func() {
		if rerr := restore(); err == nil {
			err = rerr
		}
	}()
	rep.Probes = restore != nil
	m.SetPolicy(o.Policy)
	for i, bt := range batches {
		if skip[i] {
			continue // ids outside the vocabulary or a bad mask: the forward would only refuse the batch
		}
		tr := BatchTrace{Index: i, Rows: bt.B, T: bt.T}
		rec.reset()
		train := !o.Forward && m.Supervised(bt) > 0 && (bt.Labels != nil || bt.Targets != nil)
		if err := m.ZeroGrad(); err != nil {
			return nil, err
		}
		out, err := m.Forward(bt, transformer.ForwardOptions{Train: train, Observe: rec.observer()})
		if err != nil {
			return nil, fmt.Errorf("probe: forward of batch %d: %w", i+1, err)
		}
		tr.Loss = out.Loss
		tr.Forward = append([]Stat(nil), rec.stats...)
		if train {
			rec.reset()
			if err := m.Backward(o.Scale); err != nil {
				return nil, fmt.Errorf("probe: backward of batch %d: %w", i+1, err)
			}
			tr.Backward = append([]Stat(nil), rec.stats...)
			for _, p := range m.NamedParameters() {
				if p.Grad == nil {
					continue
				}
				s, _, err := statOf(b, p.Name, KindParamGrad, p.Grad)
				if err != nil {
					return nil, err
				}
				tr.Grads = append(tr.Grads, s)
			}
		}
		rep.Batches = append(rep.Batches, tr)
		if rep.First == nil {
			for _, list := range [][]Stat{tr.Forward, tr.Backward} {
				if s := firstBad(list); s != nil {
					rep.First, rep.FirstIn = s, i
					rep.Upstream = rep.explain(list, s)
					break
				}
			}
		}
	}
	return rep, m.ZeroGrad()
}

// withProbes installs the projection probes and returns the function that puts the projections back (nil when
// the model has none to replace).
func withProbes(m transformer.Model, rec *recorder) (func() error, error) {
	a, ok := m.(transformer.Adaptable)
	if !ok {
		return nil, nil
	}
	orig := map[string]transformer.Projection{}
	for _, mp := range a.Projections() {
		orig[mp.Path] = mp.Projection
	}
	if _, err := installProbes(m, rec); err != nil {
		return nil, err
	}
	return func() error { return a.ReplaceProjections(orig) }, nil
}

func firstBad(list []Stat) *Stat {
	for i := range list {
		if list[i].NonFinite() {
			return &list[i]
		}
	}
	return nil
}

// explain says where the first non-finite tensor s (in list) comes from: the module's own weights, or its
// input, which was finite.
func (r *NaNReport) explain(list []Stat, s *Stat) string {
	var bad []string
	for _, w := range r.Weights {
		if w.NonFinite() && strings.HasPrefix(w.Module, s.Module+".") {
			bad = append(bad, w.Module)
		}
	}
	var big []string
	for _, w := range r.Weights {
		if r.Policy.Enabled && r.Policy.DType == tensor.F16 && w.MaxAbs > 65504 && strings.HasPrefix(w.Module, s.Module+".") {
			big = append(big, fmt.Sprintf("%s (max |w| %.4g)", w.Module, w.MaxAbs))
		}
	}
	switch {
	case len(bad) > 0:
		return fmt.Sprintf("its own weights are non-finite: %s", strings.Join(bad, ", "))
	case len(big) > 0:
		return fmt.Sprintf("its weights exceed FP16's 65504, so their FP16 copies are inf: %s; train in bf16 or fp32", strings.Join(big, ", "))
	case s.Kind == KindOutput:
		for _, x := range list {
			if x.Module == s.Module && x.Kind == KindInput {
				return "its input is finite and its weights are finite: the module's computation overflows (max |input| " + fmt.Sprintf("%.4g", x.MaxAbs) + ")"
			}
		}
		return "every module before it is finite and so are its weights: its computation overflows (an FP16 activation above 65504?)"
	case s.Kind == KindGrad:
		return "the gradient arriving from the modules after it (or the loss seed × loss scale) overflows"
	}
	return ""
}

// checkData lists problems in batch i's inputs: token ids outside the model's vocabulary (the rows of its word
// embedding table) and attention-mask values other than 0 and 1, which make the batch unusable (fatal), and
// non-finite regression targets, which a pass can still show the effect of.
func checkData(m transformer.Model, i int, bt *loaders.Batch) (out []string, fatal bool) {
	vocab := -1
	for _, p := range m.NamedParameters() {
		if strings.HasSuffix(p.Name, "word_embeddings.weight") || strings.HasSuffix(p.Name, "embed_tokens.weight") || strings.HasSuffix(p.Name, "wte.weight") {
			vocab = p.Value.Shape[0]
			break
		}
	}
	for j, id := range bt.InputIDs {
		if id < 0 || (vocab > 0 && int(id) >= vocab) {
			out = append(out, fmt.Sprintf("batch %d row %d position %d: input id %d is outside the vocabulary 0..%d", i+1, j/bt.T+1, j%bt.T, id, vocab-1))
			fatal = true
			break
		}
	}
	for j, v := range bt.AttentionMask {
		if v != 0 && v != 1 {
			out = append(out, fmt.Sprintf("batch %d row %d position %d: attention mask %d is not 0 or 1", i+1, j/bt.T+1, j%bt.T, v))
			fatal = true
			break
		}
	}
	for j, v := range bt.Targets {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			out = append(out, fmt.Sprintf("batch %d row %d: the regression target is %v", i+1, j+1, v))
		}
	}
	return out, fatal
}

// Write prints the report: the weight and data checks, the forward (and backward) trace of the batch where the
// first non-finite tensor appeared (else of the first batch), and a verdict line.
func (r *NaNReport) Write(w io.Writer) error {
	ew := &errWriter{w: w}
	ew.printf("precision: %s, backward seeded with loss scale %g; %s\n", r.Policy.Precision(), r.Scale, plural(len(r.Batches), "batch", "batches"))
	bad := r.BadWeights()
	ew.printf("\nweights: %d of %d tensors non-finite\n", len(bad), len(r.Weights))
	for _, s := range bad {
		ew.printf("  %-58s %s\n", s.Module, s.Describe())
	}
	ew.printf("\ndata: ")
	if len(r.Data) == 0 {
		ew.printf("ok (token ids inside the vocabulary, attention masks 0/1, targets finite)\n")
	} else {
		ew.printf("%d problems\n", len(r.Data))
		for _, d := range r.Data {
			ew.printf("  %s\n", d)
		}
	}
	if len(r.Batches) > 0 {
		tr := r.Batches[0]
		if r.First != nil {
			tr = r.Batches[r.FirstIn]
		}
		ew.printf("\nforward, batch %d (%d×%d), loss %v:\n", tr.Index+1, tr.Rows, tr.T, tr.Loss)
		writeTrace(ew, tr.Forward)
		switch {
		case tr.Backward == nil:
		case firstBad(tr.Forward) != nil:
			ew.printf("\nbackward, batch %d: not shown: the forward was already non-finite, so every gradient is too\n", tr.Index+1)
		default:
			ew.printf("\nbackward, batch %d (gradients × loss scale %g):\n", tr.Index+1, r.Scale)
			writeTrace(ew, tr.Backward)
		}
		if tr.Backward != nil {
			var badGrads []Stat
			for _, g := range tr.Grads {
				if g.NonFinite() {
					badGrads = append(badGrads, g)
				}
			}
			ew.printf("\nparameter gradients: %d of %d non-finite\n", len(badGrads), len(tr.Grads))
			for i, g := range badGrads {
				if i == 5 {
					ew.printf("  ... and %d more\n", len(badGrads)-5)
					break
				}
				ew.printf("  %-58s %s\n", g.Module, g.Describe())
			}
		}
	}
	ew.printf("\n")
	switch {
	case r.First != nil:
		ew.printf("first non-finite: %s (batch %d, %s): %s\n", r.First.Where(), r.FirstIn+1, r.First.DType, r.First.Describe())
		if r.Upstream != "" {
			ew.printf("  %s\n", r.Upstream)
		}
	case len(bad) > 0 || len(r.Data) > 0:
		ew.printf("every pass stayed finite, but the weights or the data above are not\n")
	default:
		ew.printf("no non-finite value: weights, data, every module's output and gradient are finite\n")
	}
	return ew.err
}

// writeTrace prints one line per observed tensor, up to three after the first non-finite one.
func writeTrace(ew *errWriter, list []Stat) {
	ew.printf("  %-46s %-10s %-5s %-11s %s\n", "module", "tensor", "dtype", "max|x|", "non-finite")
	bad := -1
	for i, s := range list {
		if bad < 0 && s.NonFinite() {
			bad = i
		}
		if bad >= 0 && i > bad+3 {
			ew.printf("  ... %d more tensors\n", len(list)-i)
			break
		}
		nf := "0"
		if s.NonFinite() {
			nf = s.Describe()
		}
		ew.printf("  %-46s %-10s %-5s %-11.4g %s\n", s.Module, s.Kind, s.DType, s.MaxAbs, nf)
	}
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, a ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, a...)
	}
}

// plural writes n with the singular or plural noun.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
